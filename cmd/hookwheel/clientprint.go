package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// How the client commands show things to people: tables aligned with
// tabwriter, times as RFC 3339 in UTC (what --at takes back) followed by how
// far they are from now, and long values cut to a line.

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// when is t in UTC, RFC 3339 to the second, and how far it is from now:
// "2030-01-02T15:04:05Z (in 5m)".
func when(t, now time.Time) string {
	return t.UTC().Format(time.RFC3339) + " (" + relative(t.Sub(now)) + ")"
}

// relative says how far away d is, "in 5m" or "5m ago".
func relative(d time.Duration) string {
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + humanDuration(d)
	}
	return humanDuration(-d) + " ago"
}

// humanDuration rounds d to what a person reads at a glance: 42s, 5m12s,
// 42m, 5h12m, 3d4h, 45d.
func humanDuration(d time.Duration) string {
	d = d.Abs().Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	if d < 10*time.Minute {
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	// Each unit is rounded before it is compared, so that 59m59s reads 1h00m,
	// not 60m.
	if m := d.Round(time.Minute); m < time.Hour {
		return fmt.Sprintf("%dm", m/time.Minute)
	} else if m < 24*time.Hour {
		return fmt.Sprintf("%dh%02dm", m/time.Hour, m%time.Hour/time.Minute)
	}
	if h := d.Round(time.Hour); h < 7*24*time.Hour {
		return fmt.Sprintf("%dd%dh", h/(24*time.Hour), h%(24*time.Hour)/time.Hour)
	}
	return fmt.Sprintf("%dd", d.Round(24*time.Hour)/(24*time.Hour))
}

// oneLine fits s on one line of at most width characters, saying how long it
// was when it had to be cut. Control characters are escaped: s comes from
// receivers' answers and tasks, and an escape sequence written as is would
// be obeyed by the terminal (move the cursor, rewrite the clipboard).
func oneLine(s string, width int) string {
	flat := escapeControls(strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\t", " ").Replace(s))
	if utf8.RuneCountInString(flat) <= width {
		return flat
	}
	runes := []rune(flat)
	return string(runes[:width]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// escapeControls writes C0 and C1 control characters and DEL as \xNN, and
// bytes that are not UTF-8 as \xNN too.
func escapeControls(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
