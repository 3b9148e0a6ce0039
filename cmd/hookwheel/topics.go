package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

const topicsUsage = `Usage:
  hookwheel topics put NAME --endpoint [ENDPOINT_NAME=]URL... [--description TEXT]
  hookwheel topics get|delete NAME
  hookwheel topics list [--limit 20 | --all]
  hookwheel topics publish NAME [--method POST] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                           [--at 2030-01-02T15:04:05Z | --in 90s] [--timeout 30s] [--max-attempts 10]
                           [--expires-at 2030-01-02T15:14:05Z | --expires-in 10m]
                           [--label key=value]... [--ordering-key KEY] [--flow-key KEY] [--callback URL]
                           [--failure-callback URL] [--idempotency-key KEY]
  hookwheel topics publish-status PUBLISH_ID
A publish makes one task per endpoint; hookwheel tasks list --publish PUBLISH_ID lists them.
Each takes --json to print the API's JSON instead of a table.`

// endpointFlags collects repeated --endpoint flags: a URL, or NAME=URL for
// an endpoint with a name.
type endpointFlags []hookwheel.TopicEndpoint

func (e *endpointFlags) String() string { return "" }

func (e *endpointFlags) Set(v string) error {
	if v == "" {
		return fmt.Errorf("want a URL, or NAME=URL")
	}
	// A URL's query may hold '=', but what comes before it then holds ':'
	// or '/', which no endpoint name does.
	ep := hookwheel.TopicEndpoint{URL: v}
	if name, url, ok := strings.Cut(v, "="); ok && !strings.ContainsAny(name, ":/?#") &&
		(strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) {
		ep = hookwheel.TopicEndpoint{Name: name, URL: url}
	}
	*e = append(*e, ep)
	return nil
}

func topicsCommand(ctx context.Context, args []string, con console) error {
	if len(args) == 0 {
		return commandUsageError{msg: "topics: name a subcommand", usage: topicsUsage}
	}
	sub, args := args[0], args[1:]
	c := newCommand("topics "+sub, topicsUsage)
	switch sub {
	case "put":
		var endpoints endpointFlags
		c.fs.Var(&endpoints, "endpoint", "an endpoint's URL, or NAME=URL to name it (repeatable; none leaves the topic without)")
		description := c.fs.String("description", "", "what the topic is for")
		if err := c.parse(args, con, "NAME"); err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		topic, err := client.PutTopic(ctx, c.args[0], hookwheel.TopicSpec{Description: *description, Endpoints: endpoints})
		if err != nil {
			return err
		}
		headline := fmt.Sprintf("Saved: each publish to it makes %d task(s), one per endpoint.", len(topic.Endpoints))
		if len(topic.Endpoints) == 0 {
			headline = "Saved, without endpoints: publishing to it is refused until it has some."
		}
		return c.printTopic(con, headline, topic)
	case "get", "delete":
		if err := c.parse(args, con, "NAME"); err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		if sub == "get" {
			topic, err := client.GetTopic(ctx, c.args[0])
			if err != nil {
				return err
			}
			return c.printTopic(con, "", topic)
		}
		topic, err := client.DeleteTopic(ctx, c.args[0])
		if err != nil {
			return err
		}
		return c.printTopic(con, "Deleted; the tasks already published to it are still sent.", topic)
	case "list":
		shown := c.listFlags("show at most this many topics, in name order", "show every topic")
		if err := c.parse(args, con); err != nil {
			return err
		}
		// --all fetches full pages.
		fetch := func(client *hookwheel.Client, pageSize int) iter.Seq2[hookwheel.Topic, error] {
			return client.ListTopics(ctx, pageSize)
		}
		return list(c, con, shown, fetch, printTopicTable, cutInNameOrder)
	case "publish":
		return topicsPublish(ctx, c, args, con)
	case "publish-status":
		if err := c.parse(args, con, "PUBLISH_ID"); err != nil {
			return err
		}
		id, err := c.id(0, "publish")
		if err != nil {
			return err
		}
		client, err := newClient(con)
		if err != nil {
			return err
		}
		pub, err := client.GetPublish(ctx, id)
		if err != nil {
			return err
		}
		return c.printPublish(con, "", pub)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(con.stdout, topicsUsage)
		return err
	}
	return commandUsageError{msg: fmt.Sprintf("unknown topics command %q", sub), usage: topicsUsage}
}

