package tasks_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

// fakeAnnouncer stands for the local dispatcher and records what it is told.
type fakeAnnouncer struct {
	lookahead time.Duration
	mu        sync.Mutex
	scheduled []scheduled
	canceled  []uuid.UUID
}

type scheduled struct {
	ID uuid.UUID
	At time.Time
}

func (f *fakeAnnouncer) Schedule(id uuid.UUID, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scheduled = append(f.scheduled, scheduled{id, at})
}

func (f *fakeAnnouncer) Cancel(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.canceled = append(f.canceled, id)
}

func (f *fakeAnnouncer) Lookahead() time.Duration { return f.lookahead }

func (f *fakeAnnouncer) scheduledCalls() []scheduled {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.scheduled)
}

func (f *fakeAnnouncer) canceledIDs() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.canceled)
}

// setupConfig varies what setup builds.
type setupConfig struct {
	// lookahead is the fake announcer's window. Default 30s.
	lookahead time.Duration
	// noAnnouncer builds the service of an API-only node.
	noAnnouncer bool
	// configLookahead is tasks.Config.Lookahead.
	configLookahead time.Duration
}

// testBundle is what a test needs beside the service.
type testBundle struct {
	db        *store.DB
	dbURL     string
	announcer *fakeAnnouncer
	clock     *clock.Fake
	tenant    *model.Tenant
}

// setup builds a service over a migrated database of the test's own, with a
// fake announcer, a fake clock and one tenant.
func setup(t *testing.T, cfg setupConfig) (*tasks.Service, *testBundle) {
	t.Helper()
	dbURL := storetest.DatabaseURL(t)
	db, err := store.Open(t.Context(), store.Config{DatabaseURL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	if cfg.lookahead == 0 {
		cfg.lookahead = 30 * time.Second
	}
	b := &testBundle{
		db:        db,
		dbURL:     dbURL,
		announcer: &fakeAnnouncer{lookahead: cfg.lookahead},
		// Whole seconds: Postgres keeps microseconds, so times round-trip exactly.
		clock: clock.NewFake(time.Now().UTC().Truncate(time.Second)),
	}
	created, err := tenants.New(tenants.Config{Store: db}).Create(t.Context(), "acme", model.ActorCLI)
	require.NoError(t, err)
	b.tenant = &created.Tenant

	tcfg := tasks.Config{Store: db, Announcer: b.announcer, Lookahead: cfg.configLookahead, Clock: b.clock}
	if cfg.noAnnouncer {
		tcfg.Announcer = nil
	}
	svc, err := tasks.New(tcfg)
	require.NoError(t, err)
	return svc, b
}

// newTask is a valid task due in, after the fake clock's now. key "" means
// none; hash stands for the request's fingerprint.
func (b *testBundle) newTask(in time.Duration, key, hash string) *model.Task {
	t := &model.Task{
		URL: "https://example.com/hook", Method: "POST", Headers: map[string]string{},
		RunAt: b.clock.Now().Add(in), Timeout: 30 * time.Second,
		MaxAttempts: 5, MinBackoff: time.Second, MaxBackoff: time.Minute,
	}
	if key != "" {
		t.IdempotencyKey, t.RequestHash = &key, []byte(hash)
	}
	return t
}

// create stores a task due in, requiring success.
func (b *testBundle) create(t *testing.T, svc *tasks.Service, in time.Duration) *model.Task {
	t.Helper()
	res, err := svc.Create(t.Context(), b.tenant, b.newTask(in, "", ""))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	return res.Task
}

// exec runs SQL on the test's database, for states the service cannot reach
// on its own (a task delivered, dead or being dispatched).
func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), b.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func TestNewRequiresStore(t *testing.T) {
	t.Parallel()
	_, err := tasks.New(tasks.Config{})
	require.Error(t, err)
}

// TestCreateAnnouncesDueSoon: a task due within the local dispatcher's
// look-ahead is handed to it, one due later is left to its loader; the window
// is the announcer's, whatever Config.Lookahead says.
func TestCreateAnnouncesDueSoon(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		lookahead time.Duration
		in        time.Duration
		announced bool
	}{
		{"due now", 30 * time.Second, 0, true},
		{"due within the window", 30 * time.Second, 29 * time.Second, true},
		{"due at the window's end", 30 * time.Second, 30 * time.Second, false},
		{"due in an hour", 30 * time.Second, time.Hour, false},
		{"a wider window", 2 * time.Minute, 90 * time.Second, true},
		{"a narrower window", 10 * time.Second, 20 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Config.Lookahead contradicts the announcer in every case: the
			// announcer's window is the one that counts.
			svc, b := setup(t, setupConfig{lookahead: tc.lookahead, configLookahead: time.Hour + time.Minute})
			task := b.create(t, svc, tc.in)
			require.Equal(t, model.StatusScheduled, task.Status)
			if tc.announced {
				require.Equal(t, []scheduled{{task.ID, task.RunAt}}, b.announcer.scheduledCalls())
			} else {
				require.Empty(t, b.announcer.scheduledCalls())
			}
		})
	}
}

