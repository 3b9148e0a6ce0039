package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// dueListener collects the announcements of DueNotifyChannel on db.
type dueListener struct {
	got  chan model.DueTask
	db   *store.DB
	pool *pgxpool.Pool
}

// listenDue listens on DueNotifyChannel until the test ends.
func listenDue(t *testing.T, db *store.DB, pool *pgxpool.Pool) *dueListener {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	l := &dueListener{got: make(chan model.DueTask, 4096), db: db, pool: pool}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- db.ListenDue(ctx, func() { close(ready) }, func(d model.DueTask) { l.got <- d }) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "ListenDue returned before listening", "%v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue never became ready")
	}
	return l
}

// drain returns everything announced so far. Postgres delivers notifications
// in commit order, so a marker announced after the statements under test
// arrives after all that they announced: no waiting for silence.
func (l *dueListener) drain(t *testing.T) map[uuid.UUID]time.Time {
	t.Helper()
	marker := uuid.New()
	exec(t, l.pool, `SELECT pg_notify($1, $2::text || ' 0')`, store.DueNotifyChannel, marker)
	out := map[uuid.UUID]time.Time{}
	for {
		select {
		case d := <-l.got:
			if d.ID == marker {
				return out
			}
			_, twice := out[d.ID]
			require.False(t, twice, "task %s announced twice", d.ID)
			out[d.ID] = d.At
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the marker notification never came")
		}
	}
}

func TestInsertTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	listener := listenDue(t, db, pool)

	now := dbNow(t, pool)
	notifyBefore := now.Add(30 * time.Second)
	var tasks []*model.Task
	for i := range 50 {
		// Every other task falls due within the announcement window.
		runAt := now.Add(time.Duration(i/2) * time.Second)
		if i%2 == 1 {
			runAt = now.Add(time.Hour + time.Duration(i)*time.Second)
		}
		task := newTask(tenant.ID, runAt)
		task.URL = fmt.Sprintf("https://receiver.example/hooks/%d", i)
		switch i % 5 {
		case 0:
			task.IdempotencyKey = ptr(fmt.Sprintf("key-%d", i))
			task.RequestHash = []byte{byte(i)}
		case 1:
			task.Body, task.Headers = nil, nil // stored as empty
		}
		tasks = append(tasks, task)
	}

	results, err := db.InsertTasks(ctx, tasks, notifyBefore)
	require.NoError(t, err)
	require.Len(t, results, len(tasks))
	wantAnnounced := map[uuid.UUID]time.Time{}
	for i, res := range results {
		task := tasks[i]
		require.True(t, res.Created, "task %d", i)
		require.Nil(t, res.Existing)
		require.Equal(t, model.StatusScheduled, task.Status)
		require.NotNil(t, task.NextAttemptAt)
		require.True(t, task.NextAttemptAt.Equal(task.RunAt))
		require.False(t, task.CreatedAt.IsZero())
		require.False(t, task.UpdatedAt.IsZero())
		if task.RunAt.Before(notifyBefore) {
			wantAnnounced[task.ID] = µs(task.RunAt)
		}

		got, err := db.GetTask(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		require.Equal(t, task.URL, got.URL)
		require.Equal(t, task.Method, got.Method)
		require.Equal(t, task.Headers, got.Headers)
		require.Equal(t, task.Body, got.Body)
		require.True(t, got.RunAt.Equal(µs(task.RunAt)), "run_at %s, want %s", got.RunAt, task.RunAt)
		require.True(t, got.NextAttemptAt.Equal(got.RunAt))
		require.Equal(t, task.Timeout, got.Timeout)
		require.Equal(t, task.MaxAttempts, got.MaxAttempts)
		require.Equal(t, task.MinBackoff, got.MinBackoff)
		require.Equal(t, task.MaxBackoff, got.MaxBackoff)
		require.Equal(t, task.IdempotencyKey, got.IdempotencyKey)
		require.Equal(t, task.RequestHash, got.RequestHash)
		require.True(t, got.CreatedAt.Equal(task.CreatedAt))
		require.Equal(t, model.StatusScheduled, got.Status)
	}
	require.Len(t, wantAnnounced, 25)

	announced := listener.drain(t)
	require.Len(t, announced, len(wantAnnounced))
	for id, at := range wantAnnounced {
		require.Contains(t, announced, id)
		require.Equal(t, at.UnixMicro(), announced[id].UnixMicro())
	}

	// Due tasks are visible to the loader as they would be after single inserts.
	due, err := db.ListDue(ctx, allPartitions(), model.DueCursor{}, notifyBefore, 1000)
	require.NoError(t, err)
	require.Len(t, due, 25)

	t.Run("nothing to insert", func(t *testing.T) {
		t.Parallel()
		results, err := db.InsertTasks(ctx, nil, notifyBefore)
		require.NoError(t, err)
		require.Empty(t, results)
	})
}

