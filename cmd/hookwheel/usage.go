package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const usageCommandUsage = `want:
  hookwheel usage [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--json]
  hookwheel usage --all [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--tenant ID]
The tenant's usage per UTC day (HOOKWHEEL_API_KEY): tasks created, deliveries, attempts, failed attempts
and bytes, from --from to --to (both included, at most 400 days; default the first of this month to
today), every day listed, with the totals and the daily limits. --all is the operator's (with
HOOKWHEEL_ADMIN_TOKEN): every tenant's usage as CSV with a header row, for a billing system.`

func usageCommand(ctx context.Context, args []string, con console) error {
	c := newCommand("usage", usageCommandUsage)
	from := c.fs.String("from", "", "the first day, YYYY-MM-DD (UTC)")
	to := c.fs.String("to", "", "the last day, YYYY-MM-DD (UTC)")
	all := c.fs.Bool("all", false, "every tenant's usage as CSV, with HOOKWHEEL_ADMIN_TOKEN")
	tenant := c.fs.String("tenant", "", "with --all: only this tenant's rows")
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		_, err := fmt.Fprintln(con.stdout, usageCommandUsage)
		return err
	}
	if err := c.parse(args, con); err != nil {
		return err
	}
	var days [2]time.Time
	for i, raw := range []string{*from, *to} {
		if raw == "" {
			continue
		}
		d, err := time.Parse(time.DateOnly, raw)
		if err != nil {
			return commandUsageError{msg: fmt.Sprintf("usage: %q is not a day as YYYY-MM-DD", raw), usage: usageCommandUsage}
		}
		days[i] = d
	}
	if *all {
		return usageReportCSV(ctx, con, *from, *to, *tenant)
	}
	if *tenant != "" {
		return commandUsageError{msg: "usage: --tenant goes with --all", usage: usageCommandUsage}
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	u, err := client.Usage(ctx, days[0], days[1])
	if err != nil {
		return err
	}
	if *c.asJSON {
		return printJSON(con.stdout, u)
	}
	return printUsage(con.stdout, u)
}

// printUsage shows a tenant's usage as a table, a day a line, then the
// totals and the daily limits.
func printUsage(w io.Writer, u *hookwheel.Usage) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "DATE\tTASKS CREATED\tDELIVERIES\tATTEMPTS\tFAILED\tBYTES SENT\tBYTES RECEIVED")
	row := func(label string, n hookwheel.UsageCounts) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", label, n.TasksCreated, n.Deliveries, n.Attempts,
			n.FailedAttempts, n.BytesSent, n.BytesReceived)
	}
	for _, d := range u.Days {
		row(d.Date.Format(time.DateOnly), hookwheel.UsageCounts{TasksCreated: d.TasksCreated, Deliveries: d.Deliveries,
			Attempts: d.Attempts, FailedAttempts: d.FailedAttempts, BytesSent: d.BytesSent, BytesReceived: d.BytesReceived})
	}
	row("total", u.Totals)
	if err := tw.Flush(); err != nil {
		return err
	}
	limit := func(v *int) string {
		if v == nil {
			return "unlimited"
		}
		return strconv.Itoa(*v)
	}
	plan := "none"
	if u.Plan != nil {
		plan = escapeControls(*u.Plan)
	}
	_, err := fmt.Fprintf(w, "Plan: %s; tasks per day: %s; deliveries per day: %s\n", plan,
		limit(u.Limits.TasksPerDay), limit(u.Limits.DeliveriesPerDay))
	return err
}

// usageReportCSV copies GET /v1/admin/usage's CSV to standard output. The
// SDK leaves the operator's calls out, and the CSV is the report as the
// server writes it, so this is one plain request.
func usageReportCSV(ctx context.Context, con console, from, to, tenant string) error {
	token := con.getenv("HOOKWHEEL_ADMIN_TOKEN")
	if token == "" {
		return commandUsageError{msg: "set HOOKWHEEL_ADMIN_TOKEN to the server's admin token: --all is the operator's", usage: usageCommandUsage}
	}
	q := url.Values{}
	for name, v := range map[string]string{"from": from, "to": to, "tenant_id": tenant} {
		if v != "" {
			q.Set(name, v)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, serverURL(con)+"/v1/admin/usage?"+q.Encode(), nil)
	if err != nil {
		return commandUsageError{msg: fmt.Sprintf("HOOKWHEEL_URL %q: want the server's address, such as http://localhost:8080", serverURL(con))}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/csv")
	req.Header.Set("User-Agent", "hookwheel-cli")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("usage report: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var problem struct{ Type, Title, Detail string }
		if json.Unmarshal(body, &problem) != nil {
			problem.Detail = string(body)
		}
		return &hookwheel.Error{Op: "usage report", StatusCode: resp.StatusCode, Type: problem.Type, Title: problem.Title,
			Detail: escapeControls(problem.Detail)}
	}
	if _, err := io.Copy(con.stdout, resp.Body); err != nil {
		return fmt.Errorf("usage report: %w", err)
	}
	return nil
}
