package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestPurgedKeysRemembered: a task (or publish) purged by retention while its
// idempotency key is inside the window leaves the key taken: a single
// insert, a batch insert and a publish repeating it store nothing and get the
// purged row back (without body or headers), and the quota's look-up sees
// the key; once the window has passed, the purger forgets the key and it
// creates anew. Keys outside the window when purged are not remembered.
func TestPurgedKeysRemembered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	setRetention(t, db, tenant.ID, time.Minute)
	now := dbNow(t, pool)
	const window = 24 * time.Hour

	keyed := func(key string) *model.Task {
		task := newTask(tenant.ID, now.Add(-time.Hour))
		task.IdempotencyKey, task.RequestHash = ptr(key), []byte("hash-"+key)
		return task
	}
	// Three tasks with keys, delivered an hour ago; one created two days
	// ago, already out of the window; and a publish with a key.
	single, batch, old := keyed("single"), keyed("batch"), keyed("old")
	for _, task := range []*model.Task{single, batch, old} {
		_, created, err := db.InsertTask(ctx, task, false)
		require.NoError(t, err)
		require.True(t, created)
	}
	pub := newPublish(tenant.ID, "orders", now.Add(-time.Hour), "https://a.example/hook")
	pub.IdempotencyKey, pub.RequestHash = ptr("publish"), []byte("hash-publish")
	_, _, err := db.InsertPublishes(ctx, []*model.Publish{pub}, nil, now)
	require.NoError(t, err)
	exec(t, pool, `UPDATE tasks SET status = 'delivered', attempts = 1, updated_at = $2 WHERE tenant_id = $1`,
		tenant.ID, now.Add(-time.Hour))
	exec(t, pool, `UPDATE tasks SET created_at = $2 WHERE id = $1`, old.ID, now.Add(-48*time.Hour))

	r, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, Limit: 100, IdempotencyWindow: window})
	require.NoError(t, err)
	require.Equal(t, 4, r.Tasks)
	require.Equal(t, 1, r.Publishes)
	require.Equal(t, 3, r.Remembered, "single, batch and the publish; not the key created before the window")
	require.Empty(t, tenantTasks(t, pool, tenant.ID))

	// A single insert repeating the key stores nothing and gets the task as
	// it was purged.
	again := keyed("single")
	existing, created, err := db.InsertTask(ctx, again, false)
	require.NoError(t, err)
	require.False(t, created, "a purged task's key inside the window creates nothing")
	require.Equal(t, single.ID, existing.ID)
	require.Equal(t, model.StatusDelivered, existing.Status)
	require.Equal(t, single.URL, existing.URL)
	require.Equal(t, []byte("hash-single"), existing.RequestHash)
	require.Equal(t, 1, existing.Attempts)
	require.Empty(t, existing.Body, "the payload went with the purge")
	held, err := db.HasIdempotencyKey(ctx, tenant.ID, "single")
	require.NoError(t, err)
	require.True(t, held, "the quota lets a repeat through")

	// A batch: the remembered key is answered, the old and a new key create.
	results, err := db.InsertTasks(ctx, []*model.Task{keyed("batch"), keyed("old"), keyed("new")}, now)
	require.NoError(t, err)
	require.False(t, results[0].Created)
	require.Equal(t, batch.ID, results[0].Existing.ID)
	require.True(t, results[1].Created, "a key created before the window was not remembered")
	require.True(t, results[2].Created)

	// A publish repeating its key.
	repeat := newPublish(tenant.ID, "orders", now, "https://a.example/hook")
	repeat.IdempotencyKey, repeat.RequestHash = ptr("publish"), []byte("hash-publish")
	pubResults, _, err := db.InsertPublishes(ctx, []*model.Publish{repeat}, nil, now)
	require.NoError(t, err)
	require.False(t, pubResults[0].Created)
	require.Equal(t, pub.ID, pubResults[0].Existing.ID)
	held, err = db.HasPublishKey(ctx, tenant.ID, "publish")
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, 2, len(tenantTasks(t, pool, tenant.ID)), "old and new only")

	// Past the window the purger forgets the keys, in bounded batches.
	forgotten, err := db.ExpireIdempotencyKeys(ctx, now.Add(time.Hour), 2)
	require.NoError(t, err)
	require.Equal(t, 2, forgotten)
	forgotten, err = db.ExpireIdempotencyKeys(ctx, now.Add(time.Hour), 2)
	require.NoError(t, err)
	require.Equal(t, 1, forgotten)
	fresh := keyed("single")
	_, created, err = db.InsertTask(ctx, fresh, false)
	require.NoError(t, err)
	require.True(t, created, "a key past the window creates a new task")
	require.NotEqual(t, single.ID, fresh.ID)

	// Without a window, nothing is remembered.
	exec(t, pool, `UPDATE tasks SET status = 'delivered', updated_at = $2 WHERE tenant_id = $1`, tenant.ID, now.Add(-time.Hour))
	r, err = db.PurgeFinished(ctx, model.PurgeParams{Now: now, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 3, r.Tasks)
	require.Zero(t, r.Remembered)
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM idempotency_keys WHERE tenant_id = $1`, tenant.ID))
}
