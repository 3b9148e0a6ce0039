package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

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
			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID, bystander.ID}, now, 30*time.Second, nil)
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
			require.NoError(t, db.DeferClaims(ctx, []model.DeferredClaim{{ID: task.ID, Token: token, NotBefore: notBefore}}))

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
			again, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, wantNext, 30*time.Second, nil)
			require.NoError(t, err)
			require.Len(t, again, 1)
			require.Equal(t, claim.Attempt, again[0].Attempt)
		})
	}
}

func recoveredIDs(recovered []model.RecoveredClaim) []uuid.UUID {
	ids := make([]uuid.UUID, len(recovered))
	for i, r := range recovered {
		ids[i] = r.ID
	}
	return ids
}

// requireRecovered checks a claim RecoverClaims handed back between from and
// to (Postgres's clock): it reports the claim's attempt and token, and the
// task waits again, due at the recovery's now(), with the attempt given back.
func requireRecovered(t *testing.T, pool *pgxpool.Pool, got model.RecoveredClaim, claim *model.ClaimedTask, from, to time.Time) {
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
	claims, err := db.ClaimTasks(context.Background(), node, allPartitions(), []uuid.UUID{id}, dbNow(t, pool), 30*time.Second, nil)
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
			claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{task.ID}, now, 30*time.Second, nil)
			require.NoError(t, err)
			require.Len(t, claims, 1)
			listener.drain(t) // the task's creation
			if tc.moved {
				exec(t, pool, setOwner, uuid.New(), task.ID)
			}
			notBefore := µs(now.Add(time.Minute))
			require.NoError(t, db.DeferClaims(ctx, []model.DeferredClaim{{ID: task.ID, Token: claims[0].ClaimToken, NotBefore: notBefore}}))
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
