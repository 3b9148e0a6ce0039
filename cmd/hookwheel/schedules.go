package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const schedulesUsage = `Usage:
  hookwheel schedules create --cron '0 9 * * *' [--timezone Europe/Paris] --url URL [--paused]
                             [--method POST] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                             [--timeout 30s] [--max-attempts 10] [--label key=value]...
                             [--ordering-key KEY] [--flow-key KEY] [--callback URL] [--failure-callback URL]
  hookwheel schedules update ID [--cron EXPR] [--timezone ZONE] [--url URL] [--method M]
                             [--header 'Name: value']... [--remove-header NAME]... [--body TEXT | --body-file FILE]
                             [--timeout 30s] [--max-attempts 10] [--label key=value]... [--remove-label KEY]...
                             [--ordering-key KEY] [--flow-key KEY] [--callback URL] [--failure-callback URL]
                             [--paused=true|false] [--reset FIELD]...
  hookwheel schedules list [--include-body] [--limit 20 | --all]
  hookwheel schedules get|pause|resume|delete ID
  hookwheel schedules next ID [--count 10]
Each takes --json to print the API's JSON instead of a table.`

func schedulesCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "schedules: name a subcommand", usage: schedulesUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("schedules "+sub, schedulesUsage)
	switch sub {
	case "create":
		return schedulesCreate(ctx, c, args, con)
	case "update":
		return schedulesUpdate(ctx, c, args, con)
	case "list":
		shown := c.listFlags("show at most this many schedules, newest first", "show every schedule")
		includeBody := c.fs.Bool("include-body", false, "list each schedule with its body (seen with --json; \"schedules get\" shows one schedule's)")
		if err := c.parse(args, con); err != nil {
			return err
		}
		fetch := func(client *hookwheel.Client, pageSize int) iter.Seq2[hookwheel.Schedule, error] {
			return client.ListSchedules(ctx, hookwheel.ScheduleFilter{IncludeBody: *includeBody, PageSize: pageSize})
		}
		return list(c, con, shown, fetch, printScheduleTable, cutNewest)
	case "get", "pause", "resume", "delete", "next":
		count := 10
		if sub == "next" {
			c.fs.IntVar(&count, "count", 10, "how many fire times, 1 to 100")
		}
		if err := c.parse(args, con, "ID"); err != nil {
			return err
		}
		id, err := c.id(0, "schedule")
		if err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		var (
			s        *hookwheel.Schedule
			headline string
		)
		switch sub {
		case "get":
			s, err = client.GetSchedule(ctx, id)
		case "pause":
			s, err = client.PauseSchedule(ctx, id)
			headline = "Paused: no occurrence is sent until it is resumed."
		case "resume":
			s, err = client.ResumeSchedule(ctx, id)
			headline = "Resumed from its next occurrence (missed ones are not sent)."
		case "delete":
			s, err = client.DeleteSchedule(ctx, id)
			headline = "Deleted; its occurrences not yet sent are canceled."
		case "next":
			times, err := client.NextScheduleTimes(ctx, id, count)
			if err != nil {
				return err
			}
			if *c.asJSON {
				return printJSON(con.stdout, times)
			}
			return printFireTimes(con.stdout, times, con.now())
		}
		if err != nil {
			return err
		}
		return c.printSchedule(con, headline, s)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, schedulesUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown schedules command %q", sub), usage: schedulesUsage}
}

