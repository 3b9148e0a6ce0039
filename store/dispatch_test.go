package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// bulkInsert stores n scheduled tasks of the tenant in one statement; atSQL is
// an SQL expression of g (1..n) and $3 giving each next_attempt_at.
func bulkInsert(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID, n int, atSQL string, at time.Time) []store.DueTask {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/bulk', 'POST', `+atSQL+`, `+atSQL+`,
			10000, 10, 1000, 3600000
		FROM generate_series(1, $2::int) AS g
		RETURNING id, next_attempt_at`, tenantID, n, at)
	require.NoError(t, err)
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DueTask, error) {
		var d store.DueTask
		err := r.Scan(&d.ID, &d.At)
		return d, err
	})
	require.NoError(t, err)
	require.Len(t, due, n)
	return due
}

func TestListDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t) // ListDue spans tenants: this database is the test's alone
	tenant, other := createTenant(t, db), createTenant(t, db)

	base := µs(time.Now().Add(24 * time.Hour))
	until := base.Add(10 * time.Minute)
	at := func(task *model.Task) store.DueTask { return store.DueTask{ID: task.ID, At: task.RunAt} }
	setStatus := func(task *model.Task, status string) {
		// next_attempt_at stays set: only the status may keep these out.
		exec(t, pool, `UPDATE tasks SET status = $2 WHERE id = $1`, task.ID, status)
	}

	// Two tasks share the cursor's instant; the cursor sits on the lower id.
	atBase1 := insertTask(t, db, tenant.ID, base)
	atBase2 := insertTask(t, db, other.ID, base)
	if slices.Compare(atBase1.ID[:], atBase2.ID[:]) > 0 {
		atBase1, atBase2 = atBase2, atBase1
	}
	beforeCursor := insertTask(t, db, tenant.ID, base.Add(-time.Second))
	scheduled := insertTask(t, db, tenant.ID, base.Add(time.Minute))
	retrying := insertTask(t, db, other.ID, base.Add(2*time.Minute))
	setStatus(retrying, "retrying")
	atUntil := insertTask(t, db, tenant.ID, until)
	afterUntil := insertTask(t, db, tenant.ID, until.Add(time.Microsecond))
	for i, status := range []string{"dispatching", "delivered", "dead"} {
		setStatus(insertTask(t, db, tenant.ID, base.Add(time.Duration(3+i)*time.Minute)), status)
	}
	canceled := insertTask(t, db, tenant.ID, base.Add(6*time.Minute))
	_, err := db.CancelTask(ctx, tenant.ID, canceled.ID)
	require.NoError(t, err)

	cursor := store.DueCursor{At: base, ID: atBase1.ID}
	tests := []struct {
		name  string
		after store.DueCursor
		until time.Time
		limit int
		want  []store.DueTask
	}{
		{"after the cursor up to until inclusive", cursor, until, 100,
			[]store.DueTask{at(atBase2), at(scheduled), at(retrying), at(atUntil)}},
		{"limit", cursor, until, 2,
			[]store.DueTask{at(atBase2), at(scheduled)}},
		{"zero cursor reads from the start", store.DueCursor{}, until, 100,
			[]store.DueTask{at(beforeCursor), at(atBase1), at(atBase2), at(scheduled), at(retrying), at(atUntil)}},
		{"until one microsecond later", cursor, until.Add(time.Microsecond), 100,
			[]store.DueTask{at(atBase2), at(scheduled), at(retrying), at(atUntil), at(afterUntil)}},
		{"until before the first", store.DueCursor{}, base.Add(-time.Hour), 100, []store.DueTask{}},
		{"cursor on the last id of an instant", store.DueCursor{At: base, ID: atBase2.ID}, base.Add(time.Minute), 100,
			[]store.DueTask{at(scheduled)}},
		{"cursor at uuid.Max of an instant", store.DueCursor{At: base.Add(time.Minute), ID: uuid.Max}, until, 100,
			[]store.DueTask{at(retrying), at(atUntil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := db.ListDue(ctx, allPartitions(), tt.after, tt.until, tt.limit)
			require.NoError(t, err)
			requireSameDue(t, tt.want, got)
		})
	}
}

func TestListDuePagingOverSharedInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	instant := µs(time.Now().Add(time.Hour))

	// A thousand tasks at one instant (random ids, so id order is not
	// insertion order), framed by tasks a few microseconds either side.
	var want []store.DueTask
	want = append(want, bulkInsert(t, pool, tenant.ID, 1000, `$3::timestamptz`, instant)...)
	want = append(want, bulkInsert(t, pool, tenant.ID, 50, `$3::timestamptz - g * interval '1 microsecond'`, instant)...)
	want = append(want, bulkInsert(t, pool, tenant.ID, 50, `$3::timestamptz + (g % 7) * interval '1 microsecond'`, instant)...)
	// Waiting no more: none of these may show up.
	notWaiting := bulkInsert(t, pool, tenant.ID, 30, `$3::timestamptz`, instant)
	exec(t, pool, `UPDATE tasks SET status = 'canceled' WHERE id = ANY($1)`, dueIDs(notWaiting))
	sortDue(want)

	until := instant.Add(time.Second)
	for _, pageSize := range []int{1, 37, 1000, 5000} {
		t.Run(fmt.Sprintf("page size %d", pageSize), func(t *testing.T) {
			t.Parallel()
			got := []store.DueTask{}
			seen := make(map[uuid.UUID]bool, len(want))
			cursor := store.DueCursor{}
			for pages := 0; ; pages++ {
				require.LessOrEqual(t, pages, len(want)+1, "paging does not end")
				page, err := db.ListDue(ctx, allPartitions(), cursor, until, pageSize)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page), pageSize)
				for _, d := range page {
					require.False(t, seen[d.ID], "task %s on two pages", d.ID)
					seen[d.ID] = true
				}
				got = append(got, page...)
				if len(page) < pageSize {
					break
				}
				last := page[len(page)-1]
				cursor = store.DueCursor{At: last.At, ID: last.ID}
			}
			requireSameDue(t, want, got)
		})
	}
}

// TestPartitionOf: the Go side and the generated column agree on every
// task's partition, and random ids spread over all of them.
func TestPartitionOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	bulkInsert(t, pool, tenant.ID, 5000, `$3::timestamptz`, time.Now())
	insertTask(t, db, tenant.ID, time.Now()) // a UUIDv7 from the API's path

	rows, err := pool.Query(ctx, `SELECT id, partition FROM tasks`)
	require.NoError(t, err)
	type row struct {
		ID        uuid.UUID
		Partition int16
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Len(t, all, 5001)
	seen := map[int16]bool{}
	for _, r := range all {
		require.Equal(t, r.Partition, model.PartitionOf(r.ID), "task %s", r.ID)
		seen[r.Partition] = true
	}
	require.Len(t, seen, model.Partitions)
	for _, id := range []uuid.UUID{uuid.Nil, uuid.Max, uuid.MustParse("0192d7a0-0000-7000-8000-0000000000fe")} {
		require.Equal(t, int16(id[15]), model.PartitionOf(id))
	}
}

// TestListDuePartitions: ListDue returns the waiting tasks of the partitions
// asked for, and only those.
func TestListDuePartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	at := µs(time.Now().Add(time.Hour))
	all := bulkInsert(t, pool, tenant.ID, 2000, `$3::timestamptz + (g % 50) * interval '1 millisecond'`, at)
	for _, p := range []int16{0, 7, 255} {
		task := insertTaskIn(t, db, tenant.ID, at, p)
		all = append(all, store.DueTask{ID: task.ID, At: task.RunAt})
	}
	// Claimed as keyed tasks are (status dispatching): never listed, whatever
	// the partition. Claimed as the others are (a claim token on a waiting
	// row): listed, for the claim to pass over.
	exec(t, pool, `UPDATE tasks SET status = 'dispatching', claim_token = gen_random_uuid() WHERE id = ANY($1)`,
		dueIDs(all[:50]))
	exec(t, pool, `UPDATE tasks SET claim_token = gen_random_uuid() WHERE id = ANY($1)`, dueIDs(all[50:100]))
	waiting := all[50:]
	sortDue(waiting)

	var evens []int16
	for p := int16(0); p < model.Partitions; p += 2 {
		evens = append(evens, p)
	}
	tests := []struct {
		name       string
		partitions []int16
	}{
		{"nil", nil},
		{"none", []int16{}},
		{"first", []int16{0}},
		{"last", []int16{255}},
		{"three", []int16{255, 0, 7}},
		{"repeated", []int16{7, 7, 7}},
		{"even", evens},
		{"all", allPartitions()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := []store.DueTask{}
			for _, d := range waiting {
				if slices.Contains(tt.partitions, model.PartitionOf(d.ID)) {
					want = append(want, d)
				}
			}
			if len(tt.partitions) > 0 {
				require.NotEmpty(t, want)
			}
			got, err := db.ListDue(ctx, tt.partitions, store.DueCursor{}, at.Add(time.Minute), 10_000)
			require.NoError(t, err)
			requireSameDue(t, want, got)

			// Paging through a subset meets the same tasks.
			paged := []store.DueTask{}
			cursor := store.DueCursor{}
			for range len(want) + 1 {
				page, err := db.ListDue(ctx, tt.partitions, cursor, at.Add(time.Minute), 64)
				require.NoError(t, err)
				paged = append(paged, page...)
				if len(page) < 64 {
					break
				}
				cursor = store.DueCursor{At: page[len(page)-1].At, ID: page[len(page)-1].ID}
			}
			requireSameDue(t, want, paged)
		})
	}
}

func dueIDs(due []store.DueTask) []uuid.UUID {
	ids := make([]uuid.UUID, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	return ids
}

// planFacts walks an EXPLAIN (FORMAT JSON) plan.
type planFacts struct {
	nodeTypes  []string
	indexNames []string
	seqScans   []string         // relations read by a Seq Scan
	tasksDue   []map[string]any // the nodes that read the tasks_due index
}

func walkPlan(node map[string]any, f *planFacts) {
	nodeType, _ := node["Node Type"].(string)
	f.nodeTypes = append(f.nodeTypes, nodeType)
	if name, ok := node["Index Name"].(string); ok {
		f.indexNames = append(f.indexNames, name)
		if name == "tasks_due" {
			f.tasksDue = append(f.tasksDue, node)
		}
	}
	if nodeType == "Seq Scan" {
		rel, _ := node["Relation Name"].(string)
		f.seqScans = append(f.seqScans, rel)
	}
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		walkPlan(c.(map[string]any), f)
	}
}

// explainListDue runs EXPLAIN with options on the exact ListDue SQL and
// parameters, and returns the top plan node.
func explainListDue(t *testing.T, pool *pgxpool.Pool, options string, partitions []int16, after store.DueCursor, until time.Time, limit int) map[string]any {
	t.Helper()
	var out []byte
	err := pool.QueryRow(context.Background(), "EXPLAIN ("+options+") "+store.QueryListDue,
		after.At, after.ID, until, limit, partitions).Scan(&out)
	require.NoError(t, err)
	return topPlan(t, out)
}

// topPlan is the top plan node of EXPLAIN (FORMAT JSON) output.
func topPlan(t testing.TB, out []byte) map[string]any {
	t.Helper()
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(out, &doc), "%s", out)
	require.Len(t, doc, 1)
	plan, ok := doc[0]["Plan"].(map[string]any)
	require.True(t, ok, "%s", out)
	return plan
}

func sharedBlocks(plan map[string]any) int {
	hit, _ := plan["Shared Hit Blocks"].(float64)
	read, _ := plan["Shared Read Blocks"].(float64)
	return int(hit + read)
}

// btreeHeight is how many pages a descent of the btree index reads, root to
// leaf, from its metapage.
func btreeHeight(t *testing.T, pool *pgxpool.Pool, index string) int {
	t.Helper()
	exec(t, pool, `CREATE EXTENSION IF NOT EXISTS pageinspect`)
	var level int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT level FROM bt_metap($1)`, index).Scan(&level))
	return level + 1
}

