package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strconv"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const flowKeysUsage = `Usage:
  hookwheel flow-keys put KEY [--rate N [--period 1s]] [--parallelism N]
  hookwheel flow-keys get|delete KEY
  hookwheel flow-keys list [--limit 20 | --all]
put sets a key's limits, replacing what it had: at most --rate sends per --period, spaced evenly, and at
most --parallelism at once (give either or both). A task names its key with --flow-key KEY (tasks create,
topics publish, schedules create and update) and, while its key is over its limits, waits without spending
an attempt. KEY '*' (quoted for the shell) sets the limits of every key without its own, each such key
limited apart.
Each takes --json to print the API's JSON instead of a table.`

func flowKeysCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "flow-keys: name a subcommand", usage: flowKeysUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("flow-keys "+sub, flowKeysUsage)
	switch sub {
	case "put":
		rate := c.fs.Int("rate", 0, "send at most this many of the key's tasks per --period, spaced evenly (default: no rate limit)")
		period := c.fs.Duration("period", 0, "the period of --rate, 1s to 24h (default 1s)")
		parallelism := c.fs.Int("parallelism", 0, "send at most this many of the key's tasks at once (default: no limit)")
		if err := c.parseKey(args, con); err != nil {
			return err
		}
		// The limits are replaced whole, so a put of nothing would lift
		// them: that is what delete is for.
		if *rate == 0 && *parallelism == 0 {
			return c.usageError("give --rate, --parallelism or both (hookwheel flow-keys delete KEY lifts a key's limits)")
		}
		if flagSet(c.fs, "period") && *rate == 0 {
			return c.usageError("--period is the period of --rate: give --rate too")
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		limit, err := client.PutFlowLimit(ctx, c.args[0], hookwheel.FlowLimitSpec{Rate: *rate, Period: *period, Parallelism: *parallelism})
		if err != nil {
			return err
		}
		headline := "Saved: the tasks with this flow key wait, without spending attempts, while over these limits."
		if limit.Key == hookwheel.DefaultFlowKey {
			headline = "Saved: every flow key without limits of its own is held to these, each key apart."
		}
		return c.printFlowLimit(con, headline, limit)
	case "get", "delete":
		if err := c.parseKey(args, con); err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		if sub == "get" {
			limit, err := client.GetFlowLimit(ctx, c.args[0])
			if err != nil {
				return err
			}
			return c.printFlowLimit(con, "", limit)
		}
		limit, err := client.DeleteFlowLimit(ctx, c.args[0])
		if err != nil {
			return err
		}
		headline := "Deleted: the key's tasks are unlimited from their next claim on, unless '*' sets limits."
		if limit.Key == hookwheel.DefaultFlowKey {
			headline = "Deleted: the keys without limits of their own are unlimited from their next claim on."
		}
		return c.printFlowLimit(con, headline, limit)
	case "list":
		shown := c.listFlags("show at most this many keys, in key order", "show every key")
		if err := c.parse(args, con); err != nil {
			return err
		}
		// --all fetches full pages.
		fetch := func(client *hookwheel.Client, pageSize int) iter.Seq2[hookwheel.FlowLimit, error] {
			return client.ListFlowLimits(ctx, pageSize)
		}
		return list(c, con, shown, fetch, printFlowLimitTable, cutInKeyOrder)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, flowKeysUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown flow-keys command %q", sub), usage: flowKeysUsage}
}

// parseKey parses a command of one KEY operand. An unquoted '*' reaches it
// as the file names the shell expanded it to, which would otherwise read
// as a mere extra argument.
func (c *command) parseKey(args []string, con console) error {
	err := c.parse(args, con, "KEY")
	if len(c.args) > 1 {
		return c.usageError("want one KEY, got %d arguments: quote '*' (the default's key), or the shell expands it to file names",
			len(c.args))
	}
	return err
}

// printFlowLimit shows one key's limits: their JSON with --json, else
// headline (when not empty) and the limits, one per line.
func (c *command) printFlowLimit(con console, headline string, l *hookwheel.FlowLimit) error {
	if *c.asJSON {
		return printJSON(con.stdout, l)
	}
	now := con.now()
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	tw := newTable(con.stdout)
	row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, escapeControls(value)) }
	if l.Key == hookwheel.DefaultFlowKey {
		row("Flow key", "* (every key without limits of its own)")
	} else {
		row("Flow key", l.Key)
	}
	row("Rate", flowRate(l, true))
	row("Parallelism", flowParallelism(l))
	row("Updated", when(l.UpdatedAt, now))
	return tw.Flush()
}

// flowRate says a key's rate: "100 per 1s", with the spacing it makes
// when long, or "unlimited".
func flowRate(l *hookwheel.FlowLimit, long bool) string {
	if l.Rate == 0 {
		return "unlimited"
	}
	s := fmt.Sprintf("%d per %s", l.Rate, l.Period)
	// Spelled out because a rate is not a burst: 100 per second is one
	// every 10ms, never 100 at once.
	if period, err := time.ParseDuration(l.Period); err == nil && long {
		s += fmt.Sprintf(" (one send every %s at most)", period/time.Duration(l.Rate))
	}
	return s
}

func flowParallelism(l *hookwheel.FlowLimit) string {
	if l.Parallelism == 0 {
		return "unlimited"
	}
	return strconv.Itoa(l.Parallelism) + " at once"
}

func printFlowLimitTable(w io.Writer, limits []hookwheel.FlowLimit, now time.Time) error {
	if len(limits) == 0 {
		_, err := fmt.Fprintln(w, "No flow limits: every flow key is unlimited.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "KEY\tRATE\tPARALLELISM\tUPDATED")
	for _, l := range limits {
		parallelism := "unlimited"
		if l.Parallelism > 0 {
			parallelism = strconv.Itoa(l.Parallelism)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", escapeControls(l.Key), flowRate(&l, false), parallelism, when(l.UpdatedAt, now))
	}
	return tw.Flush()
}
