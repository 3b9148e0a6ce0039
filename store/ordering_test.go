package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// insertKeyed stores a task of the tenant with the ordering key, due at runAt.
func insertKeyed(t *testing.T, db *store.DB, tenantID uuid.UUID, key string, runAt time.Time) *model.Task {
	t.Helper()
	task := newTask(tenantID, runAt)
	task.OrderingKey = &key
	_, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

// claimAll claims whichever of ids can be claimed now, for testNode.
func claimAll(t *testing.T, db *store.DB, pool *pgxpool.Pool, ids ...uuid.UUID) []*model.ClaimedTask {
	t.Helper()
	registerNode(t, pool, testNode, time.Hour)
	claims, err := db.ClaimTasks(context.Background(), testNode, allPartitions(), ids, dbNow(t, pool), 30*time.Second, nil)
	require.NoError(t, err)
	return claims
}

func record(t *testing.T, db *store.DB, c *model.ClaimedTask, status model.TaskStatus) {
	t.Helper()
	var next *time.Time
	code := 200
	if status == model.StatusRetrying {
		next = ptr(µs(time.Now().Add(-time.Second)))
		code = 503
	}
	outcome := map[model.TaskStatus]string{model.StatusDelivered: "success", model.StatusRetrying: "retry", model.StatusDead: "fail"}[status]
	errs, err := db.RecordAttempts(context.Background(), []model.AttemptResult{recordFor(c, outcome, &code, nil, status, next)})
	require.NoError(t, err)
	require.NoError(t, errs[0])
}

func requireParked(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, parked bool) {
	t.Helper()
	row := readTaskRow(t, pool, id)
	require.Contains(t, []string{"scheduled", "retrying"}, row.Status)
	if parked {
		require.Nil(t, row.NextAttemptAt, "task %s waits for its key", id)
	} else {
		require.NotNil(t, row.NextAttemptAt, "task %s is released", id)
	}
}

func TestOrderingKeyOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	other := createTenant(t, db)
	due := dbNow(t, pool).Add(-time.Minute)

	a := insertKeyed(t, db, tenant.ID, "order-1", due)
	b := insertKeyed(t, db, tenant.ID, "order-1", due.Add(time.Millisecond))
	c := insertKeyed(t, db, tenant.ID, "order-1", due.Add(2*time.Millisecond))
	otherKey := insertKeyed(t, db, tenant.ID, "order-2", due)
	sameKeyOtherTenant := insertKeyed(t, db, other.ID, "order-1", due.Add(time.Millisecond))
	plain := insertTask(t, db, tenant.ID, due)

	// Listed last to first: the claim goes by the key's order, not the list's.
	claims := claimAll(t, db, pool, c.ID, b.ID, a.ID, otherKey.ID, sameKeyOtherTenant.ID, plain.ID)
	require.ElementsMatch(t, []uuid.UUID{a.ID, otherKey.ID, sameKeyOtherTenant.ID, plain.ID}, claimIDs(claims))
	requireParked(t, pool, b.ID, true)
	requireParked(t, pool, c.ID, true)
	require.Equal(t, 0, readTaskRow(t, pool, b.ID).Attempts, "parking spends no attempt")

	// Parked tasks are in no due scan: neither the loader's nor the sweep's.
	listed, err := db.ListDue(ctx, allPartitions(), model.DueCursor{}, time.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	for _, d := range listed {
		require.NotContains(t, []uuid.UUID{b.ID, c.ID}, d.ID)
	}

	var claimA *model.ClaimedTask
	for _, cl := range claims {
		if cl.ID == a.ID {
			claimA = cl
		}
	}
	// A retry keeps the key: b stays parked while a waits for its next attempt.
	record(t, db, claimA, model.StatusRetrying)
	requireParked(t, pool, b.ID, true)
	require.Empty(t, claimAll(t, db, pool, b.ID, c.ID))
	claimA = claimOne(t, db, pool, a.ID)
	record(t, db, claimA, model.StatusDelivered)

	// Delivering a releases b, and only b.
	requireParked(t, pool, b.ID, false)
	requireParked(t, pool, c.ID, true)
	claims = claimAll(t, db, pool, c.ID, b.ID)
	require.Equal(t, []uuid.UUID{b.ID}, claimIDs(claims))

	// A task stored before b in the order while b is in flight waits for b.
	early := insertKeyed(t, db, tenant.ID, "order-1", due.Add(-time.Hour))
	require.Empty(t, claimAll(t, db, pool, early.ID))
	requireParked(t, pool, early.ID, true)

	// b going dead releases the head of the key: early, now first in order.
	record(t, db, claims[0], model.StatusDead)
	requireParked(t, pool, early.ID, false)
	requireParked(t, pool, c.ID, true)

	// Canceling the head releases the next.
	_, err = db.CancelTask(ctx, tenant.ID, early.ID)
	require.NoError(t, err)
	requireParked(t, pool, c.ID, false)
	require.Equal(t, []uuid.UUID{c.ID}, claimIDs(claimAll(t, db, pool, c.ID)))
}

// TestOrderingKeyReleaseNotifies: a release reaches every dispatcher on the
// due channel, with the time the task is now due.
func TestOrderingKeyReleaseNotifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	due := dbNow(t, pool).Add(-time.Minute)
	a := insertKeyed(t, db, tenant.ID, "k", due)
	b := insertKeyed(t, db, tenant.ID, "k", due.Add(time.Second))
	claims := claimAll(t, db, pool, a.ID, b.ID)
	require.Len(t, claims, 1)

	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	got := make(chan model.DueTask, 4)
	go func() {
		_ = db.ListenDue(listenCtx, func() { close(ready) }, func(d model.DueTask) { got <- d })
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "not listening")
	}
	before := dbNow(t, pool)
	record(t, db, claims[0], model.StatusDelivered)
	select {
	case d := <-got:
		require.Equal(t, b.ID, d.ID)
		require.False(t, d.At.Before(µs(before)), "due now, its own time having passed")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the release was not announced")
	}
}