func schedulesCreate(ctx context.Context, c *command, args []string, con console) error {
	req := c.requestFlags(true)
	cron := c.fs.String("cron", "", "when it fires: 5 fields (minute hour day month weekday), 6 with seconds, @daily, @every 10m...")
	zone := c.fs.String("timezone", "", "the IANA time zone the cron is read in (default UTC)")
	paused := c.fs.Bool("paused", false, "create it paused")
	if err := c.parse(args, con); err != nil {
		return err
	}
	if *cron == "" || req.url == "" {
		return c.usageError("--cron and --url are required")
	}
	body, _, err := req.readBody(c, con)
	if err != nil {
		return err
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	s, err := client.CreateSchedule(ctx, hookwheel.ScheduleRequest{
		Cron: *cron, Timezone: *zone, Paused: *paused, URL: req.url, Method: strings.ToUpper(req.method),
		Headers: req.headers, Body: body, Timeout: req.timeout, MaxAttempts: req.maxAttempts, Labels: req.labels.orNil(),
		OrderingKey: req.orderingKey, FlowKey: req.flowKey, Callback: req.callback, FailureCallback: req.failureCallback,
	})
	if err != nil {
		return err
	}
	return c.printSchedule(con, "Created.", s)
}

// nameFlags collects a repeated flag naming things, such as --remove-header.
type nameFlags []string

func (n *nameFlags) String() string { return "" }

func (n *nameFlags) Set(v string) error {
	if v == "" {
		return errors.New("want a name")
	}
	*n = append(*n, v)
	return nil
}

// schedulesUpdate changes the fields of a schedule its flags name, and
// only those: headers and labels are merged into the schedule's, and
// --reset puts a field back to its default.
func schedulesUpdate(ctx context.Context, c *command, args []string, con console) error {
	req := c.requestFlags(true)
	cron := c.fs.String("cron", "", "the new recurrence: 5 fields, 6 with seconds, @daily, @every 10m...")
	zone := c.fs.String("timezone", "", "the new IANA time zone of the cron")
	paused := c.fs.Bool("paused", false, "--paused=true pauses the schedule, --paused=false resumes it")
	var removeHeaders, removeLabels, reset nameFlags
	c.fs.Var(&removeHeaders, "remove-header", "a header to stop sending (repeatable)")
	c.fs.Var(&removeLabels, "remove-label", "a label to remove, by key (repeatable)")
	c.fs.Var(&reset, "reset", "a field back to its default: timezone, method, headers, body, timeout, labels, ordering_key, flow_key, callback, retry... (repeatable)")
	if err := c.parse(args, con, "ID"); err != nil {
		return err
	}
	id, err := c.id(0, "schedule")
	if err != nil {
		return err
	}
	var u hookwheel.ScheduleUpdate
	given := false
	str := func(name, v string) *string {
		if !flagSet(c.fs, name) {
			return nil
		}
		given = true
		return &v
	}
	u.Cron, u.Timezone, u.URL = str("cron", *cron), str("timezone", *zone), str("url", req.url)
	u.Method = str("method", strings.ToUpper(req.method))
	u.Callback, u.FailureCallback = str("callback", req.callback), str("failure-callback", req.failureCallback)
	if flagSet(c.fs, "paused") {
		u.Paused, given = paused, true
	}
	body, hasBody, err := req.readBody(c, con)
	if err != nil {
		return err
	}
	if hasBody {
		u.Body, given = &body, true
	}
	if flagSet(c.fs, "timeout") {
		u.Timeout, given = &req.timeout, true
	}
	if flagSet(c.fs, "max-attempts") {
		u.MaxAttempts, given = &req.maxAttempts, true
	}
	// The API refuses an empty key rather than take it for none: say what
	// removes one instead.
	if flagSet(c.fs, "ordering-key") {
		if req.orderingKey == "" {
			return c.usageError("--ordering-key '': --reset ordering_key removes the key")
		}
		u.OrderingKey, given = &req.orderingKey, true
	}
	if flagSet(c.fs, "flow-key") {
		if req.flowKey == "" {
			return c.usageError("--flow-key '': --reset flow_key removes the key")
		}
		u.FlowKey, given = &req.flowKey, true
	}
	u.Headers = mergeNames(req.headers, removeHeaders)
	u.Labels = mergeNames(req.labels, removeLabels)
	u.Reset = reset
	if !given && u.Headers == nil && u.Labels == nil && len(reset) == 0 {
		return c.usageError("name something to change")
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	s, err := client.UpdateSchedule(ctx, id, u)
	if err != nil {
		return err
	}
	return c.printSchedule(con, "Updated; occurrences already made tasks (about 30 s ahead) keep their time and request.", s)
}

// mergeNames is the merge patch of set (each name to its value) and remove
// (each name to nil), or nil when both are empty.
func mergeNames(set map[string]string, remove []string) map[string]*string {
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	out := make(map[string]*string, len(set)+len(remove))
	for name, v := range set {
		out[name] = &v
	}
	for _, name := range remove {
		out[name] = nil
	}
	return out
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