// TestListDueIndexIgnoresFarFuture backs the claim that the due-window query
// costs the same with millions of tasks waiting far ahead as with ten: it
// walks the tasks_due partial index, one range per partition asked for, and
// touches a few pages per partition, however many tasks wait beyond the
// window.
func TestListDueIndexIgnoresFarFuture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	// Five tasks due within the minute, in partitions 1, 2, 4, 5 and 7; the
	// 85 partitions p % 3 == 1 hold three of them.
	now := dbNow(t, pool)
	var soon []store.DueTask
	for i, p := range []int16{1, 2, 4, 5, 7} {
		task := insertTaskIn(t, db, tenant.ID, now.Add(time.Duration(i+1)*time.Second), p)
		soon = append(soon, store.DueTask{ID: task.ID, At: task.RunAt})
	}
	var third []int16
	for p := int16(1); p < model.Partitions; p += 3 {
		third = append(third, p)
	}
	require.Len(t, third, 85)
	cases := []struct {
		name       string
		partitions []int16
		want       []store.DueTask
	}{
		{"all 256 partitions", allPartitions(), soon},
		{"85 partitions", third, []store.DueTask{soon[0], soon[2], soon[4]}},
	}
	after, until, limit := store.DueCursor{}, now.Add(time.Minute), 1000

	// With five rows the planner rightly reads the table's one page and
	// ignores the index: the costs that matter are measured below.
	exec(t, pool, `ANALYZE tasks`)
	for _, c := range cases {
		got, err := db.ListDue(ctx, c.partitions, after, until, limit)
		require.NoError(t, err)
		requireSameDue(t, c.want, got)
	}

	const farAhead = 200_000
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/later', 'POST', at, at, 10000, 10, 1000, 3600000
		FROM (SELECT now() + interval '30 days' + g * interval '1 second' AS at FROM generate_series(1, $2::int) AS g) s`,
		tenant.ID, farAhead)
	// Finished tasks with a due time left over (as if a bug had left one):
	// the partial index must not hold them at all.
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'delivered', 'https://receiver.example/done', 'POST', at, at, 10000, 10, 1000, 3600000
		FROM (SELECT now() - g * interval '1 millisecond' AS at FROM generate_series(1, 20000) AS g) s`, tenant.ID)
	exec(t, pool, `ANALYZE tasks`)
	require.Equal(t, farAhead+20_000+5, countRows(t, pool, `SELECT count(*) FROM tasks`))
	// Every partition waits on hundreds of far tasks.
	require.Equal(t, model.Partitions, countRows(t, pool,
		`SELECT count(DISTINCT partition) FROM tasks WHERE next_attempt_at > now() + interval '29 days'`))
	height := btreeHeight(t, pool, "tasks_due")
	require.LessOrEqual(t, height, 3, "200k entries fit a three-level btree")
	var indexPages, heapPages int
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size('tasks_due') / 8192, pg_relation_size('tasks') / 8192`).
		Scan(&indexPages, &heapPages))

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := db.ListDue(ctx, c.partitions, after, until, limit)
			require.NoError(t, err)
			requireSameDue(t, c.want, got)

			var facts planFacts
			walkPlan(explainListDue(t, pool, "FORMAT JSON", c.partitions, after, until, limit), &facts)
			require.Contains(t, facts.indexNames, "tasks_due", "plan nodes: %v", facts.nodeTypes)
			require.Empty(t, facts.seqScans, "plan nodes: %v", facts.nodeTypes)

			many := explainListDue(t, pool, "ANALYZE, BUFFERS, FORMAT JSON", c.partitions, after, until, limit)
			var analyzed planFacts
			walkPlan(many, &analyzed)
			require.Contains(t, analyzed.indexNames, "tasks_due")
			require.Empty(t, analyzed.seqScans)
			require.Equal(t, float64(len(c.want)), many["Actual Rows"])
			// The index hands over only the waiting tasks in the window: the
			// range of each partition ends before its far-future tasks.
			require.Len(t, analyzed.tasksDue, 1, "plan nodes: %v", analyzed.nodeTypes)
			require.Equal(t, float64(len(c.want)), analyzed.tasksDue[0]["Actual Rows"])
			removed, _ := analyzed.tasksDue[0]["Rows Removed by Filter"].(float64)
			require.Zero(t, removed)

			blocks := sharedBlocks(many)
			t.Logf("%d partitions: ListDue touched %d shared buffers with %d tasks far ahead "+
				"(tasks_due: height %d, %d pages; table: %d pages); plan %v",
				len(c.partitions), blocks, farAhead, height, indexPages, heapPages, analyzed.nodeTypes)
			// One root-to-leaf descent per partition, and at most a heap page
			// per task listed. The backlog only adds btree levels, which grow
			// with its logarithm: a page per partition each.
			require.LessOrEqual(t, blocks, len(c.partitions)*height+len(c.want)+5)
			require.Less(t, blocks, indexPages/2, "far less than the index")
		})
	}
}

func TestClaimTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	now := dbNow(t, pool)

	due := insertTask(t, db, tenant.ID, now.Add(-time.Minute))
	otherTenants := insertTask(t, db, other.ID, now.Add(-time.Minute))
	retrying := insertTask(t, db, tenant.ID, now.Add(-2*time.Minute))
	exec(t, pool, `UPDATE tasks SET status = 'retrying', attempts = 2 WHERE id = $1`, retrying.ID)
	atNow := insertTask(t, db, tenant.ID, now)
	notYet := insertTask(t, db, tenant.ID, now.Add(time.Microsecond))
	canceled := insertTask(t, db, tenant.ID, now.Add(-time.Minute))
	_, err := db.CancelTask(ctx, tenant.ID, canceled.ID)
	require.NoError(t, err)
	delivered := insertTask(t, db, tenant.ID, now.Add(-time.Minute))
	exec(t, pool, `UPDATE tasks SET status = 'delivered' WHERE id = $1`, delivered.ID) // next_attempt_at left set
	alreadyClaimed := insertTask(t, db, tenant.ID, now.Add(-time.Minute))
	firstClaim := claimOne(t, db, pool, alreadyClaimed.ID)

	ids := []uuid.UUID{due.ID, otherTenants.ID, retrying.ID, atNow.ID, notYet.ID, canceled.ID, delivered.ID, alreadyClaimed.ID, uuid.New()}
	notClaimed := map[uuid.UUID]taskRow{}
	for _, id := range ids[4:8] {
		notClaimed[id] = readTaskRow(t, pool, id)
	}

	before := map[uuid.UUID]taskRow{}
	for _, id := range ids[:4] {
		before[id] = readTaskRow(t, pool, id)
	}
	node := uuid.New()
	claimStart := dbNow(t, pool)
	claims, err := db.ClaimTasks(ctx, node, allPartitions(), ids, now, 30*time.Second)
	require.NoError(t, err)
	claimEnd := dbNow(t, pool)
	byID := map[uuid.UUID]*model.ClaimedTask{}
	for _, c := range claims {
		byID[c.ID] = c
	}
	require.ElementsMatch(t, []uuid.UUID{due.ID, otherTenants.ID, retrying.ID, atNow.ID}, claimIDs(claims))

	token := claims[0].ClaimToken
	require.NotEqual(t, uuid.Nil, token)
	require.NotEqual(t, firstClaim.ClaimToken, token)
	wantAttempt := map[uuid.UUID]int{due.ID: 1, otherTenants.ID: 1, retrying.ID: 3, atNow.ID: 1}
	wantSecret := map[uuid.UUID][]model.SigningSecret{due.ID: tenant.SigningSecrets, otherTenants.ID: other.SigningSecrets,
		retrying.ID: tenant.SigningSecrets, atNow.ID: tenant.SigningSecrets}
	for id, c := range byID {
		require.Equal(t, token, c.ClaimToken, "one token per claim call")
		require.Equal(t, model.StatusDispatching, c.Status)
		require.Equal(t, wantAttempt[id], c.Attempt)
		require.Equal(t, wantAttempt[id], c.Attempts)
		require.Equal(t, secretIDs(wantSecret[id]), secretIDs(c.SigningSecrets))
		require.Equal(t, wantSecret[id][0].Value, c.SigningSecrets[0].Value)
		require.Equal(t, "https://receiver.example/hooks/order", c.URL)
		require.Equal(t, map[string]string{"Content-Type": "application/json", "X-Order": "42"}, c.Headers)
		require.Equal(t, []byte(`{"order": 42}`), c.Body)
		require.Equal(t, 10*time.Second, c.Timeout)

		row := readTaskRow(t, pool, id)
		require.Equal(t, "dispatching", row.Status)
		require.Equal(t, wantAttempt[id], row.Attempts)
		require.Equal(t, &token, row.ClaimToken)
		require.Equal(t, &node, row.ClaimedBy)
		require.NotNil(t, row.LeaseExpiresAt)
		// lease = the statement's now() + timeout (10s) + margin (30s).
		require.WithinRange(t, *row.LeaseExpiresAt, claimStart.Add(40*time.Second), claimEnd.Add(40*time.Second))
		// An unkeyed claim changes no indexed column (migration 00026).
		require.Equal(t, before[id].UpdatedAt, row.UpdatedAt, "updated_at is left as it was")
		require.Equal(t, before[id].NextAttemptAt, row.NextAttemptAt, "next_attempt_at is left as it was")
		var stored string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&stored))
		require.Contains(t, []string{"scheduled", "retrying"}, stored, "an unkeyed claim keeps its stored status")
	}
	require.Equal(t, otherTenants.ID, byID[otherTenants.ID].ID)
	require.Equal(t, other.ID, byID[otherTenants.ID].TenantID)

	for id, before := range notClaimed {
		require.Equal(t, before, readTaskRow(t, pool, id), "task %s must be left alone", id)
	}
	require.Equal(t, &firstClaim.ClaimToken, readTaskRow(t, pool, alreadyClaimed.ID).ClaimToken)
	require.Equal(t, &testNode, readTaskRow(t, pool, alreadyClaimed.ID).ClaimedBy)

	// Claimed once is claimed: a second claim of the same ids gets nothing.
	again, err := db.ClaimTasks(ctx, uuid.New(), allPartitions(), ids, now.Add(time.Hour), 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{notYet.ID}, claimIDs(again), "only the task that has fallen due since")
}

// TestClaimTasksPartitions: a node claims only tasks of the partitions it
// names, and the claim records which node holds it.
func TestClaimTasksPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	in3 := insertTaskIn(t, db, tenant.ID, now.Add(-time.Minute), 3)
	in4 := insertTaskIn(t, db, tenant.ID, now.Add(-time.Minute), 4)
	in200 := insertTaskIn(t, db, tenant.ID, now.Add(-time.Minute), 200)
	ids := []uuid.UUID{in3.ID, in4.ID, in200.ID}
	before := map[uuid.UUID]taskRow{}
	for _, id := range ids {
		before[id] = readTaskRow(t, pool, id)
	}

	nodeA, nodeB := uuid.New(), uuid.New()
	steps := []struct {
		name       string
		node       uuid.UUID
		partitions []int16
		want       []uuid.UUID
	}{
		{"no partitions", nodeA, []int16{}, nil},
		{"nil partitions", nodeA, nil, nil},
		{"other partitions", nodeA, []int16{0, 1, 2, 5, 199, 201, 255}, nil},
		{"one partition", nodeA, []int16{3}, []uuid.UUID{in3.ID}},
		{"a claimed task is not claimed again", nodeB, []int16{3, 4}, []uuid.UUID{in4.ID}},
		{"the rest", nodeA, allPartitions(), []uuid.UUID{in200.ID}},
	}
	claimedBy := map[uuid.UUID]uuid.UUID{}
	for _, step := range steps {
		// Sequential: each step starts from where the last left off.
		t.Run(step.name, func(t *testing.T) {
			claims, err := db.ClaimTasks(ctx, step.node, step.partitions, ids, now, 30*time.Second)
			require.NoError(t, err)
			require.ElementsMatch(t, step.want, claimIDs(claims))
			for _, id := range step.want {
				claimedBy[id] = step.node
			}
			for _, id := range ids {
				row := readTaskRow(t, pool, id)
				node, claimed := claimedBy[id]
				if !claimed {
					require.Equal(t, before[id], row, "task %s in partition %d must be left alone", id, model.PartitionOf(id))
					continue
				}
				require.Equal(t, "dispatching", row.Status)
				require.Equal(t, &node, row.ClaimedBy)
				require.Equal(t, 1, row.Attempts)
			}
		})
	}
}

func TestClaimTasksConcurrentlyClaimsEachOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	const n = 500
	reversed := func(ids []uuid.UUID) []uuid.UUID { r := slices.Clone(ids); slices.Reverse(r); return r }
	shuffled := func(ids []uuid.UUID) []uuid.UUID {
		r := slices.Clone(ids)
		rand.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
		return r
	}
	// Two nodes whose wheels fire the same tasks, in the same order or not
	// (then they reach the rows in different orders), all at once or in
	// batches the way a dispatcher claims.
	tests := []struct {
		name  string
		order func([]uuid.UUID) []uuid.UUID
		batch int
	}{
		{"same order, one call", slices.Clone[[]uuid.UUID], n},
		{"reversed, one call", reversed, n},
		{"shuffled, one call", shuffled, n},
		{"same order, batches of 25", slices.Clone[[]uuid.UUID], 25},
		{"reversed, batches of 25", reversed, 25},
		{"shuffled, batches of 25", shuffled, 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ids := dueIDs(bulkInsert(t, pool, tenant.ID, n, `$3::timestamptz - g * interval '1 millisecond'`, now))
			orders := [][]uuid.UUID{ids, tt.order(ids)}
			nodes := []uuid.UUID{uuid.New(), uuid.New()}

			claimed := make([][]*model.ClaimedTask, len(orders))
			errs := make([]error, len(orders))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, order := range orders {
				wg.Go(func() {
					<-start
					for batch := range slices.Chunk(order, tt.batch) {
						claims, err := db.ClaimTasks(ctx, nodes[i], allPartitions(), batch, now, 30*time.Second)
						if err != nil {
							errs[i] = err
							return
						}
						claimed[i] = append(claimed[i], claims...)
					}
				})
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}

			owner := map[uuid.UUID]int{}
			for i, claims := range claimed {
				for _, c := range claims {
					prev, dup := owner[c.ID]
					require.False(t, dup, "task %s claimed by %d and %d", c.ID, prev, i)
					owner[c.ID] = i
					require.Equal(t, 1, c.Attempt)
				}
			}
			require.Len(t, owner, n, "every task claimed by someone")
			require.Equal(t, n, countRows(t, pool,
				`SELECT count(*) FROM tasks WHERE id = ANY($1) AND claim_token IS NOT NULL AND attempts = 1`, ids))
			for i, claims := range claimed {
				require.Equal(t, len(claims), countRows(t, pool,
					`SELECT count(*) FROM tasks WHERE id = ANY($1) AND claimed_by = $2`, ids, nodes[i]),
					"claimed_by names the node whose claim won")
			}
			t.Logf("claims split %d / %d", len(claimed[0]), len(claimed[1]))
		})
	}
}

// A claim that meets a row another transaction is changing waits for it and
// then judges the row as that transaction left it.
func TestClaimTasksWaitsForConcurrentChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	tests := []struct {
		name        string
		commit      bool
		wantClaimed bool
	}{
		{"cancel commits: not claimed", true, false},
		{"cancel rolls back: claimed", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			contested := insertDueTask(t, db, pool, tenant.ID)
			free := insertDueTask(t, db, pool, tenant.ID)

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			var pid int
			require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			_, err = tx.Exec(ctx, `UPDATE tasks SET status = 'canceled', next_attempt_at = NULL WHERE id = $1`, contested.ID)
			require.NoError(t, err)

			type result struct {
				claims []*model.ClaimedTask
				err    error
			}
			done := make(chan result, 1)
			now := dbNow(t, pool)
			go func() {
				claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{free.ID, contested.ID}, now, 30*time.Second)
				done <- result{claims, err}
			}()

			// Wait until the claim is blocked behind the open transaction.
			deadline := time.After(10 * time.Second)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for countRows(t, pool, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND $1::int = ANY(pg_blocking_pids(pid))`, pid) == 0 {
				select {
				case r := <-done:
					require.FailNow(t, "the claim did not wait for the open transaction", "%v %v", claimIDs(r.claims), r.err)
				case <-deadline:
					require.FailNow(t, "the claim never blocked")
				case <-tick.C:
				}
			}
			if tt.commit {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}

			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the claim stayed blocked")
			}
			require.NoError(t, r.err)
			want := []uuid.UUID{free.ID}
			wantStatus := "canceled"
			if tt.wantClaimed {
				want = append(want, contested.ID)
				wantStatus = "dispatching"
			}
			require.ElementsMatch(t, want, claimIDs(r.claims))
			require.Equal(t, wantStatus, readTaskRow(t, pool, contested.ID).Status)
		})
	}
}

