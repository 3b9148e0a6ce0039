package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// deadEditFlags are the flags of tasks replay-dead that change the tasks it
// replays, before replaying them.
type deadEditFlags struct {
	from, to string
	set      headerFlags
	remove   namesFlag
}

func (c *command) deadEditFlags() *deadEditFlags {
	e := &deadEditFlags{set: headerFlags{}}
	c.fs.StringVar(&e.from, "url-prefix-from", "", "move the dead tasks whose URL starts with this (with --url-prefix-to)")
	c.fs.StringVar(&e.to, "url-prefix-to", "", "to URLs starting with this instead, the rest of each URL kept")
	c.fs.Var(e.set, "set-header", "a header to set on each task replayed, 'Name: value' (repeatable)")
	c.fs.Var(&e.remove, "remove-header", "a header to remove from each task replayed, by name (repeatable)")
	return e
}

// edit is the edit the flags ask for: nil for none.
func (e *deadEditFlags) edit(c *command) (*hookwheel.DeadEdit, error) {
	if (e.from == "") != (e.to == "") {
		return nil, c.usageError("--url-prefix-from and --url-prefix-to go together")
	}
	if e.from == "" && len(e.set) == 0 && len(e.remove) == 0 {
		return nil, nil
	}
	edit := &hookwheel.DeadEdit{URLPrefixFrom: e.from, URLPrefixTo: e.to, RemoveHeaders: e.remove}
	if len(e.set) > 0 {
		edit.SetHeaders = e.set
	}
	return edit, nil
}

// namesFlag is a repeatable flag collecting names.
type namesFlag []string

func (n *namesFlag) String() string { return strings.Join(*n, ",") }

func (n *namesFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		return fmt.Errorf("want a header name")
	}
	*n = append(*n, v)
	return nil
}

// printEditReplay says what a bulk replay with an edit did, or with
// --dry-run would do: the counts, the sample of changes, the refusals.
func printEditReplay(con console, res *hookwheel.ReplayResult, dryRun bool) error {
	// Written whole at the end, so that one write's error is the answer.
	w := &strings.Builder{}
	changed, refused := deref(res.Changed), deref(res.Refused)
	if dryRun {
		fmt.Fprintf(w, "%d dead task(s) match; %d would be changed, %d refused; none replayed (--dry-run).\n",
			res.Matched, changed, refused)
	} else {
		fmt.Fprintf(w, "%d dead task(s) matched; %d changed and replayed (%d replayed in all), due now; %d refused.\n",
			res.Matched, changed, res.Replayed, refused)
	}
	if len(res.Sample) > 0 {
		fmt.Fprintf(w, "\nFirst changes:\n")
		for _, s := range res.Sample {
			fmt.Fprintf(w, "  %s\n", s.ID)
			if s.URLBefore != s.URLAfter {
				fmt.Fprintf(w, "    url      %s\n          -> %s\n", s.URLBefore, s.URLAfter)
			}
			for _, name := range slices.Sorted(maps.Keys(s.HeadersSet)) {
				fmt.Fprintf(w, "    set      %s: %s\n", name, s.HeadersSet[name])
			}
			for _, name := range s.HeadersRemoved {
				fmt.Fprintf(w, "    remove   %s\n", name)
			}
		}
	}
	if len(res.Refusals) > 0 {
		fmt.Fprintf(w, "\nRefused (left dead and unchanged):\n")
		for _, r := range res.Refusals {
			ids := make([]string, len(r.TaskIds))
			for i, id := range r.TaskIds {
				ids[i] = id.String()
			}
			fmt.Fprintf(w, "  %d  %s (e.g. %s)\n", r.Count, r.Reason, strings.Join(ids, ", "))
		}
	}
	_, err := io.WriteString(con.stdout, w.String())
	return err
}

func deref(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}
