package main

// The list commands (tasks, schedules, topics and flow-keys list, and tasks
// attempts) differ in what they fetch and how a row reads, and in nothing
// else: each declares --limit and --all and hands its fetch and its table to
// list, which shows the first items or every one, as a table or as JSON.

import (
	"fmt"
	"io"
	"iter"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// maxPageSize is the most items the API returns in one page.
const maxPageSize = 500

// listFlags are the --limit and --all of a list command.
type listFlags struct {
	limit *int
	all   *bool
}

// listFlags declares --limit and --all; their usages say what is listed and
// in what order.
func (c *command) listFlags(limitUsage, allUsage string) listFlags {
	return listFlags{limit: c.fs.Int("limit", 20, limitUsage), all: c.fs.Bool("all", false, allUsage)}
}

// list runs a list command whose flags are parsed: it reads the listing
// fetch returns, and shows its first --limit items (every one with --all)
// with table, or as JSON; cut, one of the notes below, ends a listing that
// was cut. fetch gets the page size that fetches no more than is shown, or
// the largest the API gives with --all, whatever each endpoint's default.
func list[T any](c *command, con console, flags listFlags,
	fetch func(client *hookwheel.Client, pageSize int) iter.Seq2[T, error],
	table func(io.Writer, []T, time.Time) error, cut string) error {
	if *flags.limit < 1 {
		return c.usageError("--limit must be at least 1")
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	pageSize := maxPageSize
	if !*flags.all {
		pageSize = min(*flags.limit, maxPageSize)
	}
	items, more, err := take(fetch(client, pageSize), *flags.limit, *flags.all)
	if err != nil {
		return err
	}
	return printList(con, *c.asJSON, items, more, table, cut)
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
	cutOldest      = "the %d oldest shown"
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
