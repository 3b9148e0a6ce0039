package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// insertLabelled stores a task of the tenant carrying labels (nil: none).
func insertLabelled(t *testing.T, db *store.DB, tenantID uuid.UUID, labels map[string]string) *model.Task {
	t.Helper()
	task := newTask(tenantID, time.Now().Add(time.Hour))
	task.Labels = labels
	_, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

// labelsColumnIsNull reads whether the task's labels column is NULL.
func labelsColumnIsNull(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) bool {
	t.Helper()
	var null bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT labels IS NULL FROM tasks WHERE id = $1`, id).Scan(&null))
	return null
}

func TestTaskLabelsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	labels := map[string]string{"team": "payments", "app.kubernetes.io/name": "billing", "note": "a:b,c=d", "empty": ""}

	single := insertLabelled(t, db, tenant.ID, labels)
	bare := insertLabelled(t, db, tenant.ID, nil)
	emptied := insertLabelled(t, db, tenant.ID, map[string]string{})

	batch := []*model.Task{newTask(tenant.ID, time.Now().Add(time.Hour)), newTask(tenant.ID, time.Now().Add(time.Hour))}
	batch[0].Labels = map[string]string{"team": "search"}
	results, err := db.InsertTasks(ctx, batch, time.Now())
	require.NoError(t, err)
	require.True(t, results[0].Created)
	require.True(t, results[1].Created)

	for _, c := range []struct {
		id   uuid.UUID
		want map[string]string
	}{
		{single.ID, labels},
		{bare.ID, nil},
		{emptied.ID, nil},
		{batch[0].ID, map[string]string{"team": "search"}},
		{batch[1].ID, nil},
	} {
		got, err := db.GetTask(ctx, tenant.ID, c.id)
		require.NoError(t, err)
		require.Equal(t, c.want, got.Labels)
		// No labels is NULL, not '{}': the row stays out of the label index.
		require.Equal(t, c.want == nil, labelsColumnIsNull(t, pool, c.id))
	}
}

func TestListTasksByLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)

	// In creation order: lists come newest first.
	labelSets := []map[string]string{
		{"team": "payments", "env": "prod"},
		{"team": "payments", "env": "staging"},
		{"team": "search", "env": "prod"},
		{"team": "payments"},
		nil,
		{"note": "a:b"},
		{"empty": ""},
	}
	ids := make([]uuid.UUID, len(labelSets))
	for i, l := range labelSets {
		ids[i] = insertLabelled(t, db, tenant.ID, l).ID
		insertLabelled(t, db, other.ID, l) // the same, another tenant's
	}
	newestFirst := func(idx ...int) []uuid.UUID {
		out := []uuid.UUID{}
		for i := len(idx) - 1; i >= 0; i-- {
			out = append(out, ids[idx[i]])
		}
		return out
	}

	tests := []struct {
		name   string
		filter model.TaskFilter
		want   []uuid.UUID
	}{
		{"one label", model.TaskFilter{Labels: map[string]string{"team": "payments"}}, newestFirst(0, 1, 3)},
		{"two labels, both held", model.TaskFilter{Labels: map[string]string{"team": "payments", "env": "prod"}}, newestFirst(0)},
		{"another value", model.TaskFilter{Labels: map[string]string{"env": "prod"}}, newestFirst(0, 2)},
		{"a value with a colon", model.TaskFilter{Labels: map[string]string{"note": "a:b"}}, newestFirst(5)},
		{"an empty value", model.TaskFilter{Labels: map[string]string{"empty": ""}}, newestFirst(6)},
		{"no match", model.TaskFilter{Labels: map[string]string{"team": "nobody"}}, []uuid.UUID{}},
		{"empty filter is no condition", model.TaskFilter{Labels: map[string]string{}}, newestFirst(0, 1, 2, 3, 4, 5, 6)},
		{"label and status", model.TaskFilter{Labels: map[string]string{"team": "payments"}, Status: ptr(model.StatusScheduled)},
			newestFirst(0, 1, 3)},
		{"label and another status", model.TaskFilter{Labels: map[string]string{"team": "payments"}, Status: ptr(model.StatusDead)},
			[]uuid.UUID{}},
		{"label and url", model.TaskFilter{Labels: map[string]string{"env": "prod"}, URLPrefix: ptr("https://receiver.example/")},
			newestFirst(0, 2)},
		{"label and another url", model.TaskFilter{Labels: map[string]string{"env": "prod"}, URLPrefix: ptr("https://elsewhere.example/")},
			[]uuid.UUID{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := tt.filter
			f.Limit = 100
			got, err := db.ListTasks(ctx, tenant.ID, f)
			require.NoError(t, err)
			require.Equal(t, tt.want, append([]uuid.UUID{}, taskIDs(got)...))

			// Page by page, the filter kept.
			f.Limit = 1
			var paged []uuid.UUID
			for range len(labelSets) + 1 {
				page, err := db.ListTasks(ctx, tenant.ID, f)
				require.NoError(t, err)
				if len(page) == 0 {
					break
				}
				paged = append(paged, page[0].ID)
				f.Before = &page[0].ID
			}
			require.Equal(t, tt.want, append([]uuid.UUID{}, paged...))
		})
	}
}

func TestReplayByLabelsAndEditLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)

	payments := insertLabelled(t, db, tenant.ID, map[string]string{"team": "payments", "env": "prod"})
	search := insertLabelled(t, db, tenant.ID, map[string]string{"team": "search"})
	bare := insertLabelled(t, db, tenant.ID, nil)
	othersPayments := insertLabelled(t, db, other.ID, map[string]string{"team": "payments"})
	for _, id := range []uuid.UUID{payments.ID, search.ID, bare.ID, othersPayments.ID} {
		exec(t, pool, `UPDATE tasks SET status = 'dead', next_attempt_at = NULL, attempts = 1 WHERE id = $1`, id)
	}

	f := model.ReplayFilter{Labels: map[string]string{"team": "payments"}}
	n, err := db.CountDeadTasks(ctx, tenant.ID, f)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the tenant's own dead task with the label")
	n, err = db.CountDeadTasks(ctx, tenant.ID, model.ReplayFilter{Labels: map[string]string{"team": "payments", "env": "staging"}})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = db.CountDeadTasks(ctx, tenant.ID, model.ReplayFilter{})
	require.NoError(t, err)
	require.Equal(t, 3, n)

	replayed, _, err := db.ReplayTasks(ctx, tenant.ID, f, time.Now())
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{payments.ID}, replayed)
	got, err := db.GetTask(ctx, tenant.ID, payments.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusScheduled, got.Status)
	require.Equal(t, payments.Labels, got.Labels, "a replay keeps the labels")

	// A replay's edit replaces the labels, or with an empty set removes
	// them (NULL again); without labels it keeps them.
	edited, err := db.ReplayTask(ctx, tenant.ID, search.ID, time.Now(), &model.TaskEdit{Labels: map[string]string{"team": "ranking"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"team": "ranking"}, edited.Labels)
	exec(t, pool, `UPDATE tasks SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, search.ID)
	kept, err := db.ReplayTask(ctx, tenant.ID, search.ID, time.Now(), &model.TaskEdit{URL: ptr("https://receiver.example/v2")})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"team": "ranking"}, kept.Labels)
	exec(t, pool, `UPDATE tasks SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, search.ID)
	cleared, err := db.ReplayTask(ctx, tenant.ID, search.ID, time.Now(), &model.TaskEdit{Labels: map[string]string{}})
	require.NoError(t, err)
	require.Nil(t, cleared.Labels)
	require.True(t, labelsColumnIsNull(t, pool, search.ID))
}

func TestScheduleLabelsReachOccurrences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)

	labelled := schedNew(tenant.ID, &first)
	labelled.Labels = map[string]string{"team": "payments", "kind": "report"}
	require.NoError(t, db.InsertSchedule(ctx, labelled, nil))
	bare := schedInsert(t, db, tenant.ID, &first)

	got, err := db.GetSchedule(ctx, tenant.ID, labelled.ID)
	require.NoError(t, err)
	require.Equal(t, labelled.Labels, got.Labels)
	got, err = db.GetSchedule(ctx, tenant.ID, bare.ID)
	require.NoError(t, err)
	require.Nil(t, got.Labels)

	until := now.Add(2 * time.Second)
	schedMaterialize(t, db, until, schedEverySecond(until))
	for _, o := range schedOccurrences(t, pool, labelled.ID) {
		task, err := db.GetTask(ctx, tenant.ID, o.ID)
		require.NoError(t, err)
		require.Equal(t, labelled.Labels, task.Labels)
	}
	occ := schedOccurrences(t, pool, bare.ID)
	require.NotEmpty(t, occ)
	for _, o := range occ {
		require.True(t, labelsColumnIsNull(t, pool, o.ID))
	}

	list, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Labels: map[string]string{"kind": "report"}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, len(schedOccurrences(t, pool, labelled.ID)))
}

// TestListTasksByLabelReadsMatchesOnly backs migration 00017: a page of
// the tasks carrying a rare label reads them through tasks_tenant_labels,
// not every task of the tenant, even when other tenants carry that label on
// many tasks; a page of a common label stops at the page's end. 20,000
// tasks of the tenant carry env:prod, 20,000 of another tenant team:rare.
func TestListTasksByLabelReadsMatchesOnly(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	const busy = 20_000
	fill := func(tenantID uuid.UUID, labels string) {
		exec(t, pool, `
			INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
				timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, labels)
			SELECT gen_random_uuid(), $1, 'scheduled', 'https://busy.example/hooks/' || g, 'POST', now(), now(),
				10000, 10, 1000, 3600000, $3::jsonb
			FROM generate_series(1, $2::int) AS g`, tenantID, busy, labels)
	}
	fill(tenant.ID, `{"env": "prod"}`)
	fill(other.ID, `{"team": "rare"}`)
	for range 3 {
		insertLabelled(t, db, tenant.ID, map[string]string{"team": "rare", "env": "prod"})
	}
	exec(t, pool, `ANALYZE tasks`)
	// What VACUUM does on its own between bursts of inserts: move the
	// labelled rows out of GIN's pending list, which every search reads
	// whole, into the index proper.
	exec(t, pool, `SELECT gin_clean_pending_list('tasks_tenant_labels')`)

	tests := []struct {
		name      string
		labels    map[string]string
		wantRows  float64
		wantIndex string
	}{
		{"rare label", map[string]string{"team": "rare"}, 3, "tasks_tenant_labels"},
		{"rare and common labels", map[string]string{"team": "rare", "env": "prod"}, 3, "tasks_tenant_labels"},
		{"no match", map[string]string{"team": "nobody"}, 0, "tasks_tenant_labels"},
		{"common label", map[string]string{"env": "prod"}, 51, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := model.TaskFilter{Labels: tt.labels, Limit: 51} // a page of 50 and one more, as the API asks
			plan := explainCustom(t, pool, store.QueryListTasks, store.ListTasksArgs(tenant.ID, f))
			var facts planFacts
			walkPlan(plan, &facts)
			require.Empty(t, facts.seqScans, "plan nodes: %v", facts.nodeTypes)
			if tt.wantIndex != "" {
				require.Contains(t, facts.indexNames, tt.wantIndex, "plan nodes: %v", facts.nodeTypes)
			}
			require.Equal(t, tt.wantRows, plan["Actual Rows"], "plan nodes: %v", facts.nodeTypes)
			blocks := sharedBlocks(plan)
			t.Logf("%s among %d tasks: %d shared buffers; plan %v %v", tt.name, 2*busy, blocks, facts.nodeTypes, facts.indexNames)
			// A few index pages and the page's rows, nothing in proportion
			// to either tenant's tasks (which fill hundreds of pages).
			require.Less(t, blocks, 150)
		})
	}
}
