package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// bulkInsert stores n scheduled tasks of the tenant in one statement; atSQL is
// an SQL expression of g (1..n) and $3 giving each next_attempt_at.
func bulkInsert(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID, n int, atSQL string, at time.Time) []model.DueTask {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/bulk', 'POST', `+atSQL+`, `+atSQL+`,
			10000, 10, 1000, 3600000
		FROM generate_series(1, $2::int) AS g
		RETURNING id, next_attempt_at`, tenantID, n, at)
	require.NoError(t, err)
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.DueTask, error) {
		var d model.DueTask
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
	at := func(task *model.Task) model.DueTask { return model.DueTask{ID: task.ID, At: task.RunAt} }
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

	cursor := model.DueCursor{At: base, ID: atBase1.ID}
	tests := []struct {
		name  string
		after model.DueCursor
		until time.Time
		limit int
		want  []model.DueTask
	}{
		{"after the cursor up to until inclusive", cursor, until, 100,
			[]model.DueTask{at(atBase2), at(scheduled), at(retrying), at(atUntil)}},
		{"limit", cursor, until, 2,
			[]model.DueTask{at(atBase2), at(scheduled)}},
		{"zero cursor reads from the start", model.DueCursor{}, until, 100,
			[]model.DueTask{at(beforeCursor), at(atBase1), at(atBase2), at(scheduled), at(retrying), at(atUntil)}},
		{"until one microsecond later", cursor, until.Add(time.Microsecond), 100,
			[]model.DueTask{at(atBase2), at(scheduled), at(retrying), at(atUntil), at(afterUntil)}},
		{"until before the first", model.DueCursor{}, base.Add(-time.Hour), 100, []model.DueTask{}},
		{"cursor on the last id of an instant", model.DueCursor{At: base, ID: atBase2.ID}, base.Add(time.Minute), 100,
			[]model.DueTask{at(scheduled)}},
		{"cursor at uuid.Max of an instant", model.DueCursor{At: base.Add(time.Minute), ID: uuid.Max}, until, 100,
			[]model.DueTask{at(retrying), at(atUntil)}},
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
	var want []model.DueTask
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
			got := []model.DueTask{}
			seen := make(map[uuid.UUID]bool, len(want))
			cursor := model.DueCursor{}
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
				cursor = model.DueCursor{At: last.At, ID: last.ID}
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
		all = append(all, model.DueTask{ID: task.ID, At: task.RunAt})
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
			want := []model.DueTask{}
			for _, d := range waiting {
				if slices.Contains(tt.partitions, model.PartitionOf(d.ID)) {
					want = append(want, d)
				}
			}
			if len(tt.partitions) > 0 {
				require.NotEmpty(t, want)
			}
			got, err := db.ListDue(ctx, tt.partitions, model.DueCursor{}, at.Add(time.Minute), 10_000)
			require.NoError(t, err)
			requireSameDue(t, want, got)

			// Paging through a subset meets the same tasks.
			paged := []model.DueTask{}
			cursor := model.DueCursor{}
			for range len(want) + 1 {
				page, err := db.ListDue(ctx, tt.partitions, cursor, at.Add(time.Minute), 64)
				require.NoError(t, err)
				paged = append(paged, page...)
				if len(page) < 64 {
					break
				}
				cursor = model.DueCursor{At: page[len(page)-1].At, ID: page[len(page)-1].ID}
			}
			requireSameDue(t, want, paged)
		})
	}
}

func dueIDs(due []model.DueTask) []uuid.UUID {
	ids := make([]uuid.UUID, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	return ids
}

// explainListDue runs EXPLAIN with options on the exact ListDue SQL and
// parameters, and returns the top plan node.
func explainListDue(t *testing.T, pool *pgxpool.Pool, options string, partitions []int16, after model.DueCursor, until time.Time, limit int) map[string]any {
	t.Helper()
	var out []byte
	err := pool.QueryRow(context.Background(), "EXPLAIN ("+options+") "+store.QueryListDue,
		after.At, after.ID, until, limit, partitions).Scan(&out)
	require.NoError(t, err)
	return topPlan(t, out)
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
	var soon []model.DueTask
	for i, p := range []int16{1, 2, 4, 5, 7} {
		task := insertTaskIn(t, db, tenant.ID, now.Add(time.Duration(i+1)*time.Second), p)
		soon = append(soon, model.DueTask{ID: task.ID, At: task.RunAt})
	}
	var third []int16
	for p := int16(1); p < model.Partitions; p += 3 {
		third = append(third, p)
	}
	require.Len(t, third, 85)
	cases := []struct {
		name       string
		partitions []int16
		want       []model.DueTask
	}{
		{"all 256 partitions", allPartitions(), soon},
		{"85 partitions", third, []model.DueTask{soon[0], soon[2], soon[4]}},
	}
	after, until, limit := model.DueCursor{}, now.Add(time.Minute), 1000

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

func TestListenDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t) // NOTIFY is per database: only this test's inserts arrive
	tenant := createTenant(t, db)

	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	got := make(chan model.DueTask, 16)
	done := make(chan error, 1)
	go func() {
		done <- db.ListenDue(listenCtx, func() { close(ready) }, func(d model.DueTask) { got <- d })
	}()
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "ListenDue returned before listening", "%v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue never became ready")
	}

	next := func() model.DueTask {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no notification")
			return model.DueTask{}
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
