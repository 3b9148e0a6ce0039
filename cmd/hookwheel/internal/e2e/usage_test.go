package e2e_test

import (
	"context"
	"encoding/json"
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
	l := startChaosLoad(t, count, spread, 5*time.Second, "/metered")
	c, rcv := l.c, l.rcv
	kills := l.killUntilEnd(t, killPace{first: 2 * time.Second, every: 2 * time.Second, jitter: time.Second})
	l.waitDelivered(t, l.end.Add(drain))
	distinct, total := rcv.counts()
	t.Logf("%d kills; the receiver got %d webhooks of %d tasks", len(kills), total, distinct)

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
