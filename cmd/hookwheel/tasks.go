package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const tasksUsage = `Usage:
  hookwheel tasks create --url URL [--method POST] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                         [--at 2030-01-02T15:04:05Z | --in 90s] [--timeout 30s] [--max-attempts 10]
                         [--expires-at 2030-01-02T15:14:05Z | --expires-in 10m]
                         [--label key=value]... [--ordering-key KEY] [--flow-key KEY]
                         [--callback URL] [--failure-callback URL] [--idempotency-key KEY]
  hookwheel tasks get ID
  hookwheel tasks list [--status dead] [--url PREFIX] [--schedule ID] [--key IDEMPOTENCY_KEY] [--label key=value]...
                       [--publish PUBLISH_ID] [--topic NAME] [--callback-of ID] [--include-body] [--limit 20 | --all]
  hookwheel tasks cancel ID
  hookwheel tasks reschedule ID (--at TIME | --in DURATION)
  hookwheel tasks attempts ID [--limit 500 | --all]
  hookwheel tasks replay ID [--url URL] [--method M] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                         [--label key=value]... [--callback URL] [--failure-callback URL] ('' removes one)
  hookwheel tasks replay-dead [--url PREFIX] [--schedule ID] [--publish PUBLISH_ID] [--topic NAME] [--label key=value]...
                             [--url-prefix-from PREFIX --url-prefix-to PREFIX] [--set-header 'Name: value']...
                             [--remove-header NAME]... [--dry-run]
Each takes --json to print the API's JSON instead of a table.`

func tasksCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "tasks: name a subcommand", usage: tasksUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("tasks "+sub, tasksUsage)
	switch sub {
	case "create":
		return tasksCreate(ctx, c, args, con)
	case "attempts":
		return tasksAttempts(ctx, c, args, con)
	case "get", "cancel":
		if err := c.parse(args, con, "ID"); err != nil {
			return err
		}
		id, err := c.id(0, "task")
		if err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		switch sub {
		case "get":
			task, err := client.GetTask(ctx, id)
			if err != nil {
				return err
			}
			return c.printTask(con, "", task)
		default:
			task, err := client.CancelTask(ctx, id)
			if err != nil {
				return err
			}
			return c.printTask(con, "Canceled: it will not be sent.", task)
		}
	case "list":
		return tasksList(ctx, c, args, con)
	case "reschedule":
		when := c.whenFlags()
		if err := c.parse(args, con, "ID"); err != nil {
			return err
		}
		id, err := c.id(0, "task")
		if err != nil {
			return err
		}
		runAt, delay, err := when.read(c)
		if err != nil {
			return err
		}
		if when.at == "" && !flagSet(c.fs, "in") {
			return c.usageError("say when: --at TIME or --in DURATION (--in 0s is now)")
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		task, err := client.RescheduleTask(ctx, id, hookwheel.Reschedule{RunAt: runAt, Delay: delay})
		if err != nil {
			return err
		}
		return c.printTask(con, "Rescheduled.", task)
	case "replay":
		return tasksReplay(ctx, c, args, con)
	case "replay-dead":
		return tasksReplayDead(ctx, c, args, con)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, tasksUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown tasks command %q", sub), usage: tasksUsage}
}

func tasksCreate(ctx context.Context, c *command, args []string, con console) error {
	req := c.requestFlags(true)
	when := c.whenFlags()
	expiry := c.expiryFlags()
	key := c.fs.String("idempotency-key", "", "makes the create safe to repeat: a repeat with the same key returns the same task")
	if err := c.parse(args, con); err != nil {
		return err
	}
	if req.url == "" {
		return c.usageError("--url is required")
	}
	body, _, err := req.readBody(c, con)
	if err != nil {
		return err
	}
	runAt, delay, err := when.read(c)
	if err != nil {
		return err
	}
	expiresAt, expiresIn, err := expiry.read(c)
	if err != nil {
		return err
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	task, err := client.CreateTask(ctx, hookwheel.TaskRequest{
		URL: req.url, Method: strings.ToUpper(req.method), Headers: req.headers, Body: body,
		RunAt: runAt, Delay: delay, ExpiresAt: expiresAt, ExpiresIn: expiresIn, Timeout: req.timeout, MaxAttempts: req.maxAttempts, IdempotencyKey: *key,
		Labels: req.labels.orNil(), OrderingKey: req.orderingKey, FlowKey: req.flowKey,
		Callback: req.callback, FailureCallback: req.failureCallback,
	})
	if err != nil {
		return err
	}
	return c.printTask(con, "Scheduled.", task)
}

func tasksList(ctx context.Context, c *command, args []string, con console) error {
	status := c.fs.String("status", "", "only tasks in this status: scheduled, dispatching, retrying, delivered, dead, canceled, expired")
	prefix := c.fs.String("url", "", "only tasks whose URL starts with this")
	schedule := c.fs.String("schedule", "", "only the occurrences of this schedule (its id)")
	key := c.fs.String("key", "", "only the task created with this idempotency key")
	publish := c.fs.String("publish", "", "only the tasks of this publish to a topic (its id)")
	topic := c.fs.String("topic", "", "only the tasks published to this topic")
	labels := labelFlags{}
	c.fs.Var(labels, "label", "only tasks carrying this label, key=value (repeatable: every one)")
	callbackOf := c.fs.String("callback-of", "", "only the callback tasks that report on this task (its id)")
	shown := c.listFlags("show at most this many tasks, newest first", "show every task, however many")
	includeBody := c.fs.Bool("include-body", false, "list each task with its body (seen with --json; \"tasks get\" shows one task's)")
	if err := c.parse(args, con); err != nil {
		return err
	}
	filter := hookwheel.TaskFilter{Status: hookwheel.TaskStatus(*status), URLPrefix: *prefix, IdempotencyKey: *key,
		Topic: *topic, Labels: labels.orNil(), IncludeBody: *includeBody}
	switch filter.Status {
	case "", hookwheel.StatusScheduled, hookwheel.StatusDispatching, hookwheel.StatusRetrying,
		hookwheel.StatusDelivered, hookwheel.StatusDead, hookwheel.StatusCanceled, hookwheel.StatusExpired:
	default:
		return c.usageError("--status %q: want scheduled, dispatching, retrying, delivered, dead, canceled or expired", *status)
	}
	if err := c.optionalID(&filter.ScheduleID, "--schedule", *schedule, "schedule"); err != nil {
		return err
	}
	if err := c.optionalID(&filter.PublishID, "--publish", *publish, "publish"); err != nil {
		return err
	}
	if err := c.optionalID(&filter.CallbackOf, "--callback-of", *callbackOf, "task"); err != nil {
		return err
	}
	fetch := func(client *hookwheel.Client, pageSize int) iter.Seq2[hookwheel.Task, error] {
		filter.PageSize = pageSize
		return client.ListTasks(ctx, filter)
	}
	return list(c, con, shown, fetch, printTaskTable, cutNewest)
}

func tasksReplay(ctx context.Context, c *command, args []string, con console) error {
	req := c.requestFlags(false)
	if err := c.parse(args, con, "ID"); err != nil {
		return err
	}
	id, err := c.id(0, "task")
	if err != nil {
		return err
	}
	body, bodySet, err := req.readBody(c, con)
	if err != nil {
		return err
	}
	var edit *hookwheel.ReplayEdit
	// A callback flag given empty removes that callback.
	callbackSet, failureSet := flagSet(c.fs, "callback"), flagSet(c.fs, "failure-callback")
	if req.url != "" || req.method != "" || len(req.headers) > 0 || len(req.labels) > 0 || bodySet || callbackSet || failureSet {
		edit = &hookwheel.ReplayEdit{URL: req.url, Method: strings.ToUpper(req.method), Labels: req.labels.orNil()}
		if len(req.headers) > 0 {
			edit.Headers = req.headers
		}
		if bodySet {
			edit.Body = &body
		}
		if callbackSet {
			edit.Callback = &req.callback
		}
		if failureSet {
			edit.FailureCallback = &req.failureCallback
		}
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	task, err := client.ReplayTask(ctx, id, edit)
	if err != nil {
		return err
	}
	headline := "Replayed: it is due now, with the same id and idempotency key."
	if edit != nil {
		headline = "Edited and replayed: it is due now, with the same id and idempotency key."
	}
	return c.printTask(con, headline, task)
}

func tasksReplayDead(ctx context.Context, c *command, args []string, con console) error {
	prefix := c.fs.String("url", "", "only dead tasks whose URL starts with this")
	schedule := c.fs.String("schedule", "", "only the occurrences of this schedule (its id)")
	publish := c.fs.String("publish", "", "only the tasks of this publish to a topic (its id)")
	topic := c.fs.String("topic", "", "only the tasks published to this topic")
	labels := labelFlags{}
	c.fs.Var(labels, "label", "only dead tasks carrying this label, key=value (repeatable: every one)")
	dryRun := c.fs.Bool("dry-run", false, "count the dead tasks that match, and replay none (with an edit: show what would change)")
	editFlags := c.deadEditFlags()
	if err := c.parse(args, con); err != nil {
		return err
	}
	edit, err := editFlags.edit(c)
	if err != nil {
		return err
	}
	filter := hookwheel.DeadFilter{URLPrefix: *prefix, Topic: *topic, DryRun: *dryRun, Labels: labels.orNil(), Edit: edit}
	if err := c.optionalID(&filter.ScheduleID, "--schedule", *schedule, "schedule"); err != nil {
		return err
	}
	if err := c.optionalID(&filter.PublishID, "--publish", *publish, "publish"); err != nil {
		return err
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	res, err := client.ReplayDead(ctx, filter)
	if err != nil {
		return err
	}
	if *c.asJSON {
		return printJSON(con.stdout, res)
	}
	if edit != nil {
		return printEditReplay(con, res, *dryRun)
	}
	if *dryRun {
		_, err = fmt.Fprintf(con.stdout, "%d dead task(s) match; none replayed (--dry-run).\n", res.Matched)
	} else {
		_, err = fmt.Fprintf(con.stdout, "%d dead task(s) matched; %d replayed, due now.\n", res.Matched, res.Replayed)
	}
	return err
}

// statusHints say what a status means and what may be done next.
var statusHints = map[hookwheel.TaskStatus]string{
	hookwheel.StatusScheduled:   "waiting for its time",
	hookwheel.StatusDispatching: "being sent right now",
	hookwheel.StatusRetrying:    "an attempt failed; the next is due at the time below",
	hookwheel.StatusDelivered:   "the receiver answered 2xx",
	hookwheel.StatusDead:        "failed for good; `hookwheel tasks replay ID` sends it again",
	hookwheel.StatusCanceled:    "canceled; it will not be sent",
	hookwheel.StatusExpired:     "its expiry came before an attempt could start; it will not be sent",
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
	if t.ExpiresAt != nil {
		row("Expires", when(*t.ExpiresAt, now)+": no attempt starts after it")
	}
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

// tasksAttempts shows a task's attempts, oldest first: up to --limit, whose
// default is the API's largest page, so that most tasks show whole; a task
// replayed many times can have more.
func tasksAttempts(ctx context.Context, c *command, args []string, con console) error {
	shown := listFlags{
		limit: c.fs.Int("limit", maxPageSize, "show at most this many attempts, oldest first"),
		all:   c.fs.Bool("all", false, "show every attempt"),
	}
	if err := c.parse(args, con, "ID"); err != nil {
		return err
	}
	id, err := c.id(0, "task")
	if err != nil {
		return err
	}
	fetch := func(client *hookwheel.Client, pageSize int) iter.Seq2[hookwheel.Attempt, error] {
		return client.ListTaskAttempts(ctx, id, pageSize)
	}
	return list(c, con, shown, fetch, printAttempts, cutOldest)
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

// optionalID parses a flag naming an id of what kind into *dst, leaving it
// zero when the flag was not given.
func (c *command) optionalID(dst *uuid.UUID, flag, value, kind string) error {
	if value == "" {
		return nil
	}
	id, err := uuid.Parse(value)
	if err != nil {
		return c.usageError("%s %q is not a %s id", flag, value, kind)
	}
	*dst = id
	return nil
}
