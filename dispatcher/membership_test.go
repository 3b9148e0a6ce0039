package dispatcher

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestOwnership runs one heartbeat of a lone node: it comes to own every
// partition, has them all loaded as gained, and recovers the claims a dead
// node left in them, freeing their fire-once keys in Redis; a claim whose
// receiver had answered (the answer journal has it, under that claim's
// token) is recorded delivered instead, and not sent again.
func TestOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, redis := storetest.DB(t), storetest.Redis(t)
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	task := storetest.InsertTask(t, db, tenant, "https://receiver.example/x", time.Now().Add(-time.Second))
	answered := storetest.InsertTask(t, db, tenant, "https://receiver.example/answered", time.Now().Add(-time.Second))
	otherToken := storetest.InsertTask(t, db, tenant, "https://receiver.example/other-token", time.Now().Add(-time.Second))
	claims := storetest.ClaimNow(t, db, task.ID, answered.ID, otherToken.ID) // by a node that never registered
	var dead *model.ClaimedTask
	for _, c := range claims {
		switch c.ID {
		case task.ID:
			dead = c
		case answered.ID:
			require.NoError(t, redis.MarkAnswered(ctx, []model.AnsweredAttempt{{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken,
				StatusCode: 204, StartedAt: time.Now().Add(-time.Second), Duration: 3 * time.Millisecond}}, time.Minute))
		case otherToken.ID:
			require.NoError(t, redis.MarkAnswered(ctx, []model.AnsweredAttempt{{TaskID: c.ID, Attempt: c.Attempt, Token: uuid.New(),
				StatusCode: 200, StartedAt: time.Now()}}, time.Minute))
		}
	}
	key := model.AttemptClaim{TaskID: dead.ID, Attempt: dead.Attempt, Token: dead.ClaimToken, TTL: time.Minute}
	held, err := redis.ClaimAttempts(ctx, []model.AttemptClaim{key})
	require.NoError(t, err)
	require.True(t, held[0])

	m := testMetrics(t)
	gained := make(chan []int16, 1)
	scheduled := make(chan dueAt, 16)
	o := newOwnership(ownershipConfig{
		Store: db, FireOnce: redis, NodeID: uuid.New(), NodeName: "test", NodeTTL: 1500 * time.Millisecond,
		Journal: newAnswerJournal(answerJournalConfig{Store: redis, TTL: time.Minute,
			Logger: quietLogger(), Metrics: m}),
		HeartbeatInterval: 300 * time.Millisecond, NudgeGap: heartbeatNudgeGap, Clock: clock.NewFake(time.Now()),
		Logger: quietLogger(), Metrics: m,
		Gained:   func(p []int16) { gained <- p },
		Schedule: func(id uuid.UUID, at time.Time) { scheduled <- dueAt{id, at} },
	})
	require.False(t, o.owns(task.ID))
	require.Empty(t, o.partitions())

	runCtx, cancel := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); o.Run(runCtx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	receive(t, ready)

	require.Equal(t, allPartitions(), receive(t, gained))
	require.Equal(t, allPartitions(), o.partitions())
	require.True(t, o.owns(task.ID))
	require.Equal(t, float64(model.Partitions), counterValue(t, m.ownedPartitions))
	require.Equal(t, 1.0, counterValue(t, m.liveNodes))

	handedBack := []uuid.UUID{receive(t, scheduled).id, receive(t, scheduled).id}
	require.ElementsMatch(t, []uuid.UUID{task.ID, otherToken.ID}, handedBack,
		"handed back: the unanswered claim, and the one whose answer was another claim's")
	require.Equal(t, model.StatusScheduled, taskOf(t, db, tenant, task.ID).Status)
	require.Equal(t, model.StatusScheduled, taskOf(t, db, tenant, otherToken.ID).Status)
	require.Equal(t, 2.0, counterValue(t, m.recovered))
	require.Equal(t, model.StatusDelivered, taskOf(t, db, tenant, answered.ID).Status)
	require.Equal(t, 1.0, counterValue(t, m.recoveredAnswered))
	attempts, err := db.ListAttempts(ctx, tenant, answered.ID, 0, 1000)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.Equal(t, 204, *attempts[0].StatusCode)
	require.Equal(t, "success", attempts[0].Outcome)
	require.Empty(t, scheduled, "the answered claim is not sent again")
	key.Token = uuid.New()
	held, err = redis.ClaimAttempts(ctx, []model.AttemptClaim{key})
	require.NoError(t, err)
	require.True(t, held[0], "the dead node's fire-once key is gone")
}

