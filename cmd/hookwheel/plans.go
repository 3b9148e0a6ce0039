package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const plansUsage = `Usage:
  hookwheel plans put NAME [--api-rate N] [--api-burst N] [--max-pending-tasks N] [--max-schedules N]
                           [--max-timeout 30s] [--dispatch-rate N] [--dispatch-concurrency N]
                           [--tasks-per-day N] [--deliveries-per-day N]
  hookwheel plans get|delete NAME
  hookwheel plans list
Operator commands: they call the admin API with HOOKWHEEL_ADMIN_TOKEN, not a tenant's key.
put creates the plan or replaces its limits as a whole: a limit left out takes the node's default
(HOOKWHEEL_DEFAULT_*), 0 lifts it. A tenant's own limits override its plan's, field by field; tenants
go on a plan with PATCH /v1/admin/tenants/{id} {"plan": NAME}, or at create. delete refuses a plan
that tenants are on (exit status 4).
Each takes --json to print the API's JSON instead of a table.`

// newAdminClient is the SDK client of HOOKWHEEL_URL acting with the
// operator's HOOKWHEEL_ADMIN_TOKEN.
func newAdminClient(con console) (*hookwheel.Client, error) {
	base := serverURL(con)
	token := con.getenv("HOOKWHEEL_ADMIN_TOKEN")
	if token == "" {
		return nil, commandUsageError{msg: "set HOOKWHEEL_ADMIN_TOKEN to the server's admin token: plans are the operator's", usage: plansUsage}
	}
	c, err := hookwheel.New(base, token, hookwheel.WithUserAgent("hookwheel-cli"))
	if err != nil {
		return nil, commandUsageError{msg: fmt.Sprintf("HOOKWHEEL_URL %q: want the server's address, such as http://localhost:8080", base)}
	}
	return c, nil
}

// planLimitFlags are put's flags, one per limit; a flag not given leaves the
// limit unset.
type planLimitFlags struct {
	apiRate, dispatchRate                                   *float64
	apiBurst, maxPending, maxSchedules, dispatchConcurrency *int
	tasksPerDay, deliveriesPerDay                           *int
	maxTimeout                                              *string
}

func (c *command) planLimitFlags() planLimitFlags {
	fs := c.fs
	return planLimitFlags{
		apiRate:             fs.Float64("api-rate", 0, "API requests per second (0: unlimited)"),
		apiBurst:            fs.Int("api-burst", 0, "API requests at once above the rate"),
		maxPending:          fs.Int("max-pending-tasks", 0, "most tasks waiting at once (0: unlimited)"),
		maxSchedules:        fs.Int("max-schedules", 0, "most schedules (0: unlimited)"),
		maxTimeout:          fs.String("max-timeout", "", "longest per-attempt timeout, such as 30s (0: the node's)"),
		dispatchRate:        fs.Float64("dispatch-rate", 0, "webhooks per second to one target host (0: unlimited)"),
		dispatchConcurrency: fs.Int("dispatch-concurrency", 0, "webhooks in flight to one target host (0: unlimited)"),
		tasksPerDay:         fs.Int("tasks-per-day", 0, "tasks created per UTC day (0: unlimited)"),
		deliveriesPerDay:    fs.Int("deliveries-per-day", 0, "webhooks delivered per UTC day (0: unlimited)"),
	}
}

// limits are the flags given, as the API takes them.
func (f planLimitFlags) limits(c *command) hookwheel.Limits {
	var l hookwheel.Limits
	given := func(name string) bool { return flagSet(c.fs, name) }
	if given("api-rate") {
		l.APIRate = ptrTo(float32(*f.apiRate))
	}
	if given("api-burst") {
		l.APIBurst = f.apiBurst
	}
	if given("max-pending-tasks") {
		l.MaxPendingTasks = f.maxPending
	}
	if given("max-schedules") {
		l.MaxSchedules = f.maxSchedules
	}
	if given("max-timeout") {
		l.MaxTimeout = f.maxTimeout
	}
	if given("dispatch-rate") {
		l.DispatchRate = ptrTo(float32(*f.dispatchRate))
	}
	if given("dispatch-concurrency") {
		l.DispatchConcurrency = f.dispatchConcurrency
	}
	if given("tasks-per-day") {
		l.TasksPerDay = f.tasksPerDay
	}
	if given("deliveries-per-day") {
		l.DeliveriesPerDay = f.deliveriesPerDay
	}
	return l
}

func ptrTo[T any](v T) *T { return &v }

func plansCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "plans: name a subcommand", usage: plansUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("plans "+sub, plansUsage)
	switch sub {
	case "put":
		flags := c.planLimitFlags()
		if err := c.parse(args, con, "NAME"); err != nil {
			return err
		}
		client, err := newAdminClient(con)
		if err != nil {
			return err
		}
		plan, err := client.PutPlan(ctx, c.args[0], flags.limits(c))
		if err != nil {
			return err
		}
		return c.printPlan(con, "Saved: tenants on this plan have these limits, where their own set none, within seconds.", plan)
	case "get", "delete":
		if err := c.parse(args, con, "NAME"); err != nil {
			return err
		}
		client, err := newAdminClient(con)
		if err != nil {
			return err
		}
		if sub == "get" {
			plan, err := client.GetPlan(ctx, c.args[0])
			if err != nil {
				return err
			}
			return c.printPlan(con, "", plan)
		}
		if err := client.DeletePlan(ctx, c.args[0]); err != nil {
			return err
		}
		if *c.asJSON {
			return printJSON(con.stdout, map[string]string{"deleted": c.args[0]})
		}
		_, err = fmt.Fprintf(con.stdout, "Deleted plan %s.\n", escapeControls(c.args[0]))
		return err
	case "list":
		if err := c.parse(args, con); err != nil {
			return err
		}
		client, err := newAdminClient(con)
		if err != nil {
			return err
		}
		// Plans are an operator's few offerings: the API answers them all at once.
		plans, err := client.ListPlans(ctx)
		if err != nil {
			return err
		}
		return printList(con, *c.asJSON, plans, false, printPlanTable, "")
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, plansUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown plans command %q", sub), usage: plansUsage}
}

// printPlan shows one plan: its JSON with --json, else headline (when not
// empty) and its limits, one per line.
func (c *command) printPlan(con console, headline string, p *hookwheel.Plan) error {
	if *c.asJSON {
		return printJSON(con.stdout, p)
	}
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	tw := newTable(con.stdout)
	fmt.Fprintf(tw, "Plan:\t%s\n", escapeControls(p.Name))
	for _, l := range limitLines(p.Limits) {
		fmt.Fprintf(tw, "%s:\t%s\n", l[0], l[1])
	}
	fmt.Fprintf(tw, "Updated:\t%s\n", when(p.UpdatedAt, con.now()))
	return tw.Flush()
}

// limitLines are a plan's limits as label and value, every limit listed: a
// limit it does not set says so.
func limitLines(l hookwheel.Limits) [][2]string {
	num := func(v *int) string {
		switch {
		case v == nil:
			return "node default"
		case *v == 0:
			return "unlimited"
		}
		return strconv.Itoa(*v)
	}
	rate := func(v *float32) string {
		switch {
		case v == nil:
			return "node default"
		case *v == 0:
			return "unlimited"
		}
		return strconv.FormatFloat(float64(*v), 'f', -1, 32) + "/s"
	}
	timeout := "node default"
	if l.MaxTimeout != nil {
		timeout = *l.MaxTimeout
	}
	lines := [][2]string{
		{"API rate", rate(l.APIRate)},
		{"API burst", num(l.APIBurst)},
		{"Max pending tasks", num(l.MaxPendingTasks)},
		{"Max schedules", num(l.MaxSchedules)},
		{"Max timeout", timeout},
		{"Dispatch rate", rate(l.DispatchRate)},
		{"Dispatch concurrency", num(l.DispatchConcurrency)},
		{"Tasks per day", num(l.TasksPerDay)},
		{"Deliveries per day", num(l.DeliveriesPerDay)},
	}
	if len(l.Targets) > 0 {
		hosts := make([]string, 0, len(l.Targets))
		for h := range l.Targets {
			hosts = append(hosts, escapeControls(h))
		}
		lines = append(lines, [2]string{"Per-host limits", strings.Join(hosts, ", ")})
	}
	return lines
}

func printPlanTable(w io.Writer, plans []hookwheel.Plan, now time.Time) error {
	if len(plans) == 0 {
		_, err := fmt.Fprintln(w, "No plans: tenants have their own limits over the node's defaults.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tTASKS/DAY\tDELIVERIES/DAY\tMAX PENDING\tAPI RATE\tUPDATED")
	for _, p := range plans {
		lines := limitLines(p.Limits)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", escapeControls(p.Name), lines[7][1], lines[8][1], lines[2][1], lines[0][1],
			when(p.UpdatedAt, now))
	}
	return tw.Flush()
}
