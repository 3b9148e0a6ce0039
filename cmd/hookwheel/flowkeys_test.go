package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientFlowKeys runs the flow-keys commands against a live node: a
// key's limits put, replaced, read, listed and deleted, the default's key
// '*' as well; --flow-key reaching tasks, publishes and schedules; and a
// task held back by its key shown as such.
func TestClientFlowKeys(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	rcv := w.receiver.URL
	key := "cli-" + uuid.NewString()[:8]

	out := w.ok(t, "flow-keys", "list")
	require.Contains(t, out, "No flow limits: every flow key is unlimited.")
	out = w.ok(t, "flow-keys", "put", key, "--rate", "100", "--parallelism", "5")
	require.Contains(t, out, "Saved: the tasks with this flow key wait")
	require.Regexp(t, `Flow key:\s+`+key, out)
	require.Regexp(t, `Rate:\s+100 per 1s \(one send every 10ms at most\)`, out)
	require.Regexp(t, `Parallelism:\s+5 at once`, out)
	// A put replaces the limits whole.
	out = w.ok(t, "flow-keys", "put", key, "--rate", "3", "--period", "1m")
	require.Regexp(t, `Rate:\s+3 per 1m`, out)
	require.Regexp(t, `Parallelism:\s+unlimited`, out)
	var limit hookwheel.FlowLimit
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "flow-keys", "get", key, "--json")), &limit))
	require.Equal(t, 3, limit.Rate)
	require.Equal(t, 0, limit.Parallelism)

	out = w.ok(t, "flow-keys", "put", "*", "--parallelism", "2")
	require.Contains(t, out, "Saved: every flow key without limits of its own is held to these, each key apart.")
	require.Regexp(t, `Flow key:\s+\* \(every key without limits of its own\)`, out)
	out = w.ok(t, "flow-keys", "list")
	require.Regexp(t, `(?m)^KEY\s+RATE\s+PARALLELISM\s+UPDATED$`, out)
	require.Regexp(t, `(?m)^\*\s+unlimited\s+2\s+`, out)
	require.Regexp(t, `(?m)^`+key+`\s+3 per 1m\s+unlimited\s+`, out)
	out = w.ok(t, "flow-keys", "list", "--limit", "1")
	require.Contains(t, out, "(the first 1 in key order shown; --limit N or --all for more)")
	var all []hookwheel.FlowLimit
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "flow-keys", "list", "--all", "--json")), &all))
	require.Len(t, all, 2)
	out = w.ok(t, "flow-keys", "delete", "*")
	require.Contains(t, out, "Deleted: the keys without limits of their own are unlimited")

	// --flow-key on everything that makes tasks.
	task := w.task(t, "tasks", "create", "--url", rcv+"/later", "--in", "1h", "--flow-key", key)
	require.Equal(t, key, *task.FlowKey)
	out = w.ok(t, "tasks", "get", task.ID.String())
	require.Regexp(t, `Flow key:\s+`+key, out)
	w.ok(t, "topics", "put", key, "--endpoint", rcv+"/a", "--endpoint", rcv+"/b")
	var pub hookwheel.Publish
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "topics", "publish", key, "--in", "1h", "--flow-key", key, "--json")), &pub))
	for _, task := range pub.Tasks {
		require.Equal(t, key, *task.FlowKey)
	}
	var s hookwheel.Schedule
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "schedules", "create", "--cron", "@daily", "--url", rcv+"/daily", "--paused",
		"--flow-key", key, "--json")), &s))
	require.Equal(t, key, *s.FlowKey)
	out = w.ok(t, "schedules", "update", s.ID.String(), "--flow-key", key+"-2")
	require.Regexp(t, `Flow key:\s+`+key+`-2`, out)
	var reset hookwheel.Schedule
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "schedules", "update", s.ID.String(), "--reset", "flow_key", "--json")), &reset))
	require.Nil(t, reset.FlowKey)

	// One send a minute: a task due now right after one was sent waits,
	// and says why rather than look stuck. (The second is made once the
	// first is sent: two made at once may be claimed by two claimers, and
	// either may take the minute's slot.)
	slow := key + "-slow"
	w.ok(t, "flow-keys", "put", slow, "--rate", "1", "--period", "1m")
	first := w.task(t, "tasks", "create", "--url", rcv+"/slow", "--flow-key", slow)
	w.waitTask(t, first.ID, hookwheel.StatusDelivered)
	second := w.task(t, "tasks", "create", "--url", rcv+"/slow", "--flow-key", slow)
	pollUntil(t, 30*time.Second, "task "+second.ID.String()+" held back", func() bool {
		return strings.Contains(w.ok(t, "tasks", "get", second.ID.String()), "put off after its due time: its flow key's limits")
	})
	require.Equal(t, hookwheel.StatusScheduled, w.task(t, "tasks", "get", second.ID.String()).Status)

	out = w.ok(t, "flow-keys", "delete", key)
	require.Contains(t, out, "Deleted: the key's tasks are unlimited from their next claim on")
	r := w.run(t, "", []string{"flow-keys", "get", key})
	require.Equal(t, exitNotFound, r.code, r.stderr)
	r = w.run(t, "", []string{"flow-keys", "delete", key})
	require.Equal(t, exitNotFound, r.code, r.stderr)
	r = w.run(t, "", []string{"flow-keys", "put", "not/a/key", "--rate", "1"})
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "key: must be characters of")
	r = w.run(t, "", []string{"tasks", "create", "--url", rcv, "--flow-key", "not a key"})
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "flow_key")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"flow-keys"}, "name a subcommand"},
		{[]string{"flow-keys", "frobnicate"}, "unknown flow-keys command"},
		{[]string{"flow-keys", "put"}, "missing KEY"},
		{[]string{"flow-keys", "put", key}, "give --rate, --parallelism or both"},
		{[]string{"flow-keys", "put", key, "--parallelism", "1", "--period", "1m"}, "give --rate too"},
		// What the shell makes of an unquoted '*'.
		{[]string{"flow-keys", "delete", "go.mod", "main.go"}, "quote '*'"},
		{[]string{"flow-keys", "list", "--limit", "0"}, "--limit must be at least 1"},
		{[]string{"schedules", "update", s.ID.String(), "--flow-key", ""}, "--reset flow_key removes the key"},
	} {
		r := w.run(t, "", tc.args)
		require.Equal(t, exitUsage, r.code, "hookwheel %s: %s", strings.Join(tc.args, " "), r.stderr)
		require.Contains(t, r.stderr, tc.want)
		require.Contains(t, r.stderr, "Usage:", "the usage of the command group follows the error")
	}
}