// recordFor is the result of the claimed attempt with the given outcome.
func recordFor(c *model.ClaimedTask, outcome string, code *int, errText *string, status model.TaskStatus, next *time.Time) store.AttemptResult {
	return store.AttemptResult{
		Attempt: model.Attempt{
			TaskID: c.ID, Attempt: c.Attempt, StartedAt: µs(time.Now().Add(-time.Second)), Duration: 250 * time.Millisecond,
			StatusCode: code, Error: errText, Outcome: outcome, ResponseBody: ptr("response of " + outcome),
		},
		ClaimToken:    c.ClaimToken,
		Status:        status,
		NextAttemptAt: next,
	}
}

func TestRecordAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	retryAt := µs(time.Now().Add(time.Hour))

	tests := []struct {
		name       string
		outcome    string
		code       *int
		errText    *string
		status     model.TaskStatus
		next       *time.Time
		wantStatus model.TaskStatus
	}{
		{"success", "success", ptr(200), nil, model.StatusDelivered, nil, model.StatusDelivered},
		{"retry on 503", "retry", ptr(503), nil, model.StatusRetrying, &retryAt, model.StatusRetrying},
		{"retry on network error", "retry", nil, ptr("dial tcp: connection refused"), model.StatusRetrying, &retryAt, model.StatusRetrying},
		{"final failure", "fail", ptr(404), nil, model.StatusDead, nil, model.StatusDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
			r := recordFor(c, tt.outcome, tt.code, tt.errText, tt.status, tt.next)
			require.NoError(t, db.RecordAttempt(ctx, r))

			got, err := db.GetTask(ctx, tenant.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, tt.wantStatus, got.Status)
			require.Equal(t, 1, got.Attempts)
			require.Equal(t, tt.code, got.LastStatusCode)
			require.Equal(t, tt.errText, got.LastError)
			if tt.next == nil {
				require.Nil(t, got.NextAttemptAt)
			} else {
				require.NotNil(t, got.NextAttemptAt)
				require.Equal(t, tt.next.UnixMicro(), got.NextAttemptAt.UnixMicro())
			}
			row := readTaskRow(t, pool, c.ID)
			require.Nil(t, row.ClaimToken)
			require.Nil(t, row.LeaseExpiresAt)

			attempts, err := db.ListAttempts(ctx, tenant.ID, c.ID)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			a := attempts[0]
			require.Equal(t, c.ID, a.TaskID)
			require.Equal(t, 1, a.Attempt)
			require.Equal(t, r.StartedAt.UnixMicro(), a.StartedAt.UnixMicro())
			require.Equal(t, 250*time.Millisecond, a.Duration)
			require.Equal(t, tt.code, a.StatusCode)
			require.Equal(t, tt.errText, a.Error)
			require.Equal(t, tt.outcome, a.Outcome)
			require.Equal(t, ptr("response of "+tt.outcome), a.ResponseBody)

			// Recording the same attempt again is refused and stores nothing.
			require.ErrorIs(t, db.RecordAttempt(ctx, r), store.ErrClaimLost)
			require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, c.ID))
		})
	}

	refused := []struct {
		name   string
		modify func(r *store.AttemptResult)
	}{
		{"wrong claim token", func(r *store.AttemptResult) { r.ClaimToken = uuid.New() }},
		{"wrong attempt number", func(r *store.AttemptResult) { r.Attempt.Attempt = 2 }},
		{"unknown task", func(r *store.AttemptResult) { r.TaskID = uuid.New() }},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
			before := readTaskRow(t, pool, c.ID)
			r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
			tt.modify(&r)

			err := db.RecordAttempt(ctx, r)
			require.ErrorIs(t, err, store.ErrClaimLost)
			require.Equal(t, before, readTaskRow(t, pool, c.ID))
			require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, c.ID))
		})
	}

	t.Run("a sender whose lease was recovered cannot record", func(t *testing.T) {
		t.Parallel()
		task := insertDueTask(t, db, pool, tenant.ID)
		stale := claimOne(t, db, pool, task.ID)
		exec(t, pool, `UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, task.ID)
		// Other subtests' claims that share the partition are held by the
		// live testNode under live leases: only this one is recovered.
		recovered, err := db.RecoverClaims(ctx, []int16{model.PartitionOf(task.ID)}, 100)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{task.ID}, recoveredIDs(recovered))
		fresh := claimOne(t, db, pool, task.ID)
		require.Equal(t, stale.Attempt, fresh.Attempt, "the re-send keeps the attempt number")
		require.NotEqual(t, stale.ClaimToken, fresh.ClaimToken)

		require.ErrorIs(t, db.RecordAttempt(ctx, recordFor(stale, "success", ptr(200), nil, model.StatusDelivered, nil)), store.ErrClaimLost)
		require.Equal(t, "dispatching", readTaskRow(t, pool, task.ID).Status)
		require.NoError(t, db.RecordAttempt(ctx, recordFor(fresh, "fail", ptr(410), nil, model.StatusDead, nil)))

		attempts, err := db.ListAttempts(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Equal(t, ptr(410), attempts[0].StatusCode)
		got, err := db.GetTask(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusDead, got.Status)
	})

	t.Run("one row per task and attempt number", func(t *testing.T) {
		t.Parallel()
		c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
		require.NoError(t, db.RecordAttempt(ctx, recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)))
		_, err := pool.Exec(ctx, `INSERT INTO attempts (task_id, attempt, started_at, duration_ms, outcome) VALUES ($1, 1, now(), 1, 'success')`, c.ID)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "got %v", err)
		require.Equal(t, "23505", pgErr.Code)
		require.Equal(t, "attempts_pkey", pgErr.ConstraintName)
	})
}

func TestDeferClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	type setup struct {
		priorAttempts int // attempts before the claim; > 0 means retrying
		dueAgo        time.Duration
	}
	tests := []struct {
		name          string
		setup         setup
		notBefore     func(now time.Time) time.Time
		wrongToken    bool
		wantStatus    string
		wantAttempts  int
		wantNextIsOld bool
	}{
		{"first attempt, later notBefore", setup{0, time.Minute}, func(now time.Time) time.Time { return now.Add(time.Hour) }, false, "scheduled", 0, false},
		{"retry, later notBefore", setup{1, time.Minute}, func(now time.Time) time.Time { return now.Add(time.Hour) }, false, "retrying", 1, false},
		{"third attempt, later notBefore", setup{2, time.Minute}, func(now time.Time) time.Time { return now.Add(time.Hour) }, false, "retrying", 2, false},
		{"earlier notBefore keeps the due time", setup{0, time.Minute}, func(now time.Time) time.Time { return now.Add(-time.Hour) }, false, "scheduled", 0, true},
		{"zero notBefore keeps the due time", setup{1, time.Minute}, func(time.Time) time.Time { return time.Time{} }, false, "retrying", 1, true},
		{"wrong token leaves the claim", setup{0, time.Minute}, func(now time.Time) time.Time { return now.Add(time.Hour) }, true, "dispatching", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := dbNow(t, pool)
			task := insertTask(t, db, tenant.ID, now.Add(-tt.setup.dueAgo))
			bystander := insertTask(t, db, tenant.ID, now.Add(-tt.setup.dueAgo))
			if tt.setup.priorAttempts > 0 {
				exec(t, pool, `UPDATE tasks SET status = 'retrying', attempts = $2 WHERE id = $1`, task.ID, tt.setup.priorAttempts)
			}
			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID, bystander.ID}, now, 30*time.Second)
			require.NoError(t, err)
			require.Len(t, claims, 2)
			// RETURNING keeps no order: find this task's claim.
			claim := claims[slices.IndexFunc(claims, func(c *model.ClaimedTask) bool { return c.ID == task.ID })]
			require.Equal(t, tt.setup.priorAttempts+1, claim.Attempt)
			claimed := readTaskRow(t, pool, task.ID)
			bystanderClaimed := readTaskRow(t, pool, bystander.ID)

			token := claim.ClaimToken
			if tt.wrongToken {
				token = uuid.New()
			}
			notBefore := µs(tt.notBefore(now))
			require.NoError(t, db.DeferClaims(ctx, []store.DeferredClaim{{ID: task.ID, Token: token, NotBefore: notBefore}}))

			require.Equal(t, bystanderClaimed, readTaskRow(t, pool, bystander.ID), "only the listed ids are deferred")
			row := readTaskRow(t, pool, task.ID)
			if tt.wrongToken {
				require.Equal(t, claimed, row)
				return
			}
			require.Equal(t, tt.wantStatus, row.Status)
			require.Equal(t, tt.wantAttempts, row.Attempts)
			require.Nil(t, row.ClaimToken)
			require.Nil(t, row.ClaimedBy)
			require.Nil(t, row.LeaseExpiresAt)
			require.NotNil(t, row.NextAttemptAt)
			wantNext := notBefore
			if tt.wantNextIsOld {
				wantNext = task.RunAt
			}
			require.Equal(t, wantNext.UnixMicro(), row.NextAttemptAt.UnixMicro())

			// No attempt was spent: the next claim carries the same number.
			again, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, wantNext, 30*time.Second)
			require.NoError(t, err)
			require.Len(t, again, 1)
			require.Equal(t, claim.Attempt, again[0].Attempt)
		})
	}
}

func recoveredIDs(recovered []store.RecoveredClaim) []uuid.UUID {
	ids := make([]uuid.UUID, len(recovered))
	for i, r := range recovered {
		ids[i] = r.ID
	}
	return ids
}

// requireRecovered checks a claim RecoverClaims handed back between from and
// to (Postgres's clock): it reports the claim's attempt and token, and the
// task waits again, due at the recovery's now(), with the attempt given back.
func requireRecovered(t *testing.T, pool *pgxpool.Pool, got store.RecoveredClaim, claim *model.ClaimedTask, from, to time.Time) {
	t.Helper()
	require.Equal(t, claim.ID, got.ID)
	require.Equal(t, claim.Attempt, got.Attempt, "the attempt the claim was for")
	require.Equal(t, claim.ClaimToken, got.Token, "the token the claim was held under")
	row := readTaskRow(t, pool, got.ID)
	wantStatus := "scheduled"
	if claim.Attempt > claim.AttemptBase+1 {
		wantStatus = "retrying"
	}
	require.Equal(t, wantStatus, row.Status)
	require.Equal(t, claim.Attempt-1, row.Attempts)
	require.Nil(t, row.ClaimToken)
	require.Nil(t, row.ClaimedBy)
	require.Nil(t, row.LeaseExpiresAt)
	require.NotNil(t, row.NextAttemptAt)
	require.Equal(t, got.At.UnixMicro(), row.NextAttemptAt.UnixMicro())
	require.Equal(t, row.UpdatedAt.UnixMicro(), got.At.UnixMicro(), "due at the recovery's now()")
	require.False(t, got.At.Before(from), "%s before %s", got.At, from)
	require.False(t, got.At.After(to), "%s after %s", got.At, to)
}

// claimFor claims one due task for node, which first takes the lease of the
// task's partition (no node claims in a partition another leases), and
// requires that the claim succeeded.
func claimFor(t *testing.T, db *store.DB, pool *pgxpool.Pool, node uuid.UUID, id uuid.UUID) *model.ClaimedTask {
	t.Helper()
	exec(t, pool, `UPDATE partitions SET owner = $1, lease_expires_at = now() + interval '1 hour'
		WHERE id = get_byte(uuid_send($2::uuid), 15)`, node, id)
	claims, err := db.ClaimTasks(context.Background(), node, allPartitions(), []uuid.UUID{id}, dbNow(t, pool), 30*time.Second)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, &node, readTaskRow(t, pool, id).ClaimedBy)
	return claims[0]
}

// TestRecoverClaimsExpiredLeases: claims of a live node come back once their
// lease runs out, oldest lease first, no more than the limit at a time.
func TestRecoverClaimsExpiredLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t) // recovery spans tenants: this database is the test's alone
	tenant := createTenant(t, db)

	// claimOne claims for testNode, registered live for an hour.
	first := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
	retryTask := insertDueTask(t, db, pool, tenant.ID)
	exec(t, pool, `UPDATE tasks SET status = 'retrying', attempts = 2 WHERE id = $1`, retryTask.ID)
	retry := claimOne(t, db, pool, retryTask.ID)
	require.Equal(t, 3, retry.Attempt)
	live := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
	waiting := insertDueTask(t, db, pool, tenant.ID)
	exec(t, pool, `UPDATE tasks SET lease_expires_at = now() - interval '2 seconds' WHERE id = $1`, first.ID)
	exec(t, pool, `UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, retry.ID)
	liveBefore := readTaskRow(t, pool, live.ID)
	waitingBefore := readTaskRow(t, pool, waiting.ID)

	// Oldest lease first, and no more than the limit.
	from := dbNow(t, pool)
	got, err := db.RecoverClaims(ctx, allPartitions(), 1)
	require.NoError(t, err)
	to := dbNow(t, pool)
	require.Equal(t, []uuid.UUID{first.ID}, recoveredIDs(got))
	requireRecovered(t, pool, got[0], first, from, to)

	from = dbNow(t, pool)
	got, err = db.RecoverClaims(ctx, allPartitions(), 100)
	require.NoError(t, err)
	to = dbNow(t, pool)
	require.Equal(t, []uuid.UUID{retry.ID}, recoveredIDs(got))
	requireRecovered(t, pool, got[0], retry, from, to)

	got, err = db.RecoverClaims(ctx, allPartitions(), 100)
	require.NoError(t, err)
	require.Empty(t, got)

	require.Equal(t, liveBefore, readTaskRow(t, pool, live.ID), "a live lease of a live node is untouched")
	require.Equal(t, waitingBefore, readTaskRow(t, pool, waiting.ID))

	// Back in the queue with the same attempt numbers.
	require.Equal(t, 1, claimOne(t, db, pool, first.ID).Attempt)
	require.Equal(t, 3, claimOne(t, db, pool, retry.ID).Attempt)
}

// TestRecoverClaimsOfDeadNodes: the claims of a node whose heartbeat expired,
// or that left, come back at once, their leases still running; a live node's
// claims stay until their lease runs out.
func TestRecoverClaimsOfDeadNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	live, dying, leaving := uuid.New(), uuid.New(), uuid.New()
	for i, node := range []uuid.UUID{live, dying, leaving} {
		m, err := db.Heartbeat(ctx, node, fmt.Sprintf("node-%d", i), time.Hour)
		require.NoError(t, err)
		require.Equal(t, i+1, m.LiveNodes)
	}
	liveClaim := claimFor(t, db, pool, live, insertDueTask(t, db, pool, tenant.ID).ID)
	liveExpired := claimFor(t, db, pool, live, insertDueTask(t, db, pool, tenant.ID).ID)
	exec(t, pool, `UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, liveExpired.ID)
	dyingClaim := claimFor(t, db, pool, dying, insertDueTask(t, db, pool, tenant.ID).ID)
	dyingRetryTask := insertDueTask(t, db, pool, tenant.ID)
	exec(t, pool, `UPDATE tasks SET status = 'retrying', attempts = 2 WHERE id = $1`, dyingRetryTask.ID)
	dyingRetry := claimFor(t, db, pool, dying, dyingRetryTask.ID)
	require.Equal(t, 3, dyingRetry.Attempt)
	leavingClaim := claimFor(t, db, pool, leaving, insertDueTask(t, db, pool, tenant.ID).ID)
	waiting := insertDueTask(t, db, pool, tenant.ID)
	require.NoError(t, db.LeaveNode(ctx, leaving))

	untouched := func(claims ...*model.ClaimedTask) map[uuid.UUID]taskRow {
		rows := map[uuid.UUID]taskRow{}
		for _, c := range claims {
			rows[c.ID] = readTaskRow(t, pool, c.ID)
			require.Equal(t, "dispatching", rows[c.ID].Status)
			require.True(t, rows[c.ID].LeaseExpiresAt.After(dbNow(t, pool)), "lease still running")
		}
		return rows
	}
	liveBefore := untouched(liveClaim)
	dyingBefore := untouched(dyingClaim, dyingRetry)
	waitingBefore := readTaskRow(t, pool, waiting.ID)

	steps := []struct {
		name    string
		prepare func(t *testing.T)
		want    []*model.ClaimedTask
		after   func(t *testing.T)
	}{
		{
			name: "a live node's expired lease and a left node's claim",
			want: []*model.ClaimedTask{liveExpired, leavingClaim},
			after: func(t *testing.T) {
				for id, before := range dyingBefore {
					require.Equal(t, before, readTaskRow(t, pool, id), "the claim of a live node with a live lease is untouched")
				}
			},
		},
		{
			name: "the heartbeat of the dying node expires",
			prepare: func(t *testing.T) {
				exec(t, pool, `UPDATE nodes SET expires_at = now() - interval '1 millisecond' WHERE id = $1`, dying)
			},
			want: []*model.ClaimedTask{dyingClaim, dyingRetry},
		},
		{name: "nothing left"},
	}
	for _, step := range steps {
		// Sequential: each step starts from where the last left off.
		t.Run(step.name, func(t *testing.T) {
			if step.prepare != nil {
				step.prepare(t)
			}
			from := dbNow(t, pool)
			got, err := db.RecoverClaims(ctx, allPartitions(), 100)
			require.NoError(t, err)
			to := dbNow(t, pool)
			want := make([]uuid.UUID, len(step.want))
			for i, c := range step.want {
				want[i] = c.ID
			}
			require.ElementsMatch(t, want, recoveredIDs(got))
			for _, r := range got {
				for _, c := range step.want {
					if c.ID == r.ID {
						requireRecovered(t, pool, r, c, from, to)
					}
				}
			}
			if step.after != nil {
				step.after(t)
			}
		})
	}

	require.Equal(t, liveBefore[liveClaim.ID], readTaskRow(t, pool, liveClaim.ID))
	require.Equal(t, waitingBefore, readTaskRow(t, pool, waiting.ID))
	// Back in the queue with the same attempt numbers, for a live node.
	for _, c := range []*model.ClaimedTask{liveExpired, leavingClaim, dyingClaim, dyingRetry} {
		require.Equal(t, c.Attempt, claimFor(t, db, pool, live, c.ID).Attempt)
	}
}

// TestRecoverClaimsPartitions: RecoverClaims looks only at the partitions it
// is given, and hands back no more than the limit, earliest lease first.
func TestRecoverClaimsPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	dead := uuid.New()
	registerNode(t, pool, dead, time.Hour)
	claimIn := func(p int16, leaseIn time.Duration) *model.ClaimedTask {
		c := claimFor(t, db, pool, dead, insertTaskIn(t, db, tenant.ID, dbNow(t, pool).Add(-time.Minute), p).ID)
		exec(t, pool, `UPDATE tasks SET lease_expires_at = now() + $2::interval WHERE id = $1`, c.ID, leaseIn)
		return c
	}
	in10a, in10b := claimIn(10, 3*time.Minute), claimIn(10, time.Minute)
	in11 := claimIn(11, time.Minute)
	in12 := claimIn(12, 2*time.Minute)
	var in20 []*model.ClaimedTask
	for i := range 5 {
		// Leases end in the order 4, 3, 2, 1, 0.
		in20 = append(in20, claimIn(20, time.Duration(10-i)*time.Minute))
	}
	exec(t, pool, `UPDATE nodes SET expires_at = now() - interval '1 second' WHERE id = $1`, dead)

	steps := []struct {
		name       string
		partitions []int16
		limit      int
		want       []*model.ClaimedTask // in lease order
	}{
		{"no partitions", []int16{}, 100, nil},
		{"nil partitions", nil, 100, nil},
		{"partitions without claims", []int16{0, 1, 255}, 100, nil},
		{"two of the partitions", []int16{10, 12}, 100, []*model.ClaimedTask{in10b, in12, in10a}},
		{"again: nothing left there", []int16{10, 12}, 100, nil},
		{"limit 2, earliest leases first", []int16{20}, 2, []*model.ClaimedTask{in20[4], in20[3]}},
		{"limit 2 again", []int16{20, 21}, 2, []*model.ClaimedTask{in20[2], in20[1]}},
		{"the rest", allPartitions(), 100, []*model.ClaimedTask{in11, in20[0]}},
		{"all recovered", allPartitions(), 100, nil},
	}
	for _, step := range steps {
		// Sequential: each step starts from where the last left off.
		t.Run(step.name, func(t *testing.T) {
			stillClaimed := countRows(t, pool, `SELECT count(*) FROM tasks WHERE claim_token IS NOT NULL`)
			from := dbNow(t, pool)
			got, err := db.RecoverClaims(ctx, step.partitions, step.limit)
			require.NoError(t, err)
			to := dbNow(t, pool)
			want := make([]uuid.UUID, len(step.want))
			for i, c := range step.want {
				want[i] = c.ID
			}
			// RETURNING keeps no order: the limit must take the earliest
			// leases, whatever order they come back in.
			require.ElementsMatch(t, want, recoveredIDs(got))
			for i, r := range got {
				requireRecovered(t, pool, r, step.want[slices.Index(want, r.ID)], from, to)
				require.Contains(t, step.partitions, model.PartitionOf(got[i].ID))
			}
			require.Equal(t, stillClaimed-len(want), countRows(t, pool, `SELECT count(*) FROM tasks WHERE claim_token IS NOT NULL`),
				"nothing else recovered")
		})
	}
}

func TestListenDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t) // NOTIFY is per database: only this test's inserts arrive
	tenant := createTenant(t, db)

	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	got := make(chan store.DueTask, 16)
	done := make(chan error, 1)
	go func() {
		done <- db.ListenDue(listenCtx, func() { close(ready) }, func(d store.DueTask) { got <- d })
	}()
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "ListenDue returned before listening", "%v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue never became ready")
	}

	next := func() store.DueTask {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no notification")
			return store.DueTask{}
		}
	}
	insert := func(runAt time.Time, key *string, notify bool) (*model.Task, bool) {
		task := newTask(tenant.ID, runAt)
		task.IdempotencyKey = key
		_, created, err := db.InsertTask(ctx, task, notify)
		require.NoError(t, err)
		return task, created
	}

	runAt := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC) // truncated to ...123456
	silent, _ := insert(runAt.Add(-time.Second), nil, false)
	announced, _ := insert(runAt, nil, true)
	first := next()
	require.NotEqual(t, silent.ID, first.ID, "a task stored with notifyDue false is not announced")
	require.Equal(t, announced.ID, first.ID)
	require.Equal(t, int64(1893553445123456), first.At.UnixMicro())
	require.True(t, first.At.Equal(announced.RunAt))

	// An idempotent repeat stores nothing and announces nothing.
	keyed, created := insert(runAt.Add(time.Second), ptr("k1"), true)
	require.True(t, created)
	_, created = insert(runAt.Add(time.Hour), ptr("k1"), true)
	require.False(t, created)
	last, _ := insert(runAt.Add(2*time.Second), nil, true)
	third := next()
	require.Equal(t, keyed.ID, third.ID)
	require.Equal(t, keyed.RunAt.UnixMicro(), third.At.UnixMicro())
	fourth := next()
	require.Equal(t, last.ID, fourth.ID)
	require.Equal(t, last.RunAt.UnixMicro(), fourth.At.UnixMicro())

	stop()
	select {
	case err := <-done:
		require.NoError(t, err, "a canceled listener returns nil")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue did not return after cancel")
	}
	require.Empty(t, got, "nothing else was announced")
}

// TestRecordAttemptsBatch writes many attempts in one statement: each is
// judged on its own claim, and the results come back in input order.
func TestRecordAttemptsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	var results []store.AttemptResult
	for i := range 50 {
		c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
		r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
		if i%10 == 3 {
			r.ClaimToken = uuid.New() // someone else's claim
		}
		results = append(results, r)
	}
	errs, err := db.RecordAttempts(ctx, results)
	require.NoError(t, err)
	require.Len(t, errs, len(results))
	for i, r := range results {
		row := readTaskRow(t, pool, r.TaskID)
		if i%10 == 3 {
			require.ErrorIs(t, errs[i], store.ErrClaimLost, "item %d", i)
			require.Equal(t, "dispatching", row.Status, "a lost claim leaves the task to its owner")
			require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, r.TaskID))
			continue
		}
		require.NoError(t, errs[i], "item %d", i)
		require.Equal(t, "delivered", row.Status)
		require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1 AND attempt = 1`, r.TaskID))
	}
}

