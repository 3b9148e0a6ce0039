package dispatcher

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// healthNode is one node's target health on a fake clock.
func healthNode(t *testing.T, db *store.DB, clk clock.Clock, disableAfter time.Duration, paused chan<- struct{}) *targetHealth {
	t.Helper()
	return newTargetHealth(targetHealthConfig{Store: db, Clock: clk, Logger: quietLogger(), Metrics: testMetrics(t),
		DisableAfter: disableAfter, Interval: healthInterval(disableAfter),
		Paused: func() {
			select {
			case paused <- struct{}{}:
			default:
			}
		}})
}

// operationsEvents are the tasks of tenant to its operations URL, their
// bodies decoded, oldest first.
func operationsEvents(t *testing.T, db *store.DB, tenant uuid.UUID, opsURL string) []map[string]any {
	t.Helper()
	tasks, err := db.ListTasks(context.Background(), tenant, model.TaskFilter{URLPrefix: &opsURL, Limit: 100})
	require.NoError(t, err)
	out := make([]map[string]any, len(tasks))
	for i, listed := range tasks {
		task := taskOf(t, db, tenant, listed.ID)
		require.Equal(t, "POST", task.Method)
		require.Equal(t, "application/json", task.Headers["Content-Type"])
		require.NoError(t, json.Unmarshal(task.Body, &out[len(tasks)-1-i]))
	}
	return out
}

// TestTargetHealthPausesFailingTarget, on a fake clock: a tenant's target
// whose every attempt failed, on two nodes, for DisableAfter is paused by
// hookwheel, since its first failure, with the last error, and the
// tenant's operations URL gets a target.paused task; a target that
// succeeded once in between, on either node, is not paused; after a
// resume, the next success makes a target.recovered task, and the failures
// before the resume no longer count.
func TestTargetHealthPausesFailingTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.DB(t)
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	const opsURL = "https://ops.acme.example/hookwheel"
	_, err := db.SetTenantOperationsURL(ctx, tenant, ptr(opsURL),
		model.AuditEntry{TenantID: &tenant, Actor: model.ActorOperator, Action: "tenant.operations_url_changed"})
	require.NoError(t, err)
	const (
		failing  = "https://down.example:443"
		flapping = "https://flaky.example:443"
	)
	disableAfter := time.Hour
	start := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	paused := make(chan struct{}, 1)
	a, b := healthNode(t, db, clk, disableAfter, paused), healthNode(t, db, clk, disableAfter, paused)

	fail := func(n *targetHealth, target, err string) { n.observe(tenant, target, clk.Now(), false, err) }
	fail(a, failing, "connect: connection refused")
	fail(a, flapping, "receiver answered 503 Service Unavailable")
	a.report(ctx)
	clk.Advance(20 * time.Minute)
	fail(b, failing, "connect: connection refused")
	b.observe(tenant, flapping, clk.Now(), true, "")
	a.report(ctx)
	b.report(ctx)
	clk.Advance(30 * time.Minute)
	fail(a, failing, "context deadline exceeded")
	fail(a, flapping, "receiver answered 503 Service Unavailable")
	a.report(ctx)
	require.Empty(t, paused, "failing for 50 minutes is not yet DisableAfter")
	list, err := db.ListTargetPauses(ctx, tenant)
	require.NoError(t, err)
	require.Empty(t, list)

	clk.Advance(11 * time.Minute)
	fail(b, failing, "context deadline exceeded")
	fail(b, flapping, "receiver answered 503 Service Unavailable")
	b.report(ctx)
	receive(t, paused)
	list, err = db.ListTargetPauses(ctx, tenant)
	require.NoError(t, err)
	require.Len(t, list, 1, "the target that succeeded on another node is not paused")
	p := list[0]
	require.Equal(t, failing, p.Target)
	require.Equal(t, model.PausedByHookwheel, p.PausedBy)
	require.Equal(t, "every attempt failed for 1h0m0s", p.Reason)
	require.NotNil(t, p.Since)
	require.True(t, start.Equal(*p.Since), "since the first failure: %s", p.Since)
	require.Equal(t, "context deadline exceeded", *p.LastError)
	require.True(t, clk.Now().Equal(p.PausedAt))
	events := operationsEvents(t, db, tenant, opsURL)
	require.Len(t, events, 1)
	require.Equal(t, "target.paused", events[0]["type"])
	require.Equal(t, failing, events[0]["target"])
	require.Equal(t, start.Format(time.RFC3339), events[0]["since"])
	require.Equal(t, "context deadline exceeded", events[0]["last_error"])

	// More failures reported while paused make no second pause nor event.
	fail(a, failing, "connect: connection refused")
	a.report(ctx)
	require.Len(t, operationsEvents(t, db, tenant, opsURL), 1)

	clk.Advance(time.Minute)
	_, err = db.ResumeTarget(ctx, tenant, failing, clk.Now(), nil)
	require.NoError(t, err)
	clk.Advance(time.Second)
	fail(a, failing, "connect: connection refused")
	a.report(ctx)
	list, err = db.ListTargetPauses(ctx, tenant)
	require.NoError(t, err)
	require.Empty(t, list, "the failures before the resume no longer count")
	clk.Advance(time.Second)
	b.observe(tenant, failing, clk.Now(), true, "")
	b.report(ctx)
	events = operationsEvents(t, db, tenant, opsURL)
	require.Len(t, events, 2)
	require.Equal(t, "target.recovered", events[1]["type"])
	require.Equal(t, failing, events[1]["target"])
	require.Equal(t, clk.Now().Format(time.RFC3339), events[1]["recovered_at"])
	// Recovered once: the next success tells nothing more.
	clk.Advance(time.Second)
	a.observe(tenant, failing, clk.Now(), true, "")
	a.report(ctx)
	require.Len(t, operationsEvents(t, db, tenant, opsURL), 2)
}

// TestHealthSeen: a node's summary of one target keeps the last success
// and the failures after it, whatever order the attempts come in.
func TestHealthSeen(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var s healthSeen
	s.note(at.Add(2*time.Second), false, "two")
	s.note(at.Add(time.Second), false, "one")
	s.note(at.Add(3*time.Second), false, "three")
	require.Equal(t, healthSeen{first: at.Add(time.Second), last: at.Add(3 * time.Second), lastError: "three"}, s)
	s.note(at, true, "")
	require.Equal(t, at, s.success)
	require.Equal(t, at.Add(time.Second), s.first, "a success before the run leaves it")
	s.note(at.Add(4*time.Second), true, "")
	require.Equal(t, healthSeen{success: at.Add(4 * time.Second)}, s, "a success after the run ends it")
	s.note(at.Add(3*time.Second), false, "late")
	require.Equal(t, healthSeen{success: at.Add(4 * time.Second)}, s, "a failure before the last success does not count")
}