// clusterNode is one node's ownership and listener, wired as a Dispatcher
// wires them.
type clusterNode struct {
	id        uuid.UUID
	ownership *ownership
	stop      func()
}

// startClusterNode runs an ownership and, once it has heartbeaten, a
// listener, on a fake clock that the caller never advances: every heartbeat
// after the first is one a membership change asked for.
func startClusterNode(t *testing.T, db *store.DB, fake *clock.Fake) *clusterNode {
	t.Helper()
	n := &clusterNode{id: uuid.New()}
	m := testMetrics(t)
	n.ownership = newOwnership(ownershipConfig{
		Store: db, NodeID: n.id, NodeName: "node-" + n.id.String()[:8], NodeTTL: time.Minute,
		HeartbeatInterval: 300 * time.Millisecond, Clock: fake, Logger: quietLogger(), Metrics: m,
		// No gap: with the clock standing still, a gap would never pass.
		NudgeGap: 0,
		Gained:   func([]int16) {},
		Schedule: func(uuid.UUID, time.Time) {},
	})
	l := newListener(listenerConfig{
		Store: db, Clock: fake, Logger: quietLogger(), Metrics: m,
		Due: func(uuid.UUID, time.Time) {}, Membership: n.ownership.heard, Listening: n.ownership.nudge,
	})
	ctx, cancel := context.WithCancel(context.Background())
	ready, owned, heard := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(owned); n.ownership.Run(ctx, ready) }()
	receive(t, ready)
	go func() { defer close(heard); l.Run(ctx) }()
	var stopped bool
	n.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-owned
			<-heard
		}
	}
	t.Cleanup(n.stop)
	return n
}

// requireSplit waits until the nodes' owned sets are disjoint, cover every
// partition and each is a fair share, and the partitions table agrees.
func requireSplit(t *testing.T, db *store.DB, nodes ...*clusterNode) {
	t.Helper()
	ids := make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.id
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	split := func() bool {
		seen := 0
		for _, n := range nodes {
			if len(n.ownership.partitions()) != model.FairShare(ids, n.id) {
				return false
			}
			seen += len(n.ownership.partitions())
		}
		if seen != model.Partitions {
			return false
		}
		listed, err := db.ListNodes(context.Background())
		if err != nil || len(listed) != len(nodes) {
			return false
		}
		for _, l := range listed {
			i := slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.id == l.ID })
			if i < 0 || !slices.Equal(l.Partitions, nodes[i].ownership.partitions()) {
				return false
			}
		}
		return true
	}
	require.Eventually(t, split, 10*time.Second, 5*time.Millisecond, "partitions never split among %d nodes", len(nodes))
}

// TestOwnershipMovesOnMembershipChanges: nodes join one after the other and
// one leaves cleanly, and the partitions move at once, driven by the
// announcements alone: the clock never reaches a heartbeat's timer.
func TestOwnershipMovesOnMembershipChanges(t *testing.T) {
	t.Parallel()
	db := storetest.DB(t)
	fake := clock.NewFake(time.Now())

	a := startClusterNode(t, db, fake)
	requireSplit(t, db, a)
	b := startClusterNode(t, db, fake)
	requireSplit(t, db, a, b)
	c := startClusterNode(t, db, fake)
	requireSplit(t, db, a, b, c)

	// A clean stop, as Dispatcher.Run ends.
	c.stop()
	require.NoError(t, db.LeaveNode(context.Background(), c.id))
	requireSplit(t, db, a, b)
}

