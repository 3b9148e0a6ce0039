package main

// The client commands (tasks, schedules, topics, flow-keys, batch) call a
// hookwheel server's API as a tenant, through the Go SDK, the way a program
// would: they are for people trying hookwheel out, operating it from a
// shell, or scripting it (--json), without curl and jq.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const tasksUsage = `want one of:
  hookwheel tasks create --url URL [--method POST] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                         [--at 2030-01-02T15:04:05Z | --in 90s] [--timeout 30s] [--max-attempts 10]
                         [--label key=value]... [--ordering-key KEY] [--flow-key KEY]
                         [--callback URL] [--failure-callback URL] [--idempotency-key KEY]
  hookwheel tasks get ID
  hookwheel tasks list [--status dead] [--url PREFIX] [--schedule ID] [--key IDEMPOTENCY_KEY] [--label key=value]...
                       [--publish PUBLISH_ID] [--topic NAME] [--callback-of ID] [--include-body] [--limit 20 | --all]
  hookwheel tasks cancel ID
  hookwheel tasks reschedule ID (--at TIME | --in DURATION)
  hookwheel tasks attempts ID
  hookwheel tasks replay ID [--url URL] [--method M] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                         [--label key=value]... [--callback URL] [--failure-callback URL] ('' removes one)
  hookwheel tasks replay-dead [--url PREFIX] [--schedule ID] [--publish PUBLISH_ID] [--topic NAME] [--label key=value]...
                             [--dry-run]
Each takes --json to print the API's JSON instead of a table.`

const schedulesUsage = `want one of:
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

const batchUsage = `want: hookwheel batch [--json] FILE
  FILE (- for standard input) holds one task per line, as POST /v1/tasks takes it, with an optional
  idempotency_key: {"url": "https://example.com/hook", "delay": "30s", "body": "..."}, or
  {"topic": "orders", ...} to publish to a topic's endpoints.`

// Exit statuses of the client commands, as the usage text documents them.
const (
	exitOK          = 0
	exitRefused     = 1 // the API refused the request (4xx not below), or another failure
	exitUsage       = 2
	exitNotFound    = 3
	exitConflict    = 4
	exitAuth        = 5
	exitRateLimited = 6
	exitUnavailable = 7 // a 5xx answer, or the server could not be reached
)

// commandUsageError is a usage error of a client command: what is wrong,
// and the usage of that command's group rather than all of hookwheel's.
type commandUsageError struct{ msg, usage string }

func (e commandUsageError) Error() string {
	var b strings.Builder
	b.WriteString(e.msg)
	if e.usage != "" {
		b.WriteString("\n")
		b.WriteString(e.usage)
	}
	b.WriteString("\n(`hookwheel help` shows every command, the environment and the exit statuses)")
	return b.String()
}

// clientError marks an error of a client command, whose exit status says
// what kind of failure it was (see exitCode).
type clientError struct{ err error }

func (e clientError) Error() string { return e.err.Error() }
func (e clientError) Unwrap() error { return e.err }

// exitCode is the process's exit status for err, the error run returned.
func exitCode(err error) int {
	var u usageError
	var cu commandUsageError
	if errors.As(err, &u) || errors.As(err, &cu) {
		return exitUsage
	}
	var ce clientError
	if !errors.As(err, &ce) {
		return exitRefused
	}
	var apiErr *hookwheel.Error
	if errors.As(err, &apiErr) {
		switch code := apiErr.StatusCode; {
		case code == http.StatusNotFound:
			return exitNotFound
		case code == http.StatusConflict:
			return exitConflict
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return exitAuth
		case code == http.StatusTooManyRequests:
			return exitRateLimited
		case code >= 500 || code < 400:
			return exitUnavailable
		}
		return exitRefused
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) {
		return exitUnavailable
	}
	return exitRefused
}

// console is what a client command reads and writes, so that tests can run
// commands in-process, in parallel, each with its own environment.
type console struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	now    func() time.Time
}