// TestCreateNotifiesWithinConfigLookahead: without a local dispatcher, the
// store's announcement to the dispatchers elsewhere follows Config.Lookahead.
func TestCreateNotifiesWithinConfigLookahead(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{noAnnouncer: true, configLookahead: 2 * time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listening := make(chan struct{})
	due := make(chan model.DueTask, 10)
	go func() {
		_ = b.db.ListenDue(ctx, func() { close(listening) }, func(d model.DueTask) { due <- d })
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("not listening")
	}

	// Notifications arrive in commit order: were the later task announced,
	// its notification would come first.
	later := b.create(t, svc, 3*time.Minute)
	sooner := b.create(t, svc, 90*time.Second) // past model.DefaultLookahead, within the configured one
	select {
	case d := <-due:
		require.Equal(t, sooner.ID, d.ID, "the task past the window (%s) is not announced", later.ID)
	case <-time.After(10 * time.Second):
		t.Fatal("the task within Config.Lookahead was not announced")
	}
}

// TestCreateIdempotent: a repeat with the same key and request is the
// earlier task, replayed and not announced again; the same key for another
// request is refused.
func TestCreateIdempotent(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	first, err := svc.Create(t.Context(), b.tenant, b.newTask(0, "k", "request-1"))
	require.NoError(t, err)
	require.False(t, first.Replayed)

	again, err := svc.Create(t.Context(), b.tenant, b.newTask(0, "k", "request-1"))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Task.ID, again.Task.ID)

	reused, err := svc.Create(t.Context(), b.tenant, b.newTask(0, "k", "request-2"))
	require.ErrorIs(t, err, tasks.ErrKeyReused)
	require.Equal(t, first.Task.ID, reused.Task.ID)

	require.Equal(t, []scheduled{{first.Task.ID, first.Task.RunAt}}, b.announcer.scheduledCalls(), "announced once, when created")
}

// TestCreateQuota: over max_pending_tasks a create is refused with what the
// 429 needs, unless its idempotency key names a task the tenant has; only
// pending tasks count.
func TestCreateQuota(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	b.tenant.Limits.MaxPendingTasks = 2
	first, err := svc.Create(t.Context(), b.tenant, b.newTask(time.Hour, "first", "request-1"))
	require.NoError(t, err)
	b.create(t, svc, time.Hour)

	for name, task := range map[string]*model.Task{
		"no key":  b.newTask(0, "", ""),
		"new key": b.newTask(0, "new", "request-2"),
	} {
		_, err := svc.Create(t.Context(), b.tenant, task)
		var quota *tasks.QuotaError
		require.ErrorAs(t, err, &quota, name)
		require.Equal(t, tasks.QuotaError{Limit: 2, Pending: 2, Adding: 1, RetryAfter: time.Second}, *quota, name)
	}
	require.Empty(t, b.announcer.scheduledCalls(), "refused tasks are not announced")
	pending, err := svc.Pending(t.Context(), b.tenant.ID)
	require.NoError(t, err)
	require.Equal(t, 2, pending, "refused tasks are not stored")

	// A key the tenant already used creates nothing: past the quota, it is
	// answered as without one.
	again, err := svc.Create(t.Context(), b.tenant, b.newTask(time.Hour, "first", "request-1"))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Task.ID, again.Task.ID)
	_, err = svc.Create(t.Context(), b.tenant, b.newTask(time.Hour, "first", "request-3"))
	require.ErrorIs(t, err, tasks.ErrKeyReused)

	// Finished tasks free the quota; dispatching ones do not.
	b.exec(t, `UPDATE tasks SET status = 'dispatching' WHERE id = $1`, first.Task.ID)
	_, err = svc.Create(t.Context(), b.tenant, b.newTask(0, "", ""))
	require.ErrorAs(t, err, new(*tasks.QuotaError))
	b.exec(t, `UPDATE tasks SET status = 'delivered', next_attempt_at = NULL WHERE id = $1`, first.Task.ID)
	b.create(t, svc, 0)
}

// TestCreateBatch: each task is created, replayed or refused as a single
// create would be; the due-soon created ones are announced; the quota admits
// tasks in order.
func TestCreateBatch(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	earlier, err := svc.Create(t.Context(), b.tenant, b.newTask(time.Hour, "earlier", "request-e"))
	require.NoError(t, err)
	// Room for five more: the quota admits in order, counting replays and
	// reused keys too, as it cannot know them before the insert.
	b.tenant.Limits.MaxPendingTasks = 6

	batch := []*model.Task{
		0: b.newTask(0, "", ""),
		1: b.newTask(time.Hour, "", ""),
		2: b.newTask(time.Hour, "earlier", "request-e"),  // a replay
		3: b.newTask(10*time.Second, "earlier", "other"), // a reused key
		4: b.newTask(5*time.Second, "", ""),
		5: b.newTask(0, "", ""), // the sixth: over the quota
		6: b.newTask(0, "", ""),
	}
	results, err := svc.CreateBatch(t.Context(), b.tenant, batch)
	require.NoError(t, err)
	require.Len(t, results, len(batch))

	for _, i := range []int{0, 1, 4} {
		require.NoError(t, results[i].Err, i)
		require.False(t, results[i].Replayed, i)
		require.Equal(t, batch[i].ID, results[i].Task.ID, i)
		require.Equal(t, model.StatusScheduled, results[i].Task.Status, i)
	}
	require.NoError(t, results[2].Err)
	require.True(t, results[2].Replayed)
	require.Equal(t, earlier.Task.ID, results[2].Task.ID)
	require.ErrorIs(t, results[3].Err, tasks.ErrKeyReused)
	for _, i := range []int{5, 6} {
		var quota *tasks.QuotaError
		require.ErrorAs(t, results[i].Err, &quota, i)
		require.Equal(t, 6, quota.Limit)
		require.Equal(t, time.Second, quota.RetryAfter)
		require.Nil(t, results[i].Task, i)
	}
	require.ElementsMatch(t, []scheduled{{batch[0].ID, batch[0].RunAt}, {batch[4].ID, batch[4].RunAt}},
		b.announcer.scheduledCalls(), "the created tasks due within the window, and only those")

	pending, err := svc.Pending(t.Context(), b.tenant.ID)
	require.NoError(t, err)
	require.Equal(t, 4, pending, "the earlier task and three new ones")
}
