package main

// The client commands (tasks, schedules, topics, flow-keys, batch) call a
// hookwheel server's API as a tenant, through the Go SDK, the way a program
// would: they are for people trying hookwheel out, operating it from a
// shell, or scripting it (--json), without curl and jq. Each group of
// commands has a file of its own (tasks.go, schedules.go, topics.go,
// flowkeys.go, batch.go, and list.go for what the list commands share);
// this one holds what they all share: parsing, flags, errors, exit statuses.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

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
// flow-keys, targets, plans, batch, signup, usage or settings.
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
	case "portal-links":
		err = portalLinksCommand(ctx, args[1:], con)
	case "targets":
		err = targetsCommand(ctx, args[1:], con)
	case "plans":
		err = plansCommand(ctx, args[1:], con)
	case "batch":
		err = batchCommand(ctx, args[1:], con)
	case "signup":
		err = signupCommand(ctx, args[1:], con)
	case "usage":
		err = usageCommand(ctx, args[1:], con)
	case "settings":
		err = settingsCommand(ctx, args[1:], con)
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

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