// TestOwnershipHeard: another node's change asks for a heartbeat, the
// node's own does not, and a burst of asks is one.
func TestOwnershipHeard(t *testing.T) {
	t.Parallel()
	self := uuid.New()
	o := newOwnership(ownershipConfig{NodeID: self})
	for _, e := range []model.MembershipEvent{model.MembershipJoined, model.MembershipReleased, model.MembershipLeft} {
		o.heard(model.MembershipChange{Node: self, Event: e})
	}
	require.Empty(t, o.nudged, "its own changes")
	for range 3 {
		o.heard(model.MembershipChange{Node: uuid.New(), Event: model.MembershipReleased})
	}
	require.Len(t, o.nudged, 1, "a burst of changes of others")
}

// gatedHeartbeats holds each heartbeat until the test lets it through,
// reporting the fake time it began at.
type gatedHeartbeats struct {
	*store.DB
	clock   clock.Clock
	began   chan time.Time
	proceed chan struct{}
}

func (g *gatedHeartbeats) Heartbeat(ctx context.Context, nodeID uuid.UUID, name string, ttl time.Duration) (model.Membership, error) {
	g.began <- g.clock.Now()
	select {
	case <-g.proceed:
	case <-ctx.Done():
		return model.Membership{}, ctx.Err()
	}
	return g.DB.Heartbeat(ctx, nodeID, name, ttl)
}

// TestOwnershipNudge: a change heard while a heartbeat runs is not lost:
// another heartbeat follows, NudgeGap after the first began, long before the
// timer's; however many changes were heard meanwhile, it is one.
func TestOwnershipNudge(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now())
	g := &gatedHeartbeats{DB: storetest.DB(t), clock: fake, began: make(chan time.Time, 4), proceed: make(chan struct{})}
	const interval = time.Hour
	o := newOwnership(ownershipConfig{
		Store: g, NodeID: uuid.New(), NodeName: "test", NodeTTL: 2 * interval,
		HeartbeatInterval: interval, NudgeGap: heartbeatNudgeGap, Clock: fake, Logger: quietLogger(), Metrics: testMetrics(t),
		Gained: func([]int16) {}, Schedule: func(uuid.UUID, time.Time) {},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })

	first := receive(t, g.began)
	for range 3 {
		o.heard(model.MembershipChange{Node: uuid.New(), Event: model.MembershipReleased})
	}
	g.proceed <- struct{}{}

	// Move the clock a millisecond at a time until the next heartbeat
	// begins.
	var second time.Time
	deadline := time.After(10 * time.Second)
	for second.IsZero() {
		select {
		case second = <-g.began:
		case <-time.After(time.Millisecond):
			fake.Advance(time.Millisecond)
		case <-deadline:
			require.FailNow(t, "no heartbeat followed the change heard")
		}
	}
	require.GreaterOrEqual(t, second.Sub(first), heartbeatNudgeGap, "no sooner than the gap")
	require.Less(t, second.Sub(first), interval, "before the timer")
	g.proceed <- struct{}{}

	// The burst was one heartbeat: the next waits for the timer, armed as
	// the second heartbeat ended. The clock may have moved on a little
	// after the second began (the loop above can advance it once more
	// before it hears), so the timer runs from the clock as it is now: only
	// this test moves it.
	require.NoError(t, fake.WaitForTimers(ctx, 1))
	armed := fake.Now()
	fake.Advance(interval - time.Millisecond)
	select {
	case at := <-g.began:
		require.FailNow(t, "a second heartbeat for the same burst", "at %s", at.Sub(second))
	default:
	}
	fake.Advance(time.Millisecond)
	third := receive(t, g.began)
	require.Equal(t, interval, third.Sub(armed))
	g.proceed <- struct{}{}
}

