package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestSuspendedTenantTasksWait: a suspended tenant's due tasks are neither
// sent nor counted as attempts while another tenant's go out on time, and
// all of them go out promptly once it is resumed.
func TestSuspendedTenantTasksWait(t *testing.T) {
	t.Parallel()
	const count = 20
	e := newEnv(t)
	n := e.startNode()
	rcv := newReceiver(t)
	acme, other := e.createTenant(n, "acme"), e.createTenant(n, "other")

	due := time.Now().Add(3 * time.Second)
	for i := range count {
		acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/acme", RunAt: ptr(due.Add(time.Duration(i) * time.Millisecond))})
	}
	admin := func(op string) {
		t.Helper()
		resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/admin/tenants/"+acme.id.String()+"/"+op, "admin-token", nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", op, body)
	}
	admin("suspend")
	require.True(t, time.Now().Before(due.Add(-500*time.Millisecond)), "creating the tasks took until their due time")
	// The other tenant's tasks: some due with acme's, some after the sweep
	// has passed over acme's overdue ones at least once.
	for i := range count {
		at := due
		if i%2 == 1 {
			at = due.Add(2500 * time.Millisecond)
		}
		other.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/other", RunAt: &at})
	}
	rcv.waitFor(t, 15*time.Second, "the other tenant's tasks", func(ds []delivery) bool {
		return countPath(ds, "/other") == count
	})
	require.Zero(t, countPath(rcv.snapshot(), "/acme"), "a suspended tenant's task was sent")
	conn, err := pgx.Connect(context.Background(), e.databaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var waiting, attempts int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE status = 'scheduled' AND claim_token IS NULL), coalesce(sum(attempts), 0)
		FROM tasks WHERE tenant_id = $1`, acme.id).Scan(&waiting, &attempts))
	require.Equal(t, count, waiting, "acme's tasks wait")
	require.Zero(t, attempts, "acme's tasks counted no attempt")

	resumed := time.Now()
	admin("resume")
	rcv.waitFor(t, 5*time.Second, "acme's tasks after the resume", func(ds []delivery) bool {
		return countPath(ds, "/acme") == count
	})
	t.Logf("acme's %d held tasks arrived within %s of the resume", count, time.Since(resumed).Round(time.Millisecond))
	require.Len(t, distinctIDs(rcv.snapshot()), 2*count)
}

func countPath(ds []delivery, path string) int {
	n := 0
	for _, d := range ds {
		if strings.HasPrefix(d.path, path) {
			n++
		}
	}
	return n
}