// TestClaimLeavesLongBodiesOut: a claim carries bodies up to
// ClaimBodyInline and leaves longer ones to ClaimedBody, which reads them
// only for the claim that holds the task.
func TestClaimLeavesLongBodiesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	cases := []struct {
		name     string
		size     int
		deferred bool
	}{
		{name: "empty", size: 0},
		{name: "inline", size: store.ClaimBodyInline},
		{name: "long", size: store.ClaimBodyInline + 1, deferred: true},
		{name: "largest", size: 1 << 20, deferred: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(tenant.ID, now.Add(-time.Minute))
			task.Body = bytes.Repeat([]byte{0xff, 'x'}, tc.size/2+1)[:tc.size]
			_, created, err := db.InsertTask(ctx, task, false)
			require.NoError(t, err)
			require.True(t, created)

			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second)
			require.NoError(t, err)
			require.Len(t, claims, 1)
			c := claims[0]
			require.Equal(t, tc.size, c.BodySize)
			require.Equal(t, tc.deferred, c.BodyDeferred())
			if !tc.deferred {
				require.Equal(t, task.Body, []byte(c.Body))
				return
			}
			require.Nil(t, c.Body)
			body, err := db.ClaimedBody(ctx, c.ID, c.ClaimToken)
			require.NoError(t, err)
			require.Equal(t, task.Body, body, "byte for byte")

			_, err = db.ClaimedBody(ctx, c.ID, uuid.New())
			require.ErrorIs(t, err, model.ErrNotFound, "another claim's token reads nothing")
		})
	}
}