// TestOwnershipRecoversOnIntervalOrChange: the scan for stale claims runs
// at the heartbeat that gains partitions, then not at every heartbeat but
// once RecoverInterval has passed.
func TestOwnershipRecoversOnIntervalOrChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.DatabaseURL(t)
	db, err := store.Open(ctx, store.Config{DatabaseURL: dbURL, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	fake := clock.NewFake(time.Now())
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	const heartbeat, recoverEvery = 300 * time.Millisecond, 5 * time.Second
	m, scheduled := startRecovering(t, db, fake, heartbeat, recoverEvery)

	// A claim of a node that is not registered, in a partition this node
	// holds: stale from the start. No claim can be made so any more (a
	// claim in a partition another node leases is refused), so it is
	// written as one would have been before the partition moved here.
	task := storetest.InsertTask(t, db, tenant, "https://receiver.example/x", time.Now().Add(-time.Second))
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	_, err = conn.Exec(ctx, `UPDATE tasks SET attempts = attempts + 1, claim_token = gen_random_uuid(),
		claimed_by = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' WHERE id = $1`, task.ID)
	require.NoError(t, err)
	beat := func(d time.Duration) {
		t.Helper()
		waitCtx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		require.NoError(t, fake.WaitForTimers(waitCtx, 1))
		fake.Advance(d)
		// The timer is armed again once the heartbeat, and any scan, ended.
		require.NoError(t, fake.WaitForTimers(waitCtx, 1))
	}
	for range 3 {
		beat(heartbeat)
	}
	require.Equal(t, model.StatusDispatching, taskOf(t, db, tenant, task.ID).Status,
		"no scan at heartbeats that changed nothing")
	require.Zero(t, counterValue(t, m.recovered))

	beat(recoverEvery)
	require.Equal(t, task.ID, receive(t, scheduled).id)
	require.Equal(t, model.StatusScheduled, taskOf(t, db, tenant, task.ID).Status)
	require.Equal(t, 1.0, counterValue(t, m.recovered))
}

// TestOwnershipRetriesStaleClaimsItCouldNotLock: a stale claim whose row
// another transaction holds while claims are handed back (a claimer locking
// the due tasks it was handed, say) is handed back at the next heartbeat,
// not a RecoverInterval later.
func TestOwnershipRetriesStaleClaimsItCouldNotLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.DatabaseURL(t)
	db, err := store.Open(ctx, store.Config{DatabaseURL: dbURL, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	fake := clock.NewFake(time.Now())
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	const heartbeat, recoverEvery = 300 * time.Millisecond, time.Hour

	// A claim of a node that never registered: stale from the start, and
	// its row held by another transaction when the first heartbeat looks.
	task := storetest.InsertTask(t, db, tenant, "https://receiver.example/x", time.Now().Add(-time.Second))
	storetest.ClaimNow(t, db, task.ID)
	holder, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(ctx) })
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, task.ID)
	require.NoError(t, err)

	m, scheduled := startRecovering(t, db, fake, heartbeat, recoverEvery)
	require.Equal(t, model.StatusDispatching, taskOf(t, db, tenant, task.ID).Status, "passed over while held")

	require.NoError(t, tx.Rollback(ctx))
	waitCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	require.NoError(t, fake.WaitForTimers(waitCtx, 1))
	fake.Advance(heartbeat)
	require.Equal(t, task.ID, receive(t, scheduled).id)
	require.Equal(t, model.StatusScheduled, taskOf(t, db, tenant, task.ID).Status)
	require.Equal(t, 1.0, counterValue(t, m.recovered))
}

// startRecovering runs, until the test ends, an ownership of db's partitions
// on fake that heartbeats every heartbeat and looks for lapsed leases every
// recoverEvery. It returns once the first heartbeat has taken every
// partition, with the ownership's metrics and the tasks it schedules.
func startRecovering(t *testing.T, db *store.DB, fake *clock.Fake, heartbeat, recoverEvery time.Duration) (*metrics, <-chan dueAt) {
	t.Helper()
	m := testMetrics(t)
	scheduled := make(chan dueAt, 16)
	o := newOwnership(ownershipConfig{
		Store: db, NodeID: uuid.New(), NodeName: "test", NodeTTL: time.Minute,
		HeartbeatInterval: heartbeat, NudgeGap: heartbeatNudgeGap, Clock: fake, Logger: quietLogger(), Metrics: m,
		Gained: func([]int16) {}, Schedule: func(id uuid.UUID, at time.Time) { scheduled <- dueAt{id, at} },
		RecoverInterval: recoverEvery,
	})
	runCtx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); o.Run(runCtx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	receive(t, ready)
	require.Len(t, o.partitions(), model.Partitions)
	return m, scheduled
}