func topicsPublish(ctx context.Context, c *command, args []string, con console) error {
	req := c.requestFlags(true)
	when := c.whenFlags()
	expiry := c.expiryFlags()
	key := c.fs.String("idempotency-key", "", "makes the publish safe to repeat: a repeat with the same key returns the same publish")
	if err := c.parse(args, con, "NAME"); err != nil {
		return err
	}
	if req.url != "" {
		return c.usageError("--url names one receiver: a publish goes to the topic's endpoints (hookwheel tasks create takes --url)")
	}
	body, _, err := req.readBody(c, con)
	if err != nil {
		return err
	}
	runAt, delay, err := when.read(c)
	if err != nil {
		return err
	}
	expiresAt, expiresIn, err := expiry.read(c)
	if err != nil {
		return err
	}
	client, err := newClient(con)
	if err != nil {
		return err
	}
	pub, err := client.Publish(ctx, hookwheel.TaskRequest{
		Topic: c.args[0], Method: strings.ToUpper(req.method), Headers: req.headers, Body: body,
		RunAt: runAt, Delay: delay, ExpiresAt: expiresAt, ExpiresIn: expiresIn,
		Timeout: req.timeout, MaxAttempts: req.maxAttempts, IdempotencyKey: *key,
		Labels: req.labels.orNil(), OrderingKey: req.orderingKey, FlowKey: req.flowKey,
		Callback: req.callback, FailureCallback: req.failureCallback,
	})
	if err != nil {
		return err
	}
	return c.printPublish(con, fmt.Sprintf("Published: %d task(s), one per endpoint.", len(pub.Tasks)), pub)
}

// printTopic shows one topic: its JSON with --json, else headline (when not
// empty) and the topic's fields.
func (c *command) printTopic(con console, headline string, t *hookwheel.Topic) error {
	if *c.asJSON {
		return printJSON(con.stdout, t)
	}
	now := con.now()
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	tw := newTable(con.stdout)
	row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, escapeControls(value)) }
	row("Topic", t.Name)
	if t.Description != "" {
		row("Description", oneLine(t.Description, 200))
	}
	if len(t.Endpoints) == 0 {
		row("Endpoints", "none")
	}
	for _, ep := range t.Endpoints {
		if ep.Name != "" {
			row("Endpoint", ep.Name+"="+ep.URL)
		} else {
			row("Endpoint", ep.URL)
		}
	}
	row("Updated", when(t.UpdatedAt, now))
	return tw.Flush()
}

func printTopicTable(w io.Writer, topics []hookwheel.Topic, now time.Time) error {
	if len(topics) == 0 {
		_, err := fmt.Fprintln(w, "No topics.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tENDPOINTS\tUPDATED\tDESCRIPTION")
	for _, t := range topics {
		description := "-"
		if t.Description != "" {
			description = oneLine(t.Description, 60)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.Name, len(t.Endpoints), when(t.UpdatedAt, now), description)
	}
	return tw.Flush()
}

// printPublish shows a publish: its JSON with --json, else headline (when
// not empty), its counts by status and its tasks.
func (c *command) printPublish(con console, headline string, p *hookwheel.Publish) error {
	if *c.asJSON {
		return printJSON(con.stdout, p)
	}
	now := con.now()
	if headline != "" {
		fmt.Fprintln(con.stdout, headline)
	}
	tw := newTable(con.stdout)
	row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, escapeControls(value)) }
	row("Publish", p.ID.String())
	row("Topic", p.Topic)
	if p.IdempotencyKey != nil {
		row("Idempotency key", *p.IdempotencyKey)
	}
	sc := p.StatusCounts
	var counts []string
	for _, s := range []struct {
		n    int
		name string
	}{{sc.Scheduled, "scheduled"}, {sc.Dispatching, "dispatching"}, {sc.Retrying, "retrying"},
		{sc.Delivered, "delivered"}, {sc.Dead, "dead"}, {sc.Canceled, "canceled"}, {sc.Expired, "expired"}} {
		if s.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", s.n, s.name))
		}
	}
	tasks := fmt.Sprintf("%d made", p.TaskCount)
	if len(counts) > 0 {
		tasks += ": " + strings.Join(counts, ", ")
	}
	if kept := len(p.Tasks); kept < p.TaskCount {
		tasks += fmt.Sprintf(" (%d deleted by retention)", p.TaskCount-kept)
	}
	row("Tasks", tasks)
	row("Created", when(p.CreatedAt, now))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(con.stdout)
	return printTaskTable(con.stdout, p.Tasks, now)
}