func TestInsertTasksIdempotency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	listener := listenDue(t, db, pool)
	now := dbNow(t, pool)

	// A key already used by a single call.
	earlier := newTask(tenant.ID, now.Add(time.Hour))
	earlier.IdempotencyKey, earlier.RequestHash = ptr("order-1"), []byte("hash-1")
	_, created, err := db.InsertTask(ctx, earlier, false)
	require.NoError(t, err)
	require.True(t, created)

	keyed := func(tenantID uuid.UUID, key string, hash string) *model.Task {
		task := newTask(tenantID, now) // due now: announced if stored
		task.IdempotencyKey, task.RequestHash = ptr(key), []byte(hash)
		return task
	}
	tasks := []*model.Task{
		0: keyed(tenant.ID, "order-1", "hash-1"), // replays the single call
		1: keyed(tenant.ID, "order-1", "other"),  // reuses its key: the caller tells by the hash
		2: keyed(tenant.ID, "order-2", "hash-2"), // new
		3: keyed(tenant.ID, "order-2", "hash-2"), // repeats item 2 in the same call
		4: keyed(tenant.ID, "order-2", "hash-x"), // reuses item 2's key
		5: keyed(other.ID, "order-1", "hash-1"),  // keys are per tenant
		6: newTask(tenant.ID, now),               // no key
	}
	results, err := db.InsertTasks(ctx, tasks, now.Add(30*time.Second))
	require.NoError(t, err)

	require.False(t, results[0].Created)
	require.Equal(t, earlier.ID, results[0].Existing.ID)
	require.Equal(t, []byte("hash-1"), results[0].Existing.RequestHash)
	require.False(t, results[1].Created)
	require.Equal(t, earlier.ID, results[1].Existing.ID)
	require.True(t, results[2].Created)
	require.False(t, results[3].Created)
	require.Equal(t, tasks[2].ID, results[3].Existing.ID)
	require.Equal(t, []byte("hash-2"), results[3].Existing.RequestHash)
	require.False(t, results[4].Created)
	require.Equal(t, tasks[2].ID, results[4].Existing.ID)
	require.True(t, results[5].Created)
	require.True(t, results[6].Created)

	// Only the created tasks exist: the earlier one and items 2 and 6; item 5 for the other tenant.
	require.Equal(t, 3, countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1`, tenant.ID))
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1`, other.ID))
	// Only what was stored is announced.
	announced := listener.drain(t)
	require.Len(t, announced, 3)
	for _, i := range []int{2, 5, 6} {
		require.Contains(t, announced, tasks[i].ID)
	}
}

func TestInsertTasksConcurrentKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	// Eight batches race over the same 100 keys, each in its own order: every
	// key ends up with exactly one task, and every batch sees that task.
	const batches, keys = 8, 100
	results := make([][]model.InsertResult, batches)
	inputs := make([][]*model.Task, batches)
	for b := range batches {
		for k := range keys {
			task := newTask(tenant.ID, now.Add(time.Hour))
			task.IdempotencyKey = ptr(fmt.Sprintf("k-%d", (k*7+b*13)%keys))
			task.RequestHash = []byte("same")
			inputs[b] = append(inputs[b], task)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, batches)
	for b := range batches {
		wg.Go(func() { results[b], errs[b] = db.InsertTasks(ctx, inputs[b], now) })
	}
	wg.Wait()

	winners := map[string]uuid.UUID{}
	for b := range batches {
		require.NoError(t, errs[b])
		for i, res := range results[b] {
			key := *inputs[b][i].IdempotencyKey
			id := inputs[b][i].ID
			if !res.Created {
				id = res.Existing.ID
			}
			if w, ok := winners[key]; ok {
				require.Equal(t, w, id, "key %s has two tasks", key)
			}
			winners[key] = id
		}
	}
	require.Len(t, winners, keys)
	require.Equal(t, keys, countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1`, tenant.ID))
}

func TestRescheduleTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	listener := listenDue(t, db, pool)

	claim := func(t *testing.T) *model.ClaimedTask {
		return claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
	}
	tests := []struct {
		name      string
		setup     func(t *testing.T) *model.Task
		wantErr   error
		runAtMove bool // a scheduled task's run_at moves with its next attempt
	}{
		{"scheduled", func(t *testing.T) *model.Task {
			return insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))
		}, nil, true},
		{"scheduled and overdue", func(t *testing.T) *model.Task {
			return insertDueTask(t, db, pool, tenant.ID)
		}, nil, true},
		{"retrying", func(t *testing.T) *model.Task {
			c := claim(t)
			recordOne(t, db, c, 503, nil, "retry", model.StatusRetrying, ptr(time.Now().Add(time.Minute)))
			return &c.Task
		}, nil, false},
		{"dispatching", func(t *testing.T) *model.Task { return &claim(t).Task }, model.ErrConflict, false},
		{"delivered", func(t *testing.T) *model.Task { return deliveredTask(t, db, pool, tenant.ID) }, model.ErrConflict, false},
		{"dead", func(t *testing.T) *model.Task { return deadTask(t, db, pool, tenant.ID) }, model.ErrConflict, false},
		{"canceled", func(t *testing.T) *model.Task {
			task := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))
			_, err := db.CancelTask(ctx, tenant.ID, task.ID)
			require.NoError(t, err)
			return task
		}, model.ErrConflict, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := tt.setup(t)
			before, err := db.GetTask(ctx, tenant.ID, task.ID)
			require.NoError(t, err)
			beforeRow := readTaskRow(t, pool, task.ID)

			// Another tenant's id is not found, and changes nothing.
			_, err = db.RescheduleTask(ctx, other.ID, task.ID, time.Now().Add(2*time.Hour), false)
			require.ErrorIs(t, err, model.ErrNotFound)

			// A time with nanoseconds is rounded up, never down.
			at := time.Now().Add(2 * time.Hour).Truncate(time.Microsecond).Add(500 * time.Nanosecond)
			want := at.Truncate(time.Microsecond).Add(time.Microsecond)
			got, err := db.RescheduleTask(ctx, tenant.ID, task.ID, at, false)
			require.NotNil(t, got, "the task comes back either way")
			require.Equal(t, task.ID, got.ID)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, before.Status, got.Status)
				require.Equal(t, beforeRow, readTaskRow(t, pool, task.ID), "a refused reschedule changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, before.Status, got.Status, "the status stays")
			require.Equal(t, before.Attempts, got.Attempts)
			require.True(t, got.NextAttemptAt.Equal(want), "next_attempt_at %s, want %s", got.NextAttemptAt, want)
			if tt.runAtMove {
				require.True(t, got.RunAt.Equal(want), "run_at %s, want %s", got.RunAt, want)
			} else {
				require.True(t, got.RunAt.Equal(before.RunAt), "a retrying task keeps its run_at")
			}
			require.True(t, got.UpdatedAt.After(before.UpdatedAt))
			stored, err := db.GetTask(ctx, tenant.ID, task.ID)
			require.NoError(t, err)
			require.Equal(t, got, stored)

			// Its old due time has passed or is near: a claim now finds it not due.
			registerNode(t, pool, testNode, time.Hour)
			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, dbNow(t, pool).Add(time.Minute), 30*time.Second, nil)
			require.NoError(t, err)
			require.Empty(t, claims, "the claim's compare-and-set refuses a task moved later")
		})
	}

	t.Run("announced when due soon", func(t *testing.T) {
		// Not parallel: it reads every announcement of the database.
		quiet := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))
		loud := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))
		listener.drain(t) // whatever the other subtests announced
		at := time.Now().Add(10 * time.Second)
		_, err := db.RescheduleTask(ctx, tenant.ID, quiet.ID, at, false)
		require.NoError(t, err)
		_, err = db.RescheduleTask(ctx, tenant.ID, loud.ID, at, true)
		require.NoError(t, err)
		require.Equal(t, map[uuid.UUID]time.Time{loud.ID: at.Truncate(time.Microsecond).Add(time.Microsecond)},
			normalizeAnnounced(listener.drain(t)))
	})
}

// normalizeAnnounced drops the monotonic reading and location of announced
// times, so that maps of them compare with require.Equal.
func normalizeAnnounced(m map[uuid.UUID]time.Time) map[uuid.UUID]time.Time {
	for id, at := range m {
		m[id] = time.UnixMicro(at.UnixMicro())
	}
	return m
}