// TestOrderingKeyRescheduleReorders: moving the head after a parked task
// makes that task the head, and releases it.
func TestOrderingKeyRescheduleReorders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)
	// A waiting head moved later than the task behind it lets that task go first.
	first := insertKeyed(t, db, tenant.ID, "r", now.Add(-time.Minute))
	second := insertKeyed(t, db, tenant.ID, "r", now.Add(-time.Second))
	exec(t, pool, `UPDATE tasks SET next_attempt_at = NULL WHERE id = $1`, second.ID) // parked behind first
	_, err := db.RescheduleTask(ctx, tenant.ID, first.ID, now.Add(time.Hour), false)
	require.NoError(t, err)
	requireParked(t, pool, second.ID, false)
	require.Equal(t, []uuid.UUID{second.ID}, claimIDs(claimAll(t, db, pool, second.ID)))
}

// TestOrderingKeyReleaseOrphans: a task left parked with nothing before it
// (its claim's node died before the recheck) is freed by ReleaseOrphans for
// the partitions asked, and only those.
func TestOrderingKeyReleaseOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)
	orphan := insertKeyed(t, db, tenant.ID, "k", now.Add(-time.Minute))
	blocked := insertKeyed(t, db, tenant.ID, "k", now.Add(-time.Second))
	exec(t, pool, `UPDATE tasks SET next_attempt_at = NULL WHERE id = ANY($1)`, []uuid.UUID{orphan.ID, blocked.ID})

	p := model.PartitionOf(orphan.ID)
	var others []int16
	for _, q := range allPartitions() {
		if q != p {
			others = append(others, q)
		}
	}
	released, err := db.ReleaseOrphans(ctx, others, 100)
	require.NoError(t, err)
	for _, r := range released {
		require.NotEqual(t, orphan.ID, r.ID)
	}
	released, err = db.ReleaseOrphans(ctx, allPartitions(), 100)
	require.NoError(t, err)
	require.Len(t, released, 1, "only the head is free; the task behind it waits for it")
	require.Equal(t, orphan.ID, released[0].ID)
	requireParked(t, pool, blocked.ID, true)
}

// TestOrderingKeyConcurrentClaims: nodes claiming and finishing a key's tasks
// as fast as they can never have two of its tasks in flight, and deliver
// them in order.
func TestOrderingKeyConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	due := dbNow(t, pool).Add(-time.Minute)
	const n = 30
	var ids []uuid.UUID
	for i := range n {
		ids = append(ids, insertKeyed(t, db, tenant.ID, "k", due.Add(time.Duration(i)*time.Millisecond)).ID)
	}
	registerNode(t, pool, testNode, time.Hour)

	var (
		mu        sync.Mutex
		inFlight  int
		maxFlight int
		// claimed is in claim order: a claim is appended before its outcome
		// is recorded, and the next task of the key cannot be claimed before.
		claimed   []uuid.UUID
		delivered int
		wg        sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				done := delivered == n
				mu.Unlock()
				if done {
					return
				}
				claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), ids, time.Now().Add(time.Hour), 30*time.Second, nil)
				if !assertNoError(t, err) {
					return
				}
				for _, c := range claims {
					// The span counted here lies within the claim's real one
					// (from its commit to the outcome's), so an overlap seen
					// is an overlap that happened.
					mu.Lock()
					inFlight++
					maxFlight = max(maxFlight, inFlight)
					claimed = append(claimed, c.ID)
					mu.Unlock()
					var started int
					err := pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE tenant_id = $1 AND ordering_key = 'k'
						AND status IN ('dispatching', 'retrying')`, tenant.ID).Scan(&started)
					assertTrue(t, err == nil && started == 1, "%d of the key's tasks in flight (%v)", started, err)
					mu.Lock()
					inFlight--
					mu.Unlock()
					code := 200
					errs, err := db.RecordAttempts(ctx, []model.AttemptResult{recordFor(c, "success", &code, nil, model.StatusDelivered, nil)})
					if assertNoError(t, err) && assertNoError(t, errs[0]) {
						mu.Lock()
						delivered++
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, ids, claimed, "each claimed once, in order")
	require.Equal(t, 1, maxFlight)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	return assertTrue(t, err == nil, "%v", err)
}

func assertTrue(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// TestScheduleOrderingKeyReachesOccurrences: every occurrence's task carries
// its schedule's ordering key, so occurrences never overlap.
func TestScheduleOrderingKeyReachesOccurrences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)

	keyed := schedNew(tenant.ID, &first)
	keyed.OrderingKey = ptr("nightly")
	require.NoError(t, db.InsertSchedule(ctx, keyed, nil))
	got, err := db.GetSchedule(ctx, tenant.ID, keyed.ID)
	require.NoError(t, err)
	require.Equal(t, "nightly", *got.OrderingKey)

	until := now.Add(2 * time.Second)
	schedMaterialize(t, db, until, schedEverySecond(until))
	occ := schedOccurrences(t, pool, keyed.ID)
	require.NotEmpty(t, occ)
	for _, o := range occ {
		task, err := db.GetTask(ctx, tenant.ID, o.ID)
		require.NoError(t, err)
		require.Equal(t, "nightly", *task.OrderingKey)
	}
}
