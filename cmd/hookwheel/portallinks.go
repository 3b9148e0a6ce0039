package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/url"
	"strings"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/web"
)

// portalSettings are HOOKWHEEL_PUBLIC_URL and
// HOOKWHEEL_PORTAL_FRAME_ANCESTORS.
type portalSettings struct {
	publicURL      string
	frameAncestors string
}

// portalEnv reads HOOKWHEEL_PUBLIC_URL (an http or https origin, such as
// https://hooks.example.com; default none: a link's URL takes the origin
// its creating call reached) and HOOKWHEEL_PORTAL_FRAME_ANCESTORS (see
// web.ParseFrameAncestors).
func portalEnv(getenv func(string) string) (portalSettings, error) {
	var s portalSettings
	if v := strings.TrimSpace(getenv("HOOKWHEEL_PUBLIC_URL")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return s, fmt.Errorf("HOOKWHEEL_PUBLIC_URL: want an origin such as https://hooks.example.com, got %q", v)
		}
		s.publicURL = u.Scheme + "://" + u.Host
	}
	var err error
	if s.frameAncestors, err = web.ParseFrameAncestors(getenv("HOOKWHEEL_PORTAL_FRAME_ANCESTORS")); err != nil {
		return s, fmt.Errorf("HOOKWHEEL_PORTAL_FRAME_ANCESTORS: %w", err)
	}
	return s, nil
}

const portalLinksUsage = `Usage:
  hookwheel portal-links create LABEL [--expires-in 1h] [--name TEXT] [--description TEXT]
  hookwheel portal-links list [--limit 20 | --all]
  hookwheel portal-links revoke ID
create makes a link to a read-only page of the tasks labelled LABEL (key:value, or key=value as tasks
create --label takes it) and their attempts, for the customer that label stands for; its URL is shown only then. It opens
until --expires-in (at most 720h) or a revoke. list shows the links that still open, newest first.
Each takes --json to print the API's JSON instead of a table.`

func portalLinksCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "portal-links: name a subcommand", usage: portalLinksUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("portal-links "+sub, portalLinksUsage)
	switch sub {
	case "create":
		expires := c.fs.Duration("expires-in", 0, "how long the link opens, 1s to 720h (default 1h)")
		name := c.fs.String("name", "", "the page's heading, such as the customer's name")
		description := c.fs.String("description", "", "a line shown under the heading")
		if err := c.parse(args, con, "LABEL"); err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		link, err := client.CreatePortalLink(ctx, hookwheel.PortalLinkSpec{
			Label: apiLabel(c.args[0]), ExpiresIn: *expires, Name: *name, Description: *description,
		})
		if err != nil {
			return err
		}
		if *c.asJSON {
			return printJSON(con.stdout, link)
		}
		tw := newTable(con.stdout)
		row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, escapeControls(value)) }
		row("URL", link.URL)
		row("ID", link.ID.String())
		row("Label", link.Label)
		row("Expires", when(link.ExpiresAt, con.now()))
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err = fmt.Fprintln(con.stdout, "The URL is shown only now: whoever holds it sees the label's tasks until it expires or is revoked.")
		return err
	case "list":
		shown := c.listFlags("show at most this many links, newest first", "show every live link")
		if err := c.parse(args, con); err != nil {
			return err
		}
		fetch := func(client *hookwheel.Client, pageSize int) iter.Seq2[hookwheel.PortalLink, error] {
			return client.ListPortalLinks(ctx, pageSize)
		}
		return list(c, con, shown, fetch, printPortalLinkTable, cutNewest)
	case "revoke":
		if err := c.parse(args, con, "ID"); err != nil {
			return err
		}
		id, err := c.id(0, "portal link")
		if err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		link, err := client.RevokePortalLink(ctx, id)
		if err != nil {
			return err
		}
		if *c.asJSON {
			return printJSON(con.stdout, link)
		}
		_, err = fmt.Fprintf(con.stdout, "Revoked: portal link %s (%s) opens nothing from now on.\n", link.ID, escapeControls(link.Label))
		return err
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, portalLinksUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown portal-links command %q", sub), usage: portalLinksUsage}
}

// apiLabel spells a label as the API takes it, key:value, from either
// key:value or the key=value of the other commands' --label: a key holds
// neither character, so the first of them splits.
func apiLabel(label string) string {
	if i := strings.IndexAny(label, ":="); i >= 0 {
		return label[:i] + ":" + label[i+1:]
	}
	return label
}

func printPortalLinkTable(w io.Writer, links []hookwheel.PortalLink, now time.Time) error {
	if len(links) == 0 {
		_, err := fmt.Fprintln(w, "No live portal links.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tLABEL\tNAME\tEXPIRES\tCREATED BY")
	for _, l := range links {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.ID, escapeControls(l.Label), escapeControls(l.Name), when(l.ExpiresAt, now), escapeControls(l.CreatedBy))
	}
	return tw.Flush()
}