// TestClaimCarriesTenantMaxTimeout: a claim carries its tenant's
// max_timeout, for the sender to cut the attempt to; none when unset.
func TestClaimCarriesTenantMaxTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	limited, free := createTenant(t, db), createTenant(t, db)
	_, err := db.SetTenantLimits(ctx, limited.ID, model.Limits{MaxTimeout: 7 * time.Second}, model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.limits_changed"})
	require.NoError(t, err)
	now := dbNow(t, pool)
	for _, tc := range []struct {
		tenant *model.Tenant
		want   time.Duration
	}{{limited, 7 * time.Second}, {free, 0}} {
		task := insertTask(t, db, tc.tenant.ID, now.Add(-time.Minute))
		claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, claims, 1)
		require.Equal(t, tc.want, claims[0].TenantMaxTimeout)
	}
}

// TestClaimTasksHeadersPerRow: a claim decodes each distinct headers value
// once and shares it between the rows that carry it; every row still gets
// its own task's headers, whatever the order the rows come in.
func TestClaimTasksHeadersPerRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	variants := []map[string]string{
		{"Content-Type": "application/json"},
		{},
		{"Content-Type": "application/json", "X-Order": "42"},
		{"X-Order": "42", "Content-Type": "application/json"}, // the same object, written in another order
	}
	want := map[uuid.UUID]map[string]string{}
	var ids []uuid.UUID
	for i := range 12 {
		task := newTask(tenant.ID, now.Add(-time.Minute))
		task.Headers = variants[i%len(variants)]
		_, created, err := db.InsertTask(ctx, task, false)
		require.NoError(t, err)
		require.True(t, created)
		want[task.ID] = task.Headers
		ids = append(ids, task.ID)
	}
	claims, err := db.ClaimTasks(ctx, uuid.New(), allPartitions(), ids, now, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, claims, len(ids))
	for _, c := range claims {
		require.Equal(t, want[c.ID], c.Headers, "task %s", c.ID)
		require.Equal(t, tenant.SigningSecrets[0].ID, c.SigningSecrets[0].ID)
	}
}

