package store_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

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
	claims, err := db.ClaimTasks(ctx, node, allPartitions(), ids, now, 30*time.Second, nil)
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
	again, err := db.ClaimTasks(ctx, uuid.New(), allPartitions(), ids, now.Add(time.Hour), 30*time.Second, nil)
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
			claims, err := db.ClaimTasks(ctx, step.node, step.partitions, ids, now, 30*time.Second, nil)
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
						claims, err := db.ClaimTasks(ctx, nodes[i], allPartitions(), batch, now, 30*time.Second, nil)
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
				claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{free.ID, contested.ID}, now, 30*time.Second, nil)
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

			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second, nil)
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
		claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second, nil)
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
	claims, err := db.ClaimTasks(ctx, uuid.New(), allPartitions(), ids, now, 30*time.Second, nil)
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
			claims, err := db.ClaimTasks(ctx, node, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second, nil)
			require.NoError(t, err)
			require.Equal(t, tc.claimed, len(claims) == 1)
		})
	}
}
