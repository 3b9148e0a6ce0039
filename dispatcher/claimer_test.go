package dispatcher

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// dueAt is a task armed (or deferred) for an instant.
type dueAt struct {
	id uuid.UUID
	at time.Time
}

type claimerBundle struct {
	db      *store.DB
	clock   *clock.Fake
	metrics *metrics
	budget  *claimBudget
	claimer *claimer
	tenant  uuid.UUID
	// sent, held, scheduled and deferred receive what the claimer hands on.
	sent      chan *model.ClaimedTask
	held      chan *model.ClaimedTask
	scheduled chan dueAt
	deferred  chan []*model.ClaimedTask
	// leaseLapsed makes the node's own lease invalid; claimFails, every
	// claim statement fail.
	leaseLapsed atomic.Bool
	claimFails  atomic.Bool
	// stop cancels Run and waits for it.
	stop func()
}

// setupClaimer runs a claimer of two goroutines on a fresh database, with
// Redis left out (FireOnce and RateLimit pass every claim through).
// maxClaimed sizes the budget; send is the senders' channel.
func setupClaimer(t *testing.T, maxClaimed int, send chan *model.ClaimedTask) *claimerBundle {
	t.Helper()
	db := storetest.DB(t)
	b := &claimerBundle{
		db: db, clock: clock.NewFake(time.Now()), metrics: testMetrics(t), budget: newClaimBudget(maxClaimed),
		sent: send, held: make(chan *model.ClaimedTask, 16), scheduled: make(chan dueAt, 16),
		deferred: make(chan []*model.ClaimedTask, 16),
	}
	b.tenant = storetest.CreateTenant(t, db, model.Limits{})
	pass := func(_ context.Context, c []*model.ClaimedTask) []*model.ClaimedTask { return c }
	b.claimer = newClaimer(claimerConfig{
		Store: faultyClaims{DB: db, fail: &b.claimFails}, NodeID: uuid.New(), Clock: b.clock, Logger: quietLogger(), Metrics: b.metrics,
		Claimers: 2, ClaimBatch: 128, ClaimAhead: 50 * time.Millisecond, ClaimGroup: 10 * time.Millisecond,
		ClaimLinger: time.Millisecond, LeaseMargin: 30 * time.Second, Budget: b.budget,
		Partitions: allPartitions,
		LeaseEpoch: func() uint64 { return 1 },
		LeaseValid: func(uint64, time.Time) bool { return !b.leaseLapsed.Load() },
		LeaseRetry: 300 * time.Millisecond,
		Schedule:   func(id uuid.UUID, at time.Time) { b.scheduled <- dueAt{id, at} },
		FireOnce:   pass,
		RateLimit:  func(c []*model.ClaimedTask) []*model.ClaimedTask { return pass(nil, c) },
		Hold:       func(c *model.ClaimedTask) { b.held <- c },
		Send:       send,
		Defer:      func(c []*model.ClaimedTask, _ func(int) time.Time) { b.deferred <- c },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for range 2 {
		go func() { b.claimer.Run(ctx); done <- struct{}{} }()
	}
	b.stop = func() {
		cancel()
		<-done
		<-done
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			b.stop()
		}
	})
	return b
}

// faultyClaims fails every claim statement while fail is set, as a
// deadlock or a lost connection would.
type faultyClaims struct {
	*store.DB
	fail *atomic.Bool
}

func (f faultyClaims) ClaimTasks(ctx context.Context, node uuid.UUID, partitions []int16, ids []uuid.UUID, now time.Time, leaseMargin time.Duration, held *model.Held) ([]*model.ClaimedTask, error) {
	if f.fail.Load() {
		return nil, errors.New("ERROR: deadlock detected (SQLSTATE 40P01)")
	}
	return f.DB.ClaimTasks(ctx, node, partitions, ids, now, leaseMargin, held)
}

// fire fires a task's claim timer as the wheel does: ClaimAhead before it
// is due.
func (b *claimerBundle) fire(task *model.Task) {
	b.claimer.fire(task.ID, task.RunAt.Add(-b.claimer.cfg.ClaimAhead))
}

// TestClaimerHandsOnClaims: a task due now goes straight to the senders; one
// due within the claim window is held until its instant. Either way it is
// claimed in Postgres, at the claimer's time, with its budget unit taken.
func TestClaimerHandsOnClaims(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		due  time.Duration
		// held: goes to the holder, after lingering for the rest of its
		// group; else to the senders at once.
		held bool
	}{
		{name: "due now", due: 0},
		{name: "overdue", due: -time.Minute},
		{name: "due in 40ms", due: 40 * time.Millisecond, held: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupClaimer(t, 16, make(chan *model.ClaimedTask, 16))
			claimedAt := b.clock.Now()
			task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", claimedAt.Add(tc.due))
			b.fire(task)

			var c *model.ClaimedTask
			if tc.held {
				waitTimers(t, b.clock, 1) // the linger
				claimedAt = claimedAt.Add(time.Millisecond)
				b.clock.Advance(time.Millisecond)
				c = receive(t, b.held)
				require.True(t, task.RunAt.Equal(*c.NextAttemptAt))
			} else {
				c = receive(t, b.sent)
			}
			require.Equal(t, task.ID, c.ID)
			require.Equal(t, 1, c.Attempt)
			require.True(t, claimedAt.Equal(c.ClaimedAt))
			require.Equal(t, uint64(1), c.LeaseEpoch, "the claim carries the lease epoch it was taken under")
			require.Equal(t, model.StatusDispatching, taskOf(t, b.db, b.tenant, task.ID).Status)
			require.True(t, b.budget.inFlight(task.ID))
			// Its unit, and the one the idle claimer took to wait for work.
			require.Eventually(t, func() bool { return len(b.budget.units) == 2 }, 10*time.Second, time.Millisecond)
			require.Empty(t, b.sent)
			require.Empty(t, b.held)
		})
	}
}

