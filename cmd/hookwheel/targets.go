package main

import (
	"context"
	"fmt"
	"io"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const targetsUsage = `Usage:
  hookwheel targets pause TARGET [--reason TEXT]
  hookwheel targets resume TARGET
  hookwheel targets list
TARGET is a scheme, host and optional port, https://host:port, without a path: every path of it.
pause holds the tenant's tasks to it: they wait, not sent and not counted as attempts, until resume lets
them go, at the target's pace. list shows the paused targets, the tenant's pauses and hookwheel's (a
target whose every attempt failed for the server's HOOKWHEEL_TARGET_DISABLE_AFTER), with why and since when.
Each takes --json to print the API's JSON instead of a table.`

func targetsCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "targets: name a subcommand", usage: targetsUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("targets "+sub, targetsUsage)
	switch sub {
	case "pause", "resume":
		var reason *string
		if sub == "pause" {
			reason = c.fs.String("reason", "", "why, for whoever looks at the pause later")
		}
		if err := c.parse(args, con, "TARGET"); err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		var p *hookwheel.TargetPause
		headline := "Resumed: the target's waiting tasks go out at its pace."
		if sub == "pause" {
			p, err = client.PauseTarget(ctx, c.args[0], *reason)
			headline = "Paused: the tenant's tasks to this target wait, without spending attempts, until it is resumed."
		} else {
			p, err = client.ResumeTarget(ctx, c.args[0])
		}
		if err != nil {
			return err
		}
		if *c.asJSON {
			return printJSON(con.stdout, p)
		}
		fmt.Fprintln(con.stdout, headline)
		return printTargetPauses(con.stdout, []hookwheel.TargetPause{*p}, con.now())
	case "list":
		if err := c.parse(args, con); err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		paused, err := client.ListPausedTargets(ctx)
		if err != nil {
			return err
		}
		if *c.asJSON {
			return printJSON(con.stdout, paused)
		}
		return printTargetPauses(con.stdout, paused, con.now())
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, targetsUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown targets command %q", sub), usage: targetsUsage}
}

func printTargetPauses(w io.Writer, paused []hookwheel.TargetPause, now time.Time) error {
	if len(paused) == 0 {
		_, err := fmt.Fprintln(w, "No paused targets.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TARGET\tPAUSED\tBY\tREASON\tFAILING SINCE\tLAST ERROR")
	for _, p := range paused {
		since, lastError := "-", "-"
		if p.Since != nil {
			since = when(*p.Since, now)
		}
		if p.LastError != nil {
			lastError = *p.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", escapeControls(p.Target), when(p.PausedAt, now), p.PausedBy,
			escapeControls(or(p.Reason, "-")), since, escapeControls(lastError))
	}
	return tw.Flush()
}
