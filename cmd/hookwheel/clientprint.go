package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// How the client commands show things to people: tables aligned with
// tabwriter, times as RFC 3339 in UTC (what --at takes back) followed by how
// far they are from now, and long values cut to a line.

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// statusHints say what a status means and what may be done next.
var statusHints = map[hookwheel.TaskStatus]string{
	hookwheel.StatusScheduled:   "waiting for its time",
	hookwheel.StatusDispatching: "being sent right now",
	hookwheel.StatusRetrying:    "an attempt failed; the next is due at the time below",
	hookwheel.StatusDelivered:   "the receiver answered 2xx",
	hookwheel.StatusDead:        "failed for good; `hookwheel tasks replay ID` sends it again",
	hookwheel.StatusCanceled:    "canceled; it will not be sent",
}

// printTask shows one task: its JSON with --json, else headline (when not
// empty) and the task's fields, one per line.
func (c *command) printTask(con console, headline string, t *hookwheel.Task) error {
	if *c.asJSON {
		return printJSON(con.stdout, t)
	}
	now := con.now()
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	tw := newTable(con.stdout)
	row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, escapeControls(value)) }
	row("Task", t.ID.String())
	row("Status", fmt.Sprintf("%s (%s)", t.Status, strings.ReplaceAll(statusHints[t.Status], "ID", t.ID.String())))
	row("Request", string(t.Method)+" "+t.URL)
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		row("  header", name+": "+t.Headers[name])
	}
	if t.Body != "" {
		row("  body", oneLine(t.Body, 200))
	}
	row("Due", when(t.RunAt, now))
	waiting := t.Status == hookwheel.StatusScheduled || t.Status == hookwheel.StatusRetrying
	switch {
	case t.NextAttemptAt != nil && t.NextAttemptAt.After(t.RunAt) && t.Status == hookwheel.StatusScheduled &&
		t.Attempts == 0 && t.FlowKey != nil:
		// Past its due time without an attempt: a deferral, which a person
		// would otherwise take for a stuck task. Its key is the likeliest
		// cause; a busy target or an open breaker defers too.
		row("Next attempt", when(*t.NextAttemptAt, now)+", put off after its due time: its flow key's limits, most likely")
	case t.NextAttemptAt != nil && !t.NextAttemptAt.Equal(t.RunAt):
		row("Next attempt", when(*t.NextAttemptAt, now))
	case t.NextAttemptAt == nil && waiting && t.OrderingKey != nil:
		row("Next attempt", "once the task before it in its ordering key is finished")
	}
	row("Attempts", fmt.Sprintf("%d made, %d allowed; each may take %s", t.Attempts, t.MaxAttempts, t.Timeout))
	if last := lastResult(t, 120); last != "-" {
		row("Last result", last)
	}
	if t.IdempotencyKey != nil {
		row("Idempotency key", *t.IdempotencyKey)
	}
	if t.ScheduleID != nil {
		row("Schedule", t.ScheduleID.String())
	}
	if t.OrderingKey != nil {
		row("Ordering key", *t.OrderingKey)
	}
	if t.FlowKey != nil {
		row("Flow key", *t.FlowKey)
	}
	if t.PublishID != nil && t.Topic != nil {
		endpoint := ""
		if t.EndpointName != nil {
			endpoint = ", endpoint " + *t.EndpointName
		}
		row("Published", fmt.Sprintf("to topic %s%s: publish %s", *t.Topic, endpoint, t.PublishID))
	}
	for _, key := range slices.Sorted(maps.Keys(t.Labels)) {
		row("Label", key+"="+t.Labels[key])
	}
	if t.Callback != nil {
		row("Callback", "on delivery, POST "+*t.Callback)
	}
	if t.FailureCallback != nil {
		row("Failure callback", "on death, POST "+*t.FailureCallback)
	}
	if t.CallbackTaskID != nil {
		row("Callback task", t.CallbackTaskID.String())
	}
	if t.CallbackOf != nil {
		row("Reports on", t.CallbackOf.String())
	}
	row("Created", when(t.CreatedAt, now))
	return tw.Flush()
}

