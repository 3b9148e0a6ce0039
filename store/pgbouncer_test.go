package store_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// openPooled opens a store whose DatabaseURL is pooled and whose DirectURL
// (when not empty) is direct, with more client connections than the
// PgBouncer has server connections, so that statements of one client land on
// several server connections.
func openPooled(t *testing.T, pooled, direct string, pooler store.Pooler) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{
		DatabaseURL: pooled, DirectURL: direct, Pooler: pooler, MaxConns: 3 * storetest.PgBouncerPoolSize,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db
}

// TestPooledDetection: Open tells a transaction pooler from Postgres itself
// unless told, and a DB behind one without a direct URL refuses what needs a
// session rather than LISTEN in vain or leave a migration lock behind.
func TestPooledDetection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := storetest.DatabaseURL(t)
	pooled := storetest.PrivatePgBouncer(t, direct)

	require.False(t, openPooled(t, direct, "", store.PoolerAuto).Pooled(), "Postgres itself")
	require.NoError(t, openPooled(t, direct, "", store.PoolerAuto).CheckSession())
	require.True(t, openPooled(t, direct, "", store.PoolerTransaction).Pooled(), "declared, not detected")
	require.False(t, openPooled(t, pooled, "", store.PoolerNone).Pooled(), "declared, not detected")

	db := openPooled(t, pooled, "", "")
	require.True(t, db.Pooled(), "PgBouncer detected")
	require.ErrorIs(t, db.CheckSession(), store.ErrNoSession)
	require.ErrorIs(t, db.Migrate(ctx), store.ErrNoSession)
	require.ErrorIs(t, db.ListenDue(ctx, func() { t.Error("listening without a session") }, nil), store.ErrNoSession)
	// Everything else works through the pooler alone.
	tenant := createTenant(t, db)
	got, err := db.GetTenant(ctx, tenant.ID)
	require.NoError(t, err)
	require.Equal(t, tenant.Name, got.Name)

	withDirect := openPooled(t, pooled, direct, store.PoolerAuto)
	require.True(t, withDirect.Pooled())
	require.NoError(t, withDirect.CheckSession())

	named := openPooled(t, pooled+"&default_query_exec_mode=describe_exec", "", store.PoolerAuto)
	require.True(t, named.Pooled())
	tenant = createTenant(t, named)
	_, err = named.GetTenant(ctx, tenant.ID)
	require.NoError(t, err, "a mode the URL names is kept")
	// These infer parameter types from Go types, and fail on the store's.
	for _, mode := range []string{"exec", "simple_protocol"} {
		_, err := store.Open(ctx, store.Config{DatabaseURL: pooled + "&default_query_exec_mode=" + mode})
		require.ErrorContains(t, err, "default_query_exec_mode="+mode+" cannot encode")
	}
}