// TestOlderNodesCannotTakeTokenClaims backs migration 00026's trigger: while
// nodes of the version before share the database (a rolling upgrade), their
// statements read a claim token on a waiting row as no claim. Their claim,
// cancel and reschedule of such a task change nothing; of a task without a
// claim they still do.
func TestOlderNodesCannotTakeTokenClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	claimed := insertDueTask(t, db, pool, tenant.ID)
	claimOne(t, db, pool, claimed.ID)
	free := insertDueTask(t, db, pool, tenant.ID)

	// The statements of the version before (28d2c9f), reduced to what decides.
	older := []struct{ name, query string }{
		{"claim", `UPDATE tasks SET status = 'dispatching', attempts = attempts + 1, claim_token = gen_random_uuid(),
			claimed_by = gen_random_uuid(), lease_expires_at = now() + interval '40 seconds', updated_at = now()
			WHERE id = $1 AND status IN ('scheduled', 'retrying')`},
		{"reschedule", `UPDATE tasks SET next_attempt_at = now() + interval '1 hour', updated_at = now()
			WHERE id = $1 AND status IN ('scheduled', 'retrying')`},
		{"cancel", `UPDATE tasks SET status = 'canceled', next_attempt_at = NULL, updated_at = now()
			WHERE id = $1 AND status IN ('scheduled', 'retrying')`},
	}
	for _, st := range older {
		t.Run(st.name, func(t *testing.T) {
			before := readTaskRow(t, pool, claimed.ID)
			tag, err := pool.Exec(ctx, st.query, claimed.ID)
			require.NoError(t, err)
			require.Zero(t, tag.RowsAffected(), "a task claimed by its token is left alone")
			require.Equal(t, before, readTaskRow(t, pool, claimed.ID))

			if st.name == "claim" {
				return // the unclaimed task is rescheduled and canceled below
			}
			tag, err = pool.Exec(ctx, st.query, free.ID)
			require.NoError(t, err)
			require.EqualValues(t, 1, tag.RowsAffected(), "a task without a claim still changes")
		})
	}
}