// TestClaimerGathersAGroup: tasks fired with their claim window ahead linger
// for the rest of their group and are claimed in one statement.
func TestClaimerGathersAGroup(t *testing.T) {
	t.Parallel()
	b := setupClaimer(t, 16, make(chan *model.ClaimedTask, 16))
	due := b.clock.Now().Add(45 * time.Millisecond)
	for range 3 {
		b.fire(storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", due))
	}
	require.Eventually(t, func() bool { return b.claimer.queued() == 0 }, 10*time.Second, time.Millisecond)
	waitTimers(t, b.clock, 1)
	b.clock.Advance(time.Millisecond)
	for range 3 {
		receive(t, b.held)
	}
	count, sum := histogramCount(t, b.metrics.claimBatch)
	require.Equal(t, uint64(1), count)
	require.Equal(t, 3.0, sum)
}

// TestClaimerSettlesWhatItCannotClaim: a fired task that is no longer
// claimable gives its budget back; one moved later is armed again at the time
// Postgres has for it.
func TestClaimerSettlesWhatItCannotClaim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(t *testing.T, b *claimerBundle, task *model.Task) (rearmedAt *time.Time)
	}{
		{name: "canceled", change: func(t *testing.T, b *claimerBundle, task *model.Task) *time.Time {
			_, err := b.db.CancelTask(context.Background(), b.tenant, task.ID)
			require.NoError(t, err)
			return nil
		}},
		{name: "moved later", change: func(t *testing.T, b *claimerBundle, task *model.Task) *time.Time {
			later := task.RunAt.Add(time.Hour)
			_, err := b.db.RescheduleTask(context.Background(), b.tenant, task.ID, later, false)
			require.NoError(t, err)
			return &later
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupClaimer(t, 16, make(chan *model.ClaimedTask, 16))
			task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", b.clock.Now())
			rearmedAt := tc.change(t, b, task)
			b.fire(task)

			if rearmedAt != nil {
				got := receive(t, b.scheduled)
				require.Equal(t, task.ID, got.id)
				require.True(t, rearmedAt.Equal(got.at))
			}
			require.Eventually(t, func() bool { return !b.budget.inFlight(task.ID) }, 10*time.Second, time.Millisecond)
			// Only the unit the idle claimer took to wait for work.
			require.Eventually(t, func() bool { return len(b.budget.units) == 1 }, 10*time.Second, time.Millisecond)
			require.Empty(t, b.sent)
			require.Empty(t, b.held)
		})
	}
}

// TestClaimerFenced: a node that cannot prove its own lease claims
// nothing and tries the fired tasks again a LeaseRetry later, as it does
// when the claim statement fails (not left to the sweep); a node whose
// view of its partitions is stale claims nothing in a partition another
// node holds a lease on.
func TestClaimerFenced(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		fence  func(t *testing.T, b *claimerBundle)
		rearms bool
	}{
		{name: "own lease lapsed", rearms: true, fence: func(_ *testing.T, b *claimerBundle) { b.leaseLapsed.Store(true) }},
		{name: "claim statement failed", rearms: true, fence: func(_ *testing.T, b *claimerBundle) { b.claimFails.Store(true) }},
		{name: "partition leased by another node", fence: func(t *testing.T, b *claimerBundle) {
			m, err := b.db.Heartbeat(context.Background(), uuid.New(), "other", time.Minute)
			require.NoError(t, err)
			require.Len(t, m.Owned, model.Partitions, "a lone node takes every partition")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupClaimer(t, 16, make(chan *model.ClaimedTask, 16))
			tc.fence(t, b)
			task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", b.clock.Now())
			b.fire(task)
			if tc.rearms {
				got := receive(t, b.scheduled)
				require.Equal(t, task.ID, got.id)
				require.True(t, b.clock.Now().Add(300*time.Millisecond).Equal(got.at))
			}
			require.Eventually(t, func() bool { return !b.budget.inFlight(task.ID) }, 10*time.Second, time.Millisecond)
			require.Equal(t, model.StatusScheduled, taskOf(t, b.db, b.tenant, task.ID).Status, "not claimed")
			require.Empty(t, b.sent)
			require.Empty(t, b.held)
		})
	}
}

// TestClaimerBudget: claimers take no more tasks than the budget allows until
// settles give units back.
func TestClaimerBudget(t *testing.T) {
	t.Parallel()
	b := setupClaimer(t, 2, make(chan *model.ClaimedTask, 16))
	for range 3 {
		b.fire(storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", b.clock.Now()))
	}
	first := receive(t, b.sent)
	receive(t, b.sent)
	require.Never(t, func() bool { return len(b.sent) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"a third claim with the budget spent")
	require.Equal(t, 1, b.claimer.queued())

	b.budget.settle(first.ID)
	third := receive(t, b.sent)
	require.NotEqual(t, first.ID, third.ID)
}

// TestClaimerGivesBackAtShutdown: claims no sender takes when the claimer
// stops are given back.
func TestClaimerGivesBackAtShutdown(t *testing.T) {
	t.Parallel()
	b := setupClaimer(t, 16, make(chan *model.ClaimedTask)) // no sender reads
	task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", b.clock.Now())
	b.fire(task)
	require.Eventually(t, func() bool {
		return taskOf(t, b.db, b.tenant, task.ID).Status == model.StatusDispatching
	}, 10*time.Second, 5*time.Millisecond)

	b.stop()
	back := receive(t, b.deferred)
	require.Len(t, back, 1)
	require.Equal(t, task.ID, back[0].ID)
}
