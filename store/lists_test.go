package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

func TestLikePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix string
		chars  int
		want   string
	}{
		{"https://a.example/", 0, `https://a.example/%`},
		{`50%_off\now`, 0, `50\%\_off\\now%`},
		{"héllo", 2, "hé%"},
		{"héllo", 5, "héllo%"},
		{"héllo", 9, "héllo%"},
		{"a_b", 2, `a\_%`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, store.LikePrefix(tt.prefix, tt.chars), "%q, %d", tt.prefix, tt.chars)
	}
}

// insertTaskTo stores a task of the tenant sent to url, with an idempotency
// key unless key is "".
func insertTaskTo(t *testing.T, db *store.DB, tenantID uuid.UUID, url, key string) *model.Task {
	t.Helper()
	task := newTask(tenantID, time.Now().Add(time.Hour))
	task.URL = url
	if key != "" {
		task.IdempotencyKey, task.RequestHash = &key, []byte(key)
	}
	_, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func TestListTasksByURLAndKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	long := "https://a.example/" + strings.Repeat("a", 300)

	// In creation order: lists come newest first.
	urls := []string{
		"https://a.example/x_1",
		"https://a.example/xa1",
		"https://a.example/x%1",
		`https://a.example/x\1`,
		"https://A.example/x_1",
		long + "1",
		long + "2",
		"https://b.example/",
	}
	ids := make([]uuid.UUID, len(urls))
	for i, u := range urls {
		ids[i] = insertTaskTo(t, db, tenant.ID, u, "key-"+u).ID
		insertTaskTo(t, db, other.ID, u, "key-"+u) // the same, another tenant's
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
		{"_ is no wildcard", model.TaskFilter{URLPrefix: ptr("https://a.example/x_")}, newestFirst(0)},
		{"% is no wildcard", model.TaskFilter{URLPrefix: ptr("https://a.example/x%")}, newestFirst(2)},
		{`\ is itself`, model.TaskFilter{URLPrefix: ptr(`https://a.example/x\`)}, newestFirst(3)},
		{"a path", model.TaskFilter{URLPrefix: ptr("https://a.example/x")}, newestFirst(0, 1, 2, 3)},
		{"a host, case and all", model.TaskFilter{URLPrefix: ptr("https://a.example/")}, newestFirst(0, 1, 2, 3, 5, 6)},
		{"a whole URL", model.TaskFilter{URLPrefix: ptr("https://b.example/")}, newestFirst(7)},
		{"longer than the index holds", model.TaskFilter{URLPrefix: ptr(long + "2")}, newestFirst(6)},
		{"as long as the index holds", model.TaskFilter{URLPrefix: ptr(long[:256])}, newestFirst(5, 6)},
		{"no match", model.TaskFilter{URLPrefix: ptr("https://c.example/")}, []uuid.UUID{}},
		{"idempotency key", model.TaskFilter{IdempotencyKey: ptr("key-" + urls[1])}, newestFirst(1)},
		{"idempotency key and url", model.TaskFilter{IdempotencyKey: ptr("key-" + urls[1]), URLPrefix: ptr("https://a.example/x_")},
			[]uuid.UUID{}},
		{"unknown idempotency key", model.TaskFilter{IdempotencyKey: ptr("key-nothing")}, []uuid.UUID{}},
		{"url and status", model.TaskFilter{URLPrefix: ptr("https://a.example/"), Status: ptr(model.StatusScheduled)},
			newestFirst(0, 1, 2, 3, 5, 6)},
		{"url and another status", model.TaskFilter{URLPrefix: ptr("https://a.example/"), Status: ptr(model.StatusDead)},
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
			for range len(urls) + 1 {
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

// explainCustom runs query under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) as
// an unnamed statement, the way ListTasks runs it, so that it is planned
// for args, and returns the top plan node.
func explainCustom(t *testing.T, pool *pgxpool.Pool, query string, args []any) map[string]any {
	t.Helper()
	var out []byte
	err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+query,
		append([]any{pgx.QueryExecModeCacheDescribe}, args...)...).Scan(&out)
	require.NoError(t, err)
	return topPlan(t, out)
}

// TestListTasksByURLReadsMatchesOnly backs migration 00013: a page of the
// tasks sent to a rare URL prefix reads those tasks through tasks_tenant_url,
// not every task of the tenant, and a page of a common prefix stops at the
// page's end; so does one of a rare status. 20,000 tasks of the tenant go
// to one host, a few to another.
func TestListTasksByURLReadsMatchesOnly(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	const busy = 20_000
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://busy.example/hooks/' || g, 'POST', now(), now(), 10000, 10, 1000, 3600000
		FROM generate_series(1, $2::int) AS g`, tenant.ID, busy)
	var rare []uuid.UUID
	for i := range 3 {
		task := insertTaskTo(t, db, tenant.ID, "https://rare.example/hooks/"+string(rune('a'+i)), "")
		rare = append(rare, task.ID)
	}
	exec(t, pool, `UPDATE tasks SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, rare[0])
	exec(t, pool, `ANALYZE tasks`)

	tests := []struct {
		name      string
		filter    model.TaskFilter
		wantRows  float64
		wantIndex string
	}{
		{"rare prefix", model.TaskFilter{URLPrefix: ptr("https://rare.example/")}, 3, "tasks_tenant_url"},
		{"no match", model.TaskFilter{URLPrefix: ptr("https://nowhere.example/")}, 0, "tasks_tenant_url"},
		{"common prefix", model.TaskFilter{URLPrefix: ptr("https://busy.example/")}, 51, ""},
		{"rare status", model.TaskFilter{Status: ptr(model.StatusDead)}, 1, "tasks_tenant_status_recent"},
		{"idempotency key", model.TaskFilter{IdempotencyKey: ptr("nothing")}, 0, "tasks_idempotency_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := tt.filter
			f.Limit = 51 // a page of 50 and one more, as the API asks
			plan := explainCustom(t, pool, store.QueryListTasks, store.ListTasksArgs(tenant.ID, f))
			var facts planFacts
			walkPlan(plan, &facts)
			require.Empty(t, facts.seqScans, "plan nodes: %v", facts.nodeTypes)
			if tt.wantIndex != "" {
				require.Contains(t, facts.indexNames, tt.wantIndex, "plan nodes: %v", facts.nodeTypes)
			}
			require.Equal(t, tt.wantRows, plan["Actual Rows"], "plan nodes: %v", facts.nodeTypes)
			blocks := sharedBlocks(plan)
			t.Logf("%s among %d tasks: %d shared buffers; plan %v %v", tt.name, busy, blocks, facts.nodeTypes, facts.indexNames)
			// A descent and the page's rows, nothing in proportion to the
			// tenant's tasks (which fill hundreds of pages).
			require.Less(t, blocks, 150)
		})
	}
}

func TestListTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	var tenants []*model.Tenant
	for range 5 {
		tenants = append(tenants, createTenant(t, db))
	}
	// The second has 3 tasks waiting (one of each waiting status) and 2
	// finished; the fourth 7 waiting.
	waiting := map[uuid.UUID]int{tenants[1].ID: 3, tenants[3].ID: 7}
	for _, status := range []string{"scheduled", "retrying", "dispatching", "delivered", "dead"} {
		task := insertTask(t, db, tenants[1].ID, time.Now().Add(time.Hour))
		exec(t, pool, `UPDATE tasks SET status = $2 WHERE id = $1`, task.ID, status)
	}
	for range 7 {
		insertTask(t, db, tenants[3].ID, time.Now().Add(time.Hour))
	}

	all, err := db.ListTenants(ctx, nil, 100, 1000)
	require.NoError(t, err)
	require.Len(t, all, len(tenants))
	for i, got := range all {
		require.Equal(t, tenants[i].ID, got.ID, "oldest first")
		require.Equal(t, tenants[i].Name, got.Name)
		require.Equal(t, waiting[got.ID], got.WaitingTasks, "tenant %d", i)
	}

	t.Run("pages", func(t *testing.T) {
		var seen []uuid.UUID
		var after *uuid.UUID
		for range len(tenants) + 1 {
			page, err := db.ListTenants(ctx, after, 2, 1000)
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			for _, s := range page {
				seen = append(seen, s.ID)
			}
			after = &page[len(page)-1].ID
		}
		want := make([]uuid.UUID, len(tenants))
		for i, tn := range tenants {
			want[i] = tn.ID
		}
		require.Equal(t, want, seen)
	})

	t.Run("counted up to the bound", func(t *testing.T) {
		got, err := db.ListTenants(ctx, &tenants[2].ID, 1, 4)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, tenants[3].ID, got[0].ID)
		require.Equal(t, 4, got[0].WaitingTasks)
	})
}

// TestListTenantsCountIsBounded backs the claim that listing tenants costs
// the same whatever their backlog: the waiting count of a tenant with 20,000
// tasks waiting reads as many index entries as the bound, and no tenant
// outside the page is counted. Twenty more tenants have 200 tasks each.
func TestListTenantsCountIsBounded(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	insert := func(tenantID uuid.UUID, n int) {
		exec(t, pool, `
			INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
				timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
			SELECT gen_random_uuid(), $1, 'scheduled', 'https://busy.example/', 'POST', now(), now(), 10000, 10, 1000, 3600000
			FROM generate_series(1, $2::int)`, tenantID, n)
	}
	insert(createTenant(t, db).ID, 20_000)
	for range 20 {
		insert(createTenant(t, db).ID, 200)
	}
	exec(t, pool, `VACUUM ANALYZE tasks`)
	exec(t, pool, `ANALYZE tenants`)

	out := explainGenericPlan(t, pool, store.QueryListTenants, []any{uuid.Nil, 3, 100})
	plan := topPlan(t, out)
	var facts planFacts
	walkPlan(plan, &facts)
	require.Equal(t, 3.0, plan["Actual Rows"])
	require.NotContains(t, facts.seqScans, "tasks", "plan nodes: %v", facts.nodeTypes)
	blocks := sharedBlocks(plan)
	t.Logf("a page of 3 tenants, one with 20,000 tasks waiting: %d shared buffers; plan %v", blocks, facts.nodeTypes)
	require.Less(t, blocks, 60)
}

func TestListNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)

	// Two live nodes sharing the partitions, and one whose heartbeat
	// lapsed: it is not listed, and the partitions it held are not counted
	// as anyone's.
	a, b, dead := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err := db.Heartbeat(ctx, a, "host-a/1", time.Minute)
	require.NoError(t, err)
	_, err = db.Heartbeat(ctx, b, "host-b/2", time.Minute)
	require.NoError(t, err)
	ma, err := db.Heartbeat(ctx, a, "host-a/1", time.Minute) // gives up b's share
	require.NoError(t, err)
	mb, err := db.Heartbeat(ctx, b, "host-b/2", time.Minute) // takes it
	require.NoError(t, err)
	require.Len(t, mb.Owned, model.Partitions/2)
	registerNode(t, pool, dead, time.Minute)
	exec(t, pool, `UPDATE partitions SET owner = $1, lease_expires_at = now() - interval '1 second' WHERE id IN (
		SELECT id FROM partitions WHERE owner = $2 ORDER BY id DESC LIMIT 5)`, dead, a)
	exec(t, pool, `UPDATE nodes SET expires_at = now() - interval '1 second' WHERE id = $1`, dead)

	nodes, err := db.ListNodes(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	require.Equal(t, []uuid.UUID{a, b}, []uuid.UUID{nodes[0].ID, nodes[1].ID}, "oldest first")
	require.Equal(t, "host-a/1", nodes[0].Name)
	require.Equal(t, ma.Owned[:len(ma.Owned)-5], nodes[0].Partitions, "a's live leases, ascending")
	require.Equal(t, mb.Owned, nodes[1].Partitions)
	require.True(t, slices.IsSorted(nodes[1].Partitions))
	require.Equal(t, model.Partitions-5, len(nodes[0].Partitions)+len(nodes[1].Partitions))
	for _, n := range nodes {
		require.True(t, n.ExpiresAt.After(n.HeartbeatAt))
		require.False(t, n.StartedAt.After(n.HeartbeatAt))
	}

	t.Run("none", func(t *testing.T) {
		db, _ := openDB(t)
		nodes, err := db.ListNodes(ctx)
		require.NoError(t, err)
		require.Empty(t, nodes)
	})
}

// TestListTasksWithBodies: a list reads bodies only when asked, and then the
// longest run of tasks from the page's first whose bodies fit the budget,
// the first always; cut says the budget ended the page early. Without
// bodies the list reads none.
func TestListTasksWithBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant := createTenant(t, db)

	// Newest first: 300, 0, 300, 1000, 300 bytes.
	sizes := []int{300, 1000, 300, 0, 300}
	var tasks []*model.Task
	for _, n := range sizes {
		task := newTask(tenant.ID, time.Now().Add(time.Hour))
		task.Body = []byte(strings.Repeat("b", n))
		_, created, err := db.InsertTask(ctx, task, false)
		require.NoError(t, err)
		require.True(t, created)
		tasks = append([]*model.Task{task}, tasks...)
	}

	plain, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, taskIDs(tasks), taskIDs(plain))
	for _, task := range plain {
		require.Nil(t, task.Body, "no body unless asked")
	}

	for _, tt := range []struct {
		name   string
		limit  int
		budget int64
		want   int
		cut    bool
	}{
		{"all fit", 10, 1900, 5, false},
		{"all fit, limit first", 3, 1900, 3, false},
		{"cut before the one that passes", 10, 1599, 3, true},
		{"cut before the last", 10, 1899, 4, true},
		{"the empty body fits at the bound", 10, 600, 3, true},
		{"the first alone passes", 10, 100, 1, true},
		{"a limit of one never cut", 1, 100, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cut, err := db.ListTasksWithBodies(ctx, tenant.ID, model.TaskFilter{Limit: tt.limit}, tt.budget)
			require.NoError(t, err)
			require.Equal(t, tt.cut, cut)
			require.Equal(t, taskIDs(tasks[:tt.want]), taskIDs(got))
			for i, task := range got {
				require.Equal(t, string(tasks[i].Body), string(task.Body))
			}
		})
	}

	// The filters apply as ListTasks's do: another tenant's are not seen.
	other := createTenant(t, db)
	got, cut, err := db.ListTasksWithBodies(ctx, other.ID, model.TaskFilter{Limit: 10}, 1<<20)
	require.NoError(t, err)
	require.Empty(t, got)
	require.False(t, cut)
}