// TestClaimTasksFencedByPartitionLease: a node whose view of its partitions
// is stale claims nothing in a partition another node holds a live lease
// on; the owner claims it, and so may anyone once that lease has expired.
func TestClaimTasksFencedByPartitionLease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// lease is the other node's lease on the task's partition, from now.
		lease   string
		claimer string // "stale" or "owner"
		claimed bool
	}{
		{name: "stale node, live lease", lease: "1 minute", claimer: "stale", claimed: false},
		{name: "owner, live lease", lease: "1 minute", claimer: "owner", claimed: true},
		{name: "stale node, lease expired", lease: "-1 second", claimer: "stale", claimed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool := openDB(t)
			tenant := createTenant(t, db)
			now := dbNow(t, pool)
			task := insertTask(t, db, tenant.ID, now.Add(-time.Second))
			owner, stale := uuid.New(), uuid.New()
			exec(t, pool, `UPDATE partitions SET owner = $1, lease_expires_at = now() + $2::interval
				WHERE id = get_byte(uuid_send($3::uuid), 15)`, owner, tc.lease, task.ID)
			node := stale
			if tc.claimer == "owner" {
				node = owner
			}
			claims, err := db.ClaimTasks(ctx, node, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.claimed, len(claims) == 1)
		})
	}
}