// lastResult is what the latest attempt got: its status code, else its
// error; "-" before any.
func lastResult(t *hookwheel.Task, width int) string {
	switch {
	case t.LastStatusCode != nil && t.LastError != nil:
		return oneLine(strconv.Itoa(*t.LastStatusCode)+" "+*t.LastError, width)
	case t.LastStatusCode != nil:
		return strconv.Itoa(*t.LastStatusCode)
	case t.LastError != nil:
		return oneLine(*t.LastError, width)
	}
	return "-"
}

func printTaskTable(w io.Writer, tasks []hookwheel.Task, now time.Time) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(w, "No tasks.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSTATUS\tNEXT ATTEMPT\tATTEMPTS\tLAST RESULT\tREQUEST")
	for _, t := range tasks {
		next := "-"
		if t.NextAttemptAt != nil {
			next = when(*t.NextAttemptAt, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s %s\n", t.ID, t.Status, next, t.Attempts, t.MaxAttempts,
			lastResult(&t, 40), t.Method, escapeControls(t.URL))
	}
	return tw.Flush()
}

func printAttempts(w io.Writer, attempts []hookwheel.Attempt, now time.Time) error {
	if len(attempts) == 0 {
		_, err := fmt.Fprintln(w, "No attempt yet.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "#\tSTARTED\tTOOK\tOUTCOME\tSTATUS\tERROR OR RESPONSE")
	for _, a := range attempts {
		status, detail := "-", "-"
		if a.StatusCode != nil {
			status = strconv.Itoa(*a.StatusCode)
		}
		switch {
		case a.Error != nil:
			detail = oneLine(*a.Error, 80)
		case a.ResponseBody != nil && *a.ResponseBody != "":
			detail = oneLine(*a.ResponseBody, 80)
		}
		took := (time.Duration(a.DurationMs) * time.Millisecond).String()
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, when(a.StartedAt, now), took, a.Outcome, status, detail)
	}
	return tw.Flush()
}

// printSchedule shows one schedule: its JSON with --json, else headline
// (when not empty) and the schedule's fields.
func (c *command) printSchedule(con console, headline string, s *hookwheel.Schedule) error {
	if *c.asJSON {
		return printJSON(con.stdout, s)
	}
	now := con.now()
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	tw := newTable(con.stdout)
	row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, escapeControls(value)) }
	row("Schedule", s.ID.String())
	row("State", scheduleState(s))
	row("Cron", fmt.Sprintf("%s (in %s)", s.Cron, s.Timezone))
	if s.NextRunAt != nil {
		row("Next run", when(*s.NextRunAt, now))
	} else {
		row("Next run", "- (paused)")
	}
	if s.LastRunAt != nil {
		row("Last run", when(*s.LastRunAt, now))
	}
	row("Request", string(s.Method)+" "+s.URL)
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		row("  header", name+": "+s.Headers[name])
	}
	if s.Body != "" {
		row("  body", oneLine(s.Body, 200))
	}
	for _, key := range slices.Sorted(maps.Keys(s.Labels)) {
		row("Label", key+"="+s.Labels[key])
	}
	if s.OrderingKey != nil {
		row("Ordering key", *s.OrderingKey)
	}
	if s.FlowKey != nil {
		row("Flow key", *s.FlowKey)
	}
	if s.SkippedOccurrences > 0 {
		row("Skipped", fmt.Sprintf("%d occurrence(s), the tenant being at its max_pending_tasks", s.SkippedOccurrences))
	}
	row("Created", when(s.CreatedAt, now))
	return tw.Flush()
}