// TestThroughPgBouncer runs the migrations (through the direct URL) and the
// dispatcher's and the API's statements through a PgBouncer in transaction
// mode, many clients over few server connections and each statement many
// times, as a node does: none may depend on a prepared statement, a session
// setting or the connection it ran on before.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := emptyDatabaseURL(t)
	pooled := storetest.PrivatePgBouncer(t, direct)

	// Two nodes migrating at once: the lock is held on sessions.
	dbs := []*store.DB{openPooled(t, pooled, direct, ""), openPooled(t, pooled, direct, "")}
	var wg sync.WaitGroup
	errs := make([]error, len(dbs))
	for i, db := range dbs {
		wg.Go(func() { errs[i] = db.Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	db := dbs[0]
	pool := db.Pool()
	require.Equal(t, wantTables, userTables(t, db))
	listener := listenDue(t, db, pool)

	tenant, keyID := createTenantWithKey(t, db)
	key, keyTenant, err := db.GetAPIKey(ctx, keyID)
	require.NoError(t, err)
	require.Equal(t, keyID, key.ID)
	require.Equal(t, tenant.ID, keyTenant.ID)
	_, err = db.Heartbeat(ctx, testNode, "pooled-node", time.Minute)
	require.NoError(t, err)

	// Concurrent rounds over every step of a task's road: stored alone and
	// in batch (announced on commit), listed due, claimed (a pipelined
	// transaction with SET LOCAL), recorded, listed by cursor, canceled,
	// replayed and purged.
	const workers, rounds = 3 * storetest.PgBouncerPoolSize, 5
	var mu sync.Mutex
	announced := map[uuid.UUID]bool{}
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				if err := pooledRound(ctx, db, tenant.ID, w*rounds+r, &mu, announced); err != nil {
					t.Errorf("worker %d round %d: %v", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())

	// A marker announced last arrives last (notifications come in commit
	// order); replays announce a task a second time.
	marker := uuid.New()
	exec(t, pool, `SELECT pg_notify($1, $2::text || ' 0')`, store.DueNotifyChannel, marker)
	heard := map[uuid.UUID]bool{}
	for !heard[marker] {
		select {
		case d := <-listener.got:
			heard[d.ID] = true
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the marker notification never came")
		}
	}
	for id := range announced {
		require.Contains(t, heard, id, "task %s announced through the pooler and heard on the direct connection", id)
	}

	// Purge what finished: every task was delivered or canceled.
	purged, err := db.PurgeFinished(ctx, model.PurgeParams{Now: time.Now().Add(time.Hour), DefaultRetention: time.Minute, Limit: 10_000})
	require.NoError(t, err)
	require.Equal(t, workers*rounds*4, purged.Tasks)
	require.NoError(t, db.LeaveNode(ctx, testNode))
}

// pooledRound takes four tasks through their lives; it returns the first
// error instead of failing, since it runs on a worker goroutine.
func pooledRound(ctx context.Context, db *store.DB, tenantID uuid.UUID, n int, mu *sync.Mutex, announced map[uuid.UUID]bool) error {
	now := time.Now()
	due := newTask(tenantID, now.Add(-time.Minute))
	if _, _, err := db.InsertTask(ctx, due, true); err != nil {
		return err
	}
	batch := []*model.Task{newTask(tenantID, now.Add(-time.Second)), newTask(tenantID, now.Add(time.Hour)), newTask(tenantID, now.Add(time.Hour))}
	if _, err := db.InsertTasks(ctx, batch, now.Add(time.Minute)); err != nil {
		return err
	}
	mu.Lock()
	announced[due.ID], announced[batch[0].ID] = true, true
	mu.Unlock()

	if _, err := db.ListDue(ctx, allPartitions(), model.DueCursor{}, now, 100); err != nil {
		return err
	}
	claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{due.ID, batch[0].ID}, now, 30*time.Second, nil)
	if err != nil {
		return err
	}
	results := make([]model.AttemptResult, len(claims))
	for i, c := range claims {
		results[i] = recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
	}
	if _, err := db.RecordAttempts(ctx, results); err != nil {
		return err
	}
	if _, err := db.ReplayTask(ctx, tenantID, due.ID, now, nil); err != nil {
		return err
	}
	if _, err := db.CancelTask(ctx, tenantID, due.ID); err != nil {
		return err
	}
	for _, t := range batch[1:] {
		if _, err := db.CancelTask(ctx, tenantID, t.ID); err != nil {
			return err
		}
	}
	page, err := db.ListTasks(ctx, tenantID, model.TaskFilter{Limit: 2})
	if err != nil {
		return err
	}
	if len(page) == 2 {
		if _, err := db.ListTasks(ctx, tenantID, model.TaskFilter{Limit: 2, Before: &page[1].ID}); err != nil {
			return err
		}
	}
	if _, err := db.ListAttempts(ctx, tenantID, due.ID, 0, 1000); err != nil {
		return err
	}
	_, err = db.CountTasksByStatus(ctx, tenantID, 1000)
	return err
}
