package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/schedule"
)

// FuzzParse checks that Parse refuses what it cannot read with an *Error
// naming the field at fault, and that the fire times of what it accepts are
// consistent in any zone, across daylight-saving transitions included.
//
// created is the schedule's creation (the @every anchor) in Unix seconds and
// offset how far from it, in nanoseconds, the fire times are asked for; both
// are folded into a range where robfig's five-year search means something.
func FuzzParse(f *testing.F) {
	exprs := []string{
		"* * * * *", "30 2 * * *", "*/15 2 * * *", "0 30 1,2 * * *", "0 9-17 * * 1-5", "*/5 * * * *",
		"*/2 * * * * *", "0 0,30 2,3 * * *", "0 0 29 2 *", "0 0 31 * *", "0 0 1,15 JAN,JUL *", "0 0 * * MON-FRI",
		"0 0 0 * * SUN", "59 23 31 12 *", "0 0 30 2 *", "60 * * * *", "* * * * * * *", "0 0 1 1 ?",
		"@daily", "@midnight", "@hourly", "@weekly", "@monthly", "@yearly", "@annually", "@reboot",
		"@every 1s", "@every 90s", "@every 1h30m", "@every 1.5s", "@every 999ms", "@every 0s", "@every -1h", "@every",
		"@every 100000h", "TZ=UTC * * * * *", "CRON_TZ=Europe/Paris 0 9 * * *", "", "  \t ",
	}
	// Schedules next to the 2026 transitions of TestNextAcrossDST, and
	// Samoa's 30 December 2011, which did not happen: each starts from
	// just before a reading that does not exist, or inside the second pass
	// of a repeated hour, where a fire time already gone must not come back.
	at := func(s string) int64 {
		t, err := time.Parse(time.RFC3339, s)
		require.NoError(f, err)
		return t.Unix()
	}
	transitions := []struct {
		expr, zone string
		from       int64
	}{
		{"30 2 * * *", "Europe/Paris", at("2026-03-29T00:59:59Z")},
		{"*/15 2 * * *", "Europe/Paris", at("2026-03-29T00:50:00Z")},
		{"0 0,30 2,3 * * *", "Europe/Paris", at("2026-03-29T00:59:00Z")},
		{"30 2 * * *", "Europe/Paris", at("2026-10-25T01:10:00Z")},
		{"*/10 2 * * *", "Europe/Paris", at("2026-10-25T01:05:00Z")},
		{"30 * * * *", "Europe/Paris", at("2026-10-25T00:45:00Z")},
		{"30 1 * * *", "America/New_York", at("2026-11-01T06:10:00Z")},
		{"0 30 1,2 * * *", "America/New_York", at("2026-11-01T05:00:00Z")},
		{"30 2 * * *", "America/New_York", at("2026-03-08T06:59:59Z")},
		{"*/20 2 * * *", "Australia/Lord_Howe", at("2026-10-03T15:00:00Z")},
		{"45 1 * * *", "Australia/Lord_Howe", at("2026-04-04T15:10:00Z")},
		{"0 0 * * *", "America/Santiago", at("2026-09-06T03:59:00Z")},
		{"0 12 * * *", "Pacific/Apia", at("2011-12-29T09:30:00Z")},
		{"@every 1h", "Europe/Paris", at("2026-10-25T00:30:00Z")},
		{"@daily", "Asia/Kathmandu", at("2026-01-01T00:00:00Z")},
	}
	for _, tr := range transitions {
		f.Add(tr.expr, tr.zone, tr.from, int64(0))
		f.Add(tr.expr, tr.zone, tr.from-3600, int64(time.Hour))
	}
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Local", "", "Mars/Olympus_Mons", "../../etc/passwd"}
	for i, expr := range exprs {
		f.Add(expr, zones[i%len(zones)], at("2026-06-01T12:00:00Z"), int64(i)*int64(time.Hour))
		f.Add(expr, zones[(i+1)%4], transitions[i%len(transitions)].from, -int64(i)*int64(time.Minute)-1)
	}

	// The same fields the package reads, to tell whether a fire time's
	// local reading is one the expression names.
	parser := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

	f.Fuzz(func(t *testing.T, expr, zone string, created, offset int64) {
		const from, span = 946684800, 100 * 365 * 24 * 3600 // 2000-01-01, a century
		anchor := time.Unix(from+((created-from)%span+span)%span, 0).UTC()
		const offsetSpan = int64(5 * 365 * 24 * time.Hour)
		after := anchor.Add(time.Duration(offset % offsetSpan))

		s, err := schedule.Parse(expr, zone, anchor)
		if err != nil {
			e, ok := schedule.IsError(err)
			require.True(t, ok, "not a *schedule.Error: %v", err)
			require.Contains(t, []string{"cron", "timezone"}, e.Field)
			require.NotEmpty(t, e.Message)
			return
		}
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		every, isEvery := everyOf(s.String())
		var spec *cron.SpecSchedule
		if !isEvery {
			parsed, err := parser.Parse(s.String())
			require.NoError(t, err, "Parse accepted what robfig refuses")
			spec = parsed.(*cron.SpecSchedule)
		}

		first := s.Next(after)
		if first.IsZero() {
			return // nothing within robfig's five years, such as 29 February from 2096
		}
		require.True(t, first.After(after), "Next(%s) = %s, not after it", after, first)
		require.Equal(t, loc.String(), first.Location().String())
		sameInstant(t, first, s.Next(first.Add(-time.Nanosecond)), "not a fire time")
		mid := after.Add(first.Sub(after) / 2)
		sameInstant(t, first, s.Next(mid), "a fire time between %s and it", after)

		second := s.Next(first)
		if !second.IsZero() {
			require.True(t, second.After(first))
			sameInstant(t, second, s.Next(second.Add(-time.Nanosecond)), "not a fire time")
		}

		if isEvery {
			require.Zero(t, first.Sub(anchor)%every, "%s is not the anchor %s plus a multiple of %s", first, anchor, every)
			return
		}
		require.Zero(t, first.Nanosecond(), "cron fire times are whole seconds")
		const allHours = 1<<24 - 1
		elapsed := spec.Hour&allHours == allHours
		reading := wallClock(first)
		// A schedule by the wall clock may fire at the instant the clocks
		// jump, for a reading that does not exist; one by elapsed time only
		// at readings it names.
		_, jumps := first.Add(-time.Nanosecond).ZoneBounds()
		if elapsed || !jumps.Equal(first) {
			sameInstant(t, reading, spec.Next(reading.Add(-time.Nanosecond)),
				"%s reads %s locally, which %q does not name", first, reading, s.String())
		}
		if !elapsed && !second.IsZero() {
			// Once per reading: a repeated hour does not fire twice.
			require.True(t, wallClock(second).After(reading), "%s and %s read %s and %s", first, second, reading, wallClock(second))
		}
	})
}

// wallClock is the local reading of t as a UTC time, which is how robfig's
// UTC arithmetic sees it.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// everyOf reads the interval of an @every expression as Parse reads it.
func everyOf(expr string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(expr, "@every ")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(rest))
	return d, err == nil
}

// sameInstant fails t unless got is the instant want.
func sameInstant(t *testing.T, want, got time.Time, format string, args ...any) {
	t.Helper()
	require.Truef(t, want.Equal(got), "want %s, got %s: "+format, append([]any{want, got}, args...)...)
}
