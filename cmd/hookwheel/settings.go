package main

import (
	"context"
	"flag"
	"fmt"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const settingsUsage = `Usage:
  hookwheel settings [--operations-url URL | --clear-operations-url] [--json]
Shows the tenant's own settings; with a flag, changes them first (a key with the secrets:manage scope).
--operations-url is where hookwheel sends its signed target.paused and target.recovered events, as one of
the tenant's tasks: an absolute http or https URL, checked as a task's URL is. --clear-operations-url
sends them nowhere.`

func settingsCommand(ctx context.Context, args []string, con console) error {
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		_, err := fmt.Fprintln(con.stdout, settingsUsage)
		return err
	}
	c := newCommand("settings", settingsUsage)
	opsURL := c.fs.String("operations-url", "", "where hookwheel sends the tenant's operations events")
	clearOps := c.fs.Bool("clear-operations-url", false, "send the operations events nowhere")
	if err := c.parse(args, con); err != nil {
		return err
	}
	var update hookwheel.SettingsUpdate
	set := false
	c.fs.Visit(func(f *flag.Flag) {
		if f.Name == "operations-url" {
			update.OperationsURL, set = opsURL, true
		}
	})
	switch {
	case set && *clearOps:
		return c.usageError("--operations-url and --clear-operations-url exclude each other")
	case set && *opsURL == "":
		return c.usageError("--operations-url needs a URL; --clear-operations-url clears it")
	}
	update.ClearOperationsURL = *clearOps
	client, err := newClient(con)
	if err != nil {
		return err
	}
	var s *hookwheel.Settings
	headline := ""
	if set || *clearOps {
		s, err = client.UpdateSettings(ctx, update)
		headline = "Updated."
	} else {
		s, err = client.Settings(ctx)
	}
	if err != nil {
		return err
	}
	if *c.asJSON {
		return printJSON(con.stdout, s)
	}
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	ops := "(none: operations events are not sent)"
	if s.OperationsURL != nil {
		ops = escapeControls(*s.OperationsURL)
	}
	_, err = fmt.Fprintf(con.stdout, "Operations URL: %s\n", ops)
	return err
}