// TestDeferClaimsAnnouncesMovedTasks: a claim handed back in a partition its
// claimer still holds is armed by the claimer itself and announces nothing;
// one handed back after its partition moved to another node is announced,
// with its due time, for that node to arm.
func TestDeferClaimsAnnouncesMovedTasks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		moved    bool
		announce bool
	}{
		{name: "partition still the claimer's", moved: false, announce: false},
		{name: "partition moved to another node", moved: true, announce: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool := openDB(t)
			listener := listenDue(t, db, pool)
			tenant := createTenant(t, db)
			now := dbNow(t, pool)
			task := insertTask(t, db, tenant.ID, now.Add(-time.Second))
			setOwner := `UPDATE partitions SET owner = $1, lease_expires_at = now() + interval '1 minute'
				WHERE id = get_byte(uuid_send($2::uuid), 15)`
			exec(t, pool, setOwner, testNode, task.ID)
			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second)
			require.NoError(t, err)
			require.Len(t, claims, 1)
			listener.drain(t) // the task's creation
			if tc.moved {
				exec(t, pool, setOwner, uuid.New(), task.ID)
			}
			notBefore := µs(now.Add(time.Minute))
			require.NoError(t, db.DeferClaims(ctx, []store.DeferredClaim{{ID: task.ID, Token: claims[0].ClaimToken, NotBefore: notBefore}}))
			got := listener.drain(t)
			if !tc.announce {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.True(t, notBefore.Equal(got[task.ID]), "announced due at %s, want %s", got[task.ID], notBefore)
		})
	}
}