func scheduleState(s *hookwheel.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

func printScheduleTable(w io.Writer, schedules []hookwheel.Schedule, now time.Time) error {
	if len(schedules) == 0 {
		_, err := fmt.Fprintln(w, "No schedules.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSTATE\tCRON\tTIMEZONE\tNEXT RUN\tREQUEST")
	for _, s := range schedules {
		next := "-"
		if s.NextRunAt != nil {
			next = when(*s.NextRunAt, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s %s\n", s.ID, scheduleState(&s), s.Cron, s.Timezone, next, s.Method, escapeControls(s.URL))
	}
	return tw.Flush()
}

func printFireTimes(w io.Writer, times []hookwheel.FireTime, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "#\tLOCAL TIME\tUTC\tIN")
	for i, t := range times {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, t.Local.Format(time.RFC3339), t.Utc.UTC().Format(time.RFC3339),
			humanDuration(t.Utc.Sub(now)))
	}
	return tw.Flush()
}

// batchReport prints the result of each line of a batch, a table at a time
// (one per chunk sent) or as JSON lines, and counts them.
type batchReport struct {
	w                       io.Writer
	asJSON                  bool
	now                     time.Time
	lines                   []batchLine
	total, failed, replayed int
	shownHeader             bool
}

func (r *batchReport) add(l batchLine) {
	r.total++
	switch {
	case l.err != nil || l.result.Err != nil:
		r.failed++
	case l.result.Replayed:
		r.replayed++
	}
	r.lines = append(r.lines, l)
}

// batchLineJSON is a line's result in --json output: the line number and
// the task, or the problem.
type batchLineJSON struct {
	Line     int                `json:"line"`
	Task     *hookwheel.Task    `json:"task,omitempty"`
	Publish  *hookwheel.Publish `json:"publish,omitempty"`
	Replayed bool               `json:"replayed,omitempty"`
	Error    *problemJSON       `json:"error,omitempty"`
}

// problemJSON is an *hookwheel.Error as the API spells problems.
type problemJSON struct {
	Type   string                 `json:"type,omitempty"`
	Title  string                 `json:"title"`
	Status int                    `json:"status"`
	Detail string                 `json:"detail,omitempty"`
	Errors []hookwheel.FieldError `json:"errors,omitempty"`
}

func (r *batchReport) flush() error {
	defer func() { r.lines = r.lines[:0] }()
	if r.asJSON {
		enc := json.NewEncoder(r.w)
		for _, l := range r.lines {
			out := batchLineJSON{Line: l.line, Task: l.result.Task, Publish: l.result.Publish, Replayed: l.result.Replayed}
			if e := lineError(l); e != nil {
				out.Error = &problemJSON{Type: e.Type, Title: e.Title, Status: e.StatusCode, Detail: e.Detail, Errors: e.Fields}
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
		}
		return nil
	}
	if len(r.lines) == 0 {
		return nil
	}
	tw := newTable(r.w)
	if !r.shownHeader {
		fmt.Fprintln(tw, "LINE\tRESULT\tTASK\tDETAIL")
		r.shownHeader = true
	}
	for _, l := range r.lines {
		if e := lineError(l); e != nil {
			detail := e.Error()
			if l.err != nil {
				detail = e.Detail // the line number is in the LINE column
			} else {
				detail = strings.TrimPrefix(detail, e.Op+": ")
			}
			fmt.Fprintf(tw, "%d\tfailed\t-\t%s\n", l.line, oneLine(detail, 160))
			continue
		}
		if p := l.result.Publish; p != nil {
			result, detail := "published", fmt.Sprintf("to topic %s: %d task(s), one per endpoint", p.Topic, p.TaskCount)
			if l.result.Replayed {
				result, detail = "repeat", "an earlier request had the same idempotency key: this is its publish, to "+p.Topic
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", l.line, result, p.ID, detail)
			continue
		}
		t := l.result.Task
		result, detail := "scheduled", fmt.Sprintf("%s %s, due %s", t.Method, oneLine(t.URL, 80), when(t.RunAt, r.now))
		if l.result.Replayed {
			result, detail = "repeat", "an earlier request had the same idempotency key: this is its task, "+string(t.Status)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", l.line, result, t.ID, detail)
	}
	return tw.Flush()
}

func lineError(l batchLine) *hookwheel.Error {
	if l.err != nil {
		return l.err
	}
	return l.result.Err
}

func (r *batchReport) summary() error {
	if r.asJSON {
		return nil
	}
	repeats := ""
	if r.replayed > 0 {
		repeats = fmt.Sprintf(" (%d of them by an earlier request with the same idempotency key)", r.replayed)
	}
	_, err := fmt.Fprintf(r.w, "\n%d line(s): %d scheduled%s, %d failed.\n", r.total, r.total-r.failed, repeats, r.failed)
	return err
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
