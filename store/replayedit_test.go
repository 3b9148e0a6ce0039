package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// moveTo is the change that sends task to url with headers.
func moveTo(task *model.Task, url string, headers map[string]string) model.TaskChange {
	return model.TaskChange{
		Was:  model.EditTarget{ID: task.ID, URL: task.URL, Headers: task.Headers},
		Edit: model.TaskEdit{URL: &url, Headers: headers},
	}
}

func TestDeadTasksToEdit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)

	var want []model.EditTarget
	for range 5 {
		task := deadTask(t, db, pool, tenant.ID)
		want = append(want, model.EditTarget{ID: task.ID, URL: task.URL, Headers: task.Headers})
	}
	elsewhere := deadTask(t, db, pool, tenant.ID)
	exec(t, pool, `UPDATE tasks SET url = 'https://elsewhere.example/x' WHERE id = $1`, elsewhere.ID)
	deliveredTask(t, db, pool, tenant.ID)
	deadTask(t, db, pool, other.ID)

	filter := model.ReplayFilter{URLPrefix: ptr("https://receiver.example/")}
	var got []model.EditTarget
	after := uuid.Nil
	for {
		page, err := db.DeadTasksToEdit(ctx, tenant.ID, filter, after, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	require.Equal(t, want, got, "the tenant's dead tasks matching, in id order, each once, with their URL and headers")

	all, err := db.DeadTasksToEdit(ctx, tenant.ID, model.ReplayFilter{}, uuid.Nil, 100)
	require.NoError(t, err)
	require.Len(t, all, 6, "no filter: every dead task of the tenant, no other's")
}

func TestEditReplayTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)

	moved := []*model.Task{deadTask(t, db, pool, tenant.ID), deadTask(t, db, pool, tenant.ID)}
	// Changed since its change was worked out: left as it is.
	stale := deadTask(t, db, pool, tenant.ID)
	// Replayed meanwhile: no longer dead.
	replayed := deadTask(t, db, pool, tenant.ID)
	delivered := deliveredTask(t, db, pool, tenant.ID)
	othersTask := deadTask(t, db, pool, other.ID)

	newHeaders := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer new"}
	changes := []model.TaskChange{
		moveTo(moved[0], "https://new.example/hooks/order", newHeaders),
		moveTo(moved[1], "https://new.example/hooks/order", map[string]string{}),
		moveTo(stale, "https://new.example/stale", newHeaders),
		moveTo(replayed, "https://new.example/replayed", newHeaders),
		moveTo(delivered, "https://new.example/delivered", newHeaders),
		moveTo(othersTask, "https://new.example/stolen", newHeaders),
	}
	exec(t, pool, `UPDATE tasks SET headers = '{"X-Changed": "1"}' WHERE id = $1`, stale.ID)
	_, err := db.ReplayTask(ctx, tenant.ID, replayed.ID, time.Now(), nil)
	require.NoError(t, err)
	untouched := map[uuid.UUID]*model.Task{}
	for _, task := range []*model.Task{stale, replayed, delivered} {
		got, err := db.GetTask(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		untouched[task.ID] = got
	}
	othersBefore := tenantTaskRows(t, pool, other.ID)
	usageBefore := usageTotals(t, pool, tenant.ID)

	at := dbNow(t, pool).Add(500 * time.Nanosecond)
	ids, due, err := db.EditReplayTasks(ctx, tenant.ID, changes, at)
	require.NoError(t, err)
	require.Equal(t, at.Truncate(time.Microsecond).Add(time.Microsecond), due, "rounded up, never down")
	want := []uuid.UUID{moved[0].ID, moved[1].ID}
	sortUUIDs(want)
	sortUUIDs(ids)
	require.Equal(t, want, ids, "only the tasks still dead as read, of this tenant")

	for i, before := range moved {
		got, err := db.GetTask(ctx, tenant.ID, before.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusScheduled, got.Status)
		require.True(t, got.NextAttemptAt.Equal(due))
		require.Equal(t, before.Attempts, got.AttemptBase, "a fresh retry budget")
		require.Equal(t, "https://new.example/hooks/order", got.URL)
		require.Equal(t, *changes[i].Edit.URL, got.URL)
		require.Equal(t, changes[i].Edit.Headers, got.Headers)
		require.Equal(t, before.Body, got.Body, "the body stays")
		require.Equal(t, before.Method, got.Method)
		require.Equal(t, before.Labels, got.Labels)
		require.Equal(t, before.Attempts, got.Attempts)
	}
	for id, before := range untouched {
		got, err := db.GetTask(ctx, tenant.ID, id)
		require.NoError(t, err)
		require.Equal(t, before, got, "task %s left as it was", id)
	}
	require.Equal(t, othersBefore, tenantTaskRows(t, pool, other.ID), "another tenant's task untouched")
	require.Equal(t, usageBefore, usageTotals(t, pool, tenant.ID), "nothing metered until attempts are made")

	again, _, err := db.EditReplayTasks(ctx, tenant.ID, changes[:2], at)
	require.NoError(t, err)
	require.Empty(t, again, "no longer dead")

	none, _, err := db.EditReplayTasks(ctx, tenant.ID, nil, at)
	require.NoError(t, err)
	require.Empty(t, none)
	_, _, err = db.EditReplayTasks(ctx, tenant.ID, []model.TaskChange{{Was: model.EditTarget{ID: stale.ID}}}, at)
	require.Error(t, err, "a change must say the URL and headers to store")
}

func TestEditReplayTasksAnnounced(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t) // NOTIFY is per database: only this test's statements arrive
	tenant := createTenant(t, db)
	var changes []model.TaskChange
	for range 3 {
		changes = append(changes, moveTo(deadTask(t, db, pool, tenant.ID), "https://new.example/", map[string]string{}))
	}
	listener := listenDue(t, db, pool)
	ids, due, err := db.EditReplayTasks(context.Background(), tenant.ID, changes, time.Now())
	require.NoError(t, err)
	require.Len(t, ids, 3)
	want := map[uuid.UUID]time.Time{}
	for _, id := range ids {
		want[id] = due
	}
	require.Equal(t, normalizeAnnounced(want), normalizeAnnounced(listener.drain(t)), "each once, due when replayed")
}

// usageTotals is the tenant's usage counts summed over days and shards.
func usageTotals(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID) [3]int64 {
	t.Helper()
	var got [3]int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT coalesce(sum(tasks_created), 0), coalesce(sum(deliveries), 0),
		coalesce(sum(attempts), 0) FROM usage_days WHERE tenant_id = $1`, tenantID).Scan(&got[0], &got[1], &got[2]))
	return got
}
