package e2e_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestUsageExactUnderKills: three processes deliver 3,000 tasks falling
// due over 12 s while a node is SIGKILLed every 2 to 3 s and restarted (as
// in TestThreeNodesKilled, shorter). Whatever reached the receiver twice (a
// send in flight at a kill), the tenant's usage counts what was recorded:
// one delivery per task, as many attempts as there are attempt rows, and
// the bytes of those attempts' bodies, nothing twice.
func TestUsageExactUnderKills(t *testing.T) {
	const (
		count  = 3000
		spread = 12 * time.Second
		drain  = 60 * time.Second
	)
	c := startCluster(t, 3)
	rcv := newCountingReceiver(t)
	t0 := time.Now().Add(creationLead(t, c.bases, count, 5*time.Second)).Truncate(time.Millisecond)
	end := t0.Add(spread)
	tasks := planTasks(count, t0, spread)
	createBefore(t, t0, c.bases, c.apiKey, rcv.URL+"/metered", tasks)

	seed := uint64(time.Now().UnixNano())
	t.Logf("killer seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	kills := 0
	next := t0.Add(2 * time.Second)
	for next.Before(end) {
		<-time.After(time.Until(next)) // pacing, not waiting for a condition
		n := c.nodes[rng.IntN(len(c.nodes))]
		at, err := n.Kill()
		require.NoError(t, err)
		down := time.Second
		if kills%2 == 1 {
			down = nodeTTL + time.Second
		}
		kills++
		<-time.After(down) // the node stays down
		require.NoError(t, n.Restart(), n.logs.tail(50))
		next = at.Add(2*time.Second + time.Duration(rng.Int64N(int64(time.Second))))
	}

	deadline := end.Add(drain)
	require.NoError(t, rcv.waitDistinct(count, deadline))
	require.NoError(t, waitTasksInStatus(c.bases[0], c.apiKey, "delivered", count, deadline))
	distinct, total := rcv.counts()
	t.Logf("%d kills; the receiver got %d webhooks of %d tasks", kills, total, distinct)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var attempts, delivered, bodyBytes int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE a.outcome = 'success'),
		coalesce(sum(octet_length(t.body)), 0)
		FROM attempts a JOIN tasks t ON t.id = a.task_id JOIN tenants tn ON tn.id = t.tenant_id
		WHERE tn.name = 'chaos'`).Scan(&attempts, &delivered, &bodyBytes))

	// Yesterday to tomorrow: the run may cross a UTC midnight.
	today := time.Now().UTC()
	url := c.bases[0] + "/v1/usage?from=" + today.AddDate(0, 0, -1).Format(time.DateOnly) +
		"&to=" + today.AddDate(0, 0, 1).Format(time.DateOnly)
	status, body, err := apiCall(ctx, http.MethodGet, url, c.apiKey, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, string(body))
	var usage struct {
		Totals struct {
			TasksCreated   int64 `json:"tasks_created"`
			Deliveries     int64 `json:"deliveries"`
			Attempts       int64 `json:"attempts"`
			FailedAttempts int64 `json:"failed_attempts"`
			BytesSent      int64 `json:"bytes_sent"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal(body, &usage))
	t.Logf("usage: %+v; attempt rows %d (%d delivered), their bodies %d bytes", usage.Totals, attempts, delivered, bodyBytes)
	require.EqualValues(t, count, usage.Totals.TasksCreated)
	require.EqualValues(t, distinct, usage.Totals.Deliveries, "one delivery per task delivered, however often it reached the receiver")
	require.Equal(t, delivered, usage.Totals.Deliveries)
	require.Equal(t, attempts, usage.Totals.Attempts, "as many attempts as attempt rows")
	require.Equal(t, attempts-delivered, usage.Totals.FailedAttempts)
	require.Equal(t, bodyBytes, usage.Totals.BytesSent, "the bodies of the attempts recorded")
	c.termAll(t)
}
