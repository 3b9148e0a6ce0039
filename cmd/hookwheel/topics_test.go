package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientTopics runs the topics commands against a live node: a topic
// put, read, listed and deleted; a publish to it delivered to each endpoint,
// shown with its tasks and found again by its id.
func TestClientTopics(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	rcv := w.receiver.URL
	name := "cli-" + uuid.NewString()[:8]

	out := w.ok(t, "topics", "put", name, "--endpoint", "billing="+rcv+"/billing?a=b", "--endpoint", rcv+"/shipping?x=1",
		"--description", "order events")
	require.Contains(t, out, "Saved: each publish to it makes 2 task(s), one per endpoint.")
	require.Regexp(t, `Endpoint:\s+billing=`+rcv+`/billing\?a=b`, out)
	require.Regexp(t, `Endpoint:\s+`+rcv+`/shipping\?x=1`, out, "a URL with '=' in its query is a URL")
	var topic hookwheel.Topic
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "topics", "get", name, "--json")), &topic))
	require.Equal(t, []hookwheel.TopicEndpoint{{Name: "billing", URL: rcv + "/billing?a=b"}, {URL: rcv + "/shipping?x=1"}}, topic.Endpoints)
	out = w.ok(t, "topics", "list")
	require.Regexp(t, `(?m)^NAME\s+ENDPOINTS\s+UPDATED\s+DESCRIPTION$`, out)
	require.Regexp(t, `(?m)^`+name+`\s+2\s+.*order events$`, out)

	out = w.ok(t, "topics", "publish", name, "--body", `{"order":42}`, "--idempotency-key", name+"-42")
	require.Contains(t, out, "Published: 2 task(s), one per endpoint.")
	require.Regexp(t, `Tasks:\s+2 made: 2 scheduled`, out)
	var pub hookwheel.Publish
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "topics", "publish", name, "--body", `{"order":42}`,
		"--idempotency-key", name+"-42", "--json")), &pub), "the same key: the same publish")
	require.Len(t, pub.Tasks, 2)
	require.Contains(t, out, pub.ID.String())
	for _, task := range pub.Tasks {
		w.waitTask(t, task.ID, hookwheel.StatusDelivered)
		bodies, _ := w.receiver.got(task.ID.String())
		require.Equal(t, []string{`{"order":42}`}, bodies)
	}
	out = w.ok(t, "topics", "publish-status", pub.ID.String())
	require.Regexp(t, `Tasks:\s+2 made: 2 delivered`, out)
	out = w.ok(t, "tasks", "get", pub.Tasks[0].ID.String())
	require.Regexp(t, `Published:\s+to topic `+name+`, endpoint billing: publish `+pub.ID.String(), out)
	var listed []hookwheel.Task
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--publish", pub.ID.String(), "--json")), &listed))
	require.Len(t, listed, 2)
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--topic", name, "--status", "delivered", "--json")), &listed))
	require.Len(t, listed, 2)

	// The request flags of tasks create reach every task of a publish.
	var later hookwheel.Publish
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "topics", "publish", name, "--in", "1h", "--ordering-key", name+"-key",
		"--callback", rcv+"/done", "--failure-callback", rcv+"/failed", "--json")), &later))
	require.Len(t, later.Tasks, 2)
	for _, task := range later.Tasks {
		require.NotNil(t, task.OrderingKey)
		require.Equal(t, name+"-key", *task.OrderingKey)
		require.NotNil(t, task.Callback)
		require.Equal(t, rcv+"/done", *task.Callback)
		require.NotNil(t, task.FailureCallback)
		require.Equal(t, rcv+"/failed", *task.FailureCallback)
	}

	// A batch line may publish too.
	r := w.run(t, `{"topic": "`+name+`", "delay": "1h"}`+"\n"+`{"topic": "no-such-topic"}`+"\n", []string{"batch", "-"})
	require.Equal(t, exitRefused, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Regexp(t, `^1\s+published\s+\S{36}\s+to topic `+name+`: 2 task\(s\)`, lines[1])
	require.Regexp(t, `^2\s+failed\s+-\s+422 .*topic: names no topic`, lines[2])

	out = w.ok(t, "topics", "delete", name)
	require.Contains(t, out, "Deleted; the tasks already published to it are still sent.")
	r = w.run(t, "", []string{"topics", "get", name})
	require.Equal(t, exitNotFound, r.code, r.stderr)
	r = w.run(t, "", []string{"topics", "publish", name})
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "names no topic of this tenant")

	for _, args := range [][]string{
		{"topics"},
		{"topics", "frobnicate"},
		{"topics", "put"},
		{"topics", "put", name, "--endpoint", ""},
		{"topics", "publish"},
		{"topics", "publish", name, "--url", rcv},
		{"topics", "publish-status", "not-an-id"},
		{"tasks", "list", "--publish", "not-an-id"},
	} {
		r := w.run(t, "", args)
		require.Equal(t, exitUsage, r.code, "hookwheel %s: %s", strings.Join(args, " "), r.stderr)
		require.Contains(t, r.stderr, "Usage:", "the usage of the command group follows the error")
	}
}