// runClient runs a client command: args[0] is tasks, schedules, topics,
// flow-keys or batch.
func runClient(ctx context.Context, args []string, con console) error {
	var err error
	switch args[0] {
	case "tasks":
		err = tasksCommand(ctx, args[1:], con)
	case "schedules":
		err = schedulesCommand(ctx, args[1:], con)
	case "topics":
		err = topicsCommand(ctx, args[1:], con)
	case "flow-keys":
		err = flowKeysCommand(ctx, args[1:], con)
	case "batch":
		err = batchCommand(ctx, args[1:], con)
	default:
		return usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
	var u commandUsageError
	var urlErr *url.Error
	var apiErr *hookwheel.Error
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return nil
	case errors.As(err, &u):
		return err
	case errors.As(err, &urlErr) && !errors.As(err, &apiErr) && !errors.Is(err, context.Canceled):
		err = fmt.Errorf("%w\n(no answer from %s: is hookwheel running there? HOOKWHEEL_URL names the server)",
			err, serverURL(con))
	}
	return clientError{err}
}

// errHelpShown ends a command whose help was asked for and printed.
var errHelpShown = errors.New("help shown")

// serverURL is the server the client commands call.
func serverURL(con console) string { return or(con.getenv("HOOKWHEEL_URL"), "http://localhost:8080") }

// newClient is the SDK client of HOOKWHEEL_URL acting with HOOKWHEEL_API_KEY.
func newClient(con console) (*hookwheel.Client, error) {
	base := serverURL(con)
	key := con.getenv("HOOKWHEEL_API_KEY")
	if key == "" {
		return nil, commandUsageError{msg: "set HOOKWHEEL_API_KEY to the tenant's API key (hw_<key id>_<secret>); " +
			"`make run` prints one, `hookwheel tenant create` makes one"}
	}
	c, err := hookwheel.New(base, key, hookwheel.WithUserAgent("hookwheel-cli"))
	if err != nil {
		return nil, commandUsageError{msg: fmt.Sprintf("HOOKWHEEL_URL %q: want the server's address, such as http://localhost:8080", base)}
	}
	return c, nil
}

// command is one parsed client command line.
type command struct {
	name   string
	usage  string
	fs     *flag.FlagSet
	asJSON *bool
	args   []string
}

func newCommand(name, usage string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &command{name: name, usage: usage, fs: fs, asJSON: fs.Bool("json", false, "print JSON")}
}

// parse reads flags and operands in any order (`tasks get ID --json` as
// well as `tasks get --json ID`) and requires the operands named, such as
// "ID", in that order.
func (c *command) parse(args []string, con console, operands ...string) error {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(con.stdout, "%s\n\nFlags of %s:\n", c.usage, c.name)
				c.fs.SetOutput(con.stdout)
				c.fs.PrintDefaults()
				return errHelpShown
			}
			return c.usageError("%v", err)
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		c.args = append(c.args, args[0])
		args = args[1:]
	}
	switch {
	case len(c.args) < len(operands):
		return c.usageError("missing %s", strings.Join(operands[len(c.args):], " "))
	case len(c.args) > len(operands):
		return c.usageError("unexpected argument %q", c.args[len(operands)])
	}
	return nil
}

func (c *command) usageError(format string, a ...any) error {
	return commandUsageError{msg: c.name + ": " + fmt.Sprintf(format, a...), usage: c.usage}
}

// id reads the nth positional argument as the id of what the command is
// about.
func (c *command) id(n int, what string) (uuid.UUID, error) {
	id, err := uuid.Parse(c.args[n])
	if err != nil {
		return uuid.Nil, c.usageError("%q is not a %s id: want a UUID such as 0190f3a2-7b1c-7d2e-9f00-0123456789ab", c.args[n], what)
	}
	return id, nil
}

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	h[name] = strings.TrimSpace(value)
	return nil
}

// labelFlags collects repeated --label key=value flags. The API spells a
// label filter key:value; on the command line key=value reads as it does
// in Kubernetes' selectors, and the key, which may hold neither, splits at
// the first '='. The server checks the labels themselves.
type labelFlags map[string]string

func (l labelFlags) String() string { return "" }

func (l labelFlags) Set(v string) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	if _, dup := l[key]; dup {
		return fmt.Errorf("label %q given twice", key)
	}
	l[key] = value
	return nil
}

// orNil is the labels given, or nil when none were: no labels sets no
// condition and, on a replay, keeps the task's own.
func (l labelFlags) orNil() map[string]string {
	if len(l) == 0 {
		return nil
	}
	return l
}

// requestFlags are the flags describing a webhook request, shared by tasks
// create, tasks replay and schedules create.
type requestFlags struct {
	url, method, body, bodyFile string
	callback, failureCallback   string
	headers                     headerFlags
	labels                      labelFlags
	timeout                     time.Duration
	maxAttempts                 int
	// orderingKey and flowKey are flags of tasks create, topics publish and
	// schedules create and update only: a replay keeps the task's.
	orderingKey, flowKey string
}

func (c *command) requestFlags(retry bool) *requestFlags {
	r := &requestFlags{headers: headerFlags{}, labels: labelFlags{}}
	if retry {
		c.fs.StringVar(&r.orderingKey, "ordering-key", "",
			"deliver the tasks with this key one at a time, in due order (each waits for the one before it)")
		c.fs.StringVar(&r.flowKey, "flow-key", "",
			"hold the task to the rate and parallelism set for this key (hookwheel flow-keys put KEY)")
	}
	c.fs.StringVar(&r.url, "url", "", "the URL to call")
	c.fs.StringVar(&r.method, "method", "", "the HTTP method (default POST)")
	c.fs.Var(r.headers, "header", "a header to send, 'Name: value' (repeatable)")
	c.fs.StringVar(&r.body, "body", "", "the request body")
	c.fs.StringVar(&r.bodyFile, "body-file", "", "read the request body from this file (- for standard input)")
	c.fs.Var(r.labels, "label", "a label to find the task by, key=value (repeatable)")
	c.fs.StringVar(&r.callback, "callback", "", "a URL told of the task's delivery (a signed POST)")
	c.fs.StringVar(&r.failureCallback, "failure-callback", "", "a URL told of the task's death (a signed POST)")
	if retry {
		c.fs.DurationVar(&r.timeout, "timeout", 0, "how long one attempt may take (default the server's, 30s)")
		c.fs.IntVar(&r.maxAttempts, "max-attempts", 0, "attempts in all, the first included (default the tenant's, 10)")
	}
	return r
}

// readBody returns the body the flags give, and whether they give one.
func (r *requestFlags) readBody(c *command, con console) (string, bool, error) {
	switch {
	case r.body != "" && r.bodyFile != "":
		return "", false, c.usageError("--body and --body-file are exclusive")
	case r.bodyFile == "-":
		b, err := io.ReadAll(con.stdin)
		if err != nil {
			return "", false, fmt.Errorf("read the body from standard input: %w", err)
		}
		return string(b), true, nil
	case r.bodyFile != "":
		b, err := os.ReadFile(r.bodyFile)
		if err != nil {
			return "", false, c.usageError("--body-file: %v", err)
		}
		return string(b), true, nil
	}
	return r.body, flagSet(c.fs, "body"), nil
}

// whenFlags are --at and --in.
type whenFlags struct {
	at string
	in time.Duration
}

func (c *command) whenFlags() *whenFlags {
	w := &whenFlags{}
	c.fs.StringVar(&w.at, "at", "", "when to send it, RFC 3339 (2030-01-02T15:04:05Z)")
	c.fs.DurationVar(&w.in, "in", 0, "how long from now to send it (90s, 1h30m)")
	return w
}

// read returns the time the flags give: RunAt, or Delay after now.
func (w *whenFlags) read(c *command) (runAt time.Time, delay time.Duration, err error) {
	if w.at != "" && w.in != 0 {
		return time.Time{}, 0, c.usageError("--at and --in are exclusive")
	}
	if w.in < 0 {
		return time.Time{}, 0, c.usageError("--in must not be negative")
	}
	if w.at != "" {
		if runAt, err = time.Parse(time.RFC3339, w.at); err != nil {
			return time.Time{}, 0, c.usageError("--at must be an RFC 3339 time such as 2030-01-02T15:04:05Z or 2030-01-02T16:04:05+01:00")
		}
	}
	return runAt, w.in, nil
}

func tasksCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "tasks: name a subcommand", usage: tasksUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("tasks "+sub, tasksUsage)
	switch sub {
	case "create":
		return tasksCreate(ctx, c, args, con)
	case "get", "cancel", "attempts":
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
		case "cancel":
			task, err := client.CancelTask(ctx, id)
			if err != nil {
				return err
			}
			return c.printTask(con, "Canceled: it will not be sent.", task)
		default:
			attempts, err := client.TaskAttempts(ctx, id)
			if err != nil {
				return err
			}
			if *c.asJSON {
				return printJSON(con.stdout, attempts)
			}
			return printAttempts(con.stdout, attempts, con.now())
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

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func tasksCreate(ctx context.Context, c *command, args []string, con console) error {
	req := c.requestFlags(true)
	when := c.whenFlags()
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
	client, err := newClient(con)
	if err != nil {
		return err
	}
	task, err := client.CreateTask(ctx, hookwheel.TaskRequest{
		URL: req.url, Method: strings.ToUpper(req.method), Headers: req.headers, Body: body,
		RunAt: runAt, Delay: delay, Timeout: req.timeout, MaxAttempts: req.maxAttempts, IdempotencyKey: *key,
		Labels: req.labels.orNil(), OrderingKey: req.orderingKey, FlowKey: req.flowKey,
		Callback: req.callback, FailureCallback: req.failureCallback,
	})
	if err != nil {
		return err
	}
	return c.printTask(con, "Scheduled.", task)
}

func tasksList(ctx context.Context, c *command, args []string, con console) error {
	status := c.fs.String("status", "", "only tasks in this status: scheduled, dispatching, retrying, delivered, dead, canceled")
	prefix := c.fs.String("url", "", "only tasks whose URL starts with this")
	schedule := c.fs.String("schedule", "", "only the occurrences of this schedule (its id)")
	key := c.fs.String("key", "", "only the task created with this idempotency key")
	publish := c.fs.String("publish", "", "only the tasks of this publish to a topic (its id)")
	topic := c.fs.String("topic", "", "only the tasks published to this topic")
	labels := labelFlags{}
	c.fs.Var(labels, "label", "only tasks carrying this label, key=value (repeatable: every one)")
	callbackOf := c.fs.String("callback-of", "", "only the callback tasks that report on this task (its id)")
	limit := c.fs.Int("limit", 20, "show at most this many tasks, newest first")
	all := c.fs.Bool("all", false, "show every task, however many")
	includeBody := c.fs.Bool("include-body", false, "list each task with its body (seen with --json; \"tasks get\" shows one task's)")
	if err := c.parse(args, con); err != nil {
		return err
	}
	filter := hookwheel.TaskFilter{Status: hookwheel.TaskStatus(*status), URLPrefix: *prefix, IdempotencyKey: *key,
		Topic: *topic, Labels: labels.orNil(), IncludeBody: *includeBody}
	switch filter.Status {
	case "", hookwheel.StatusScheduled, hookwheel.StatusDispatching, hookwheel.StatusRetrying,
		hookwheel.StatusDelivered, hookwheel.StatusDead, hookwheel.StatusCanceled:
	default:
		return c.usageError("--status %q: want scheduled, dispatching, retrying, delivered, dead or canceled", *status)
	}
	if *schedule != "" {
		id, err := uuid.Parse(*schedule)
		if err != nil {
			return c.usageError("--schedule %q is not a schedule id", *schedule)
		}
		filter.ScheduleID = id
	}
	if *publish != "" {
		id, err := uuid.Parse(*publish)
		if err != nil {
			return c.usageError("--publish %q is not a publish id", *publish)
		}
		filter.PublishID = id
	}
	if *callbackOf != "" {
		id, err := uuid.Parse(*callbackOf)
		if err != nil {
			return c.usageError("--callback-of %q is not a task id", *callbackOf)
		}
		filter.CallbackOf = id
	}
	if *limit < 1 {
		return c.usageError("--limit must be at least 1")
	}
	if !*all {
		filter.PageSize = min(*limit, 500)
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	tasks, more, err := take(client.ListTasks(ctx, filter), *limit, *all)
	if err != nil {
		return err
	}
	return printList(con, *c.asJSON, tasks, more, printTaskTable, cutNewest)
}

// take reads up to limit items of a listing (every one with all), and says
// whether more were left.
func take[T any](items iter.Seq2[T, error], limit int, all bool) (taken []T, more bool, err error) {
	taken = []T{}
	for item, err := range items {
		if err != nil {
			return nil, false, err
		}
		if !all && len(taken) == limit {
			return taken, true, nil
		}
		taken = append(taken, item)
	}
	return taken, false, nil
}

// The notes printList ends a cut listing with, by the listing's order.
const (
	cutNewest      = "the %d newest shown"
	cutInNameOrder = "the first %d in name order shown"
	cutInKeyOrder  = "the first %d in key order shown"
)

// printList prints a listing as JSON or as a table, saying when it was cut
// (cut, one of the notes above, says what was shown).
func printList[T any](con console, asJSON bool, items []T, more bool, table func(io.Writer, []T, time.Time) error, cut string) error {
	if asJSON {
		return printJSON(con.stdout, items)
	}
	if err := table(con.stdout, items, con.now()); err != nil {
		return err
	}
	if !more {
		return nil
	}
	_, err := fmt.Fprintf(con.stdout, "\n("+cut+"; --limit N or --all for more)\n", len(items))
	return err
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
	dryRun := c.fs.Bool("dry-run", false, "count the dead tasks that match, and replay none")
	if err := c.parse(args, con); err != nil {
		return err
	}
	filter := hookwheel.DeadFilter{URLPrefix: *prefix, Topic: *topic, DryRun: *dryRun, Labels: labels.orNil()}
	if *schedule != "" {
		id, err := uuid.Parse(*schedule)
		if err != nil {
			return c.usageError("--schedule %q is not a schedule id", *schedule)
		}
		filter.ScheduleID = id
	}
	if *publish != "" {
		id, err := uuid.Parse(*publish)
		if err != nil {
			return c.usageError("--publish %q is not a publish id", *publish)
		}
		filter.PublishID = id
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
	if *dryRun {
		_, err = fmt.Fprintf(con.stdout, "%d dead task(s) match; none replayed (--dry-run).\n", res.Matched)
	} else {
		_, err = fmt.Fprintf(con.stdout, "%d dead task(s) matched; %d replayed, due now.\n", res.Matched, res.Replayed)
	}
	return err
}

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
		limit := c.fs.Int("limit", 20, "show at most this many schedules, newest first")
		all := c.fs.Bool("all", false, "show every schedule")
		includeBody := c.fs.Bool("include-body", false, "list each schedule with its body (seen with --json; \"schedules get\" shows one schedule's)")
		if err := c.parse(args, con); err != nil {
			return err
		}
		if *limit < 1 {
			return c.usageError("--limit must be at least 1")
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		filter := hookwheel.ScheduleFilter{IncludeBody: *includeBody}
		if !*all {
			filter.PageSize = min(*limit, 500)
		}
		schedules, more, err := take(client.ListSchedules(ctx, filter), *limit, *all)
		if err != nil {
			return err
		}
		return printList(con, *c.asJSON, schedules, more, printScheduleTable, cutNewest)
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

// batchCommand schedules the tasks of a JSON lines file, MaxBatch lines per
// call, and reports each line's result; it fails when any line failed.
func batchCommand(ctx context.Context, args []string, con console) error {
	c := newCommand("batch", batchUsage)
	if err := c.parse(args, con, "FILE"); err != nil {
		return err
	}
	name := c.args[0]
	in := con.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return c.usageError("%v", err)
		}
		defer f.Close()
		in = f
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	report := &batchReport{w: con.stdout, asJSON: *c.asJSON, now: con.now()}
	var (
		chunk      []batchLine
		chunkBytes int
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var reqs []hookwheel.TaskRequest
		var sent []int // indexes in chunk of the lines sent
		for i, l := range chunk {
			if l.err == nil {
				reqs = append(reqs, l.req)
				sent = append(sent, i)
			}
		}
		if len(reqs) > 0 {
			results, err := client.CreateTasks(ctx, reqs)
			if err != nil {
				before := ""
				if report.total > 0 {
					before = fmt.Sprintf(" (the lines before line %d were, as shown above)", chunk[0].line)
				}
				// A refusal (4xx) changed nothing; after a server or network
				// failure the call may have been carried out.
				fate := "were not scheduled"
				if apiErr := (*hookwheel.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode >= 500 {
					fate = "may or may not have been scheduled (list the tasks before sending them again)"
				}
				return fmt.Errorf("lines %d to %d %s, and none after them was sent%s: %w",
					chunk[0].line, chunk[len(chunk)-1].line, fate, before, err)
			}
			for i, r := range results {
				chunk[sent[i]].result = r
			}
		}
		for _, l := range chunk {
			report.add(l)
		}
		chunk, chunkBytes = chunk[:0], 0
		return report.flush()
	}
	scanner := bufio.NewScanner(in)
	// A line holds a task body, which the server takes up to a few MiB.
	scanner.Buffer(make([]byte, 0, 64<<10), 64<<20)
	line := 0
	for scanner.Scan() {
		line++
		text := bytes.TrimSpace(scanner.Bytes())
		if len(text) == 0 {
			continue
		}
		l := batchLine{line: line}
		if err := json.Unmarshal(text, &l.req); err != nil {
			l.err = &hookwheel.Error{Op: fmt.Sprintf("line %d", line), StatusCode: http.StatusBadRequest,
				Title: "invalid line", Detail: "not a task as POST /v1/tasks takes it: " + err.Error()}
		}
		// A call carries at most MaxBatch lines and batchCallBytes of them,
		// well within the server's limit on a batch request's body.
		if len(chunk) > 0 && chunkBytes+len(text) > batchCallBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = append(chunk, l)
		chunkBytes += len(text)
		if len(chunk) == hookwheel.MaxBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := scanner.Err(); err != nil {
		_ = flush()
		return fmt.Errorf("read %s at line %d: %w", name, line+1, err)
	}
	if err := flush(); err != nil {
		return err
	}
	if report.total == 0 {
		return c.usageError("%s holds no task: want one JSON object per line", name)
	}
	if err := report.summary(); err != nil {
		return err
	}
	if report.failed > 0 {
		return fmt.Errorf("%d of %d line(s) failed; the others are scheduled", report.failed, report.total)
	}
	return nil
}

// batchLine is one line of a batch file: the task it asks for, and either
// why it could not be read or the API's result.
// batchCallBytes bounds the lines one batch call carries: half the 32 MiB a
// server takes in a batch request, leaving room for JSON's escaping.
const batchCallBytes = 16 << 20

type batchLine struct {
	line   int
	req    hookwheel.TaskRequest
	err    *hookwheel.Error
	result hookwheel.BatchResult
}
