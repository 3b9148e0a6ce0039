package maintenance

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

// pendingFor is what r holds, not yet written, of tenant's minute at at.
func (r *StatsRecorder) pendingFor(tenant uuid.UUID, at time.Time) model.MinuteStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.pending[statsKey{tenant: tenant, minute: minuteOf(at)}]; m != nil {
		return *m
	}
	return model.MinuteStats{}
}

// failingStats fails the next fail writes, then writes through.
type failingStats struct {
	StatsStore
	fail   atomic.Int32
	writes atomic.Int32
}

func (f *failingStats) AddTaskStats(ctx context.Context, rows []model.TenantMinuteStats) error {
	f.writes.Add(1)
	if f.fail.Add(-1) >= 0 {
		return errors.New("postgres is away")
	}
	return f.StatsStore.AddTaskStats(ctx, rows)
}

type statsBundle struct {
	db     *store.DB
	clock  *clock.Fake
	store  *failingStats
	leader atomic.Bool
}

const testStatsInterval = 5 * time.Second

// run starts a stats recorder on b's clock and store; stop ends it and
// waits for its last write.
func (b *statsBundle) run(t *testing.T) (r *StatsRecorder, stop func()) {
	t.Helper()
	r = NewStatsRecorder(StatsConfig{
		Store: b.store, Clock: b.clock, Logger: quietLogger(),
		Interval: testStatsInterval, Keep: StatsKeep, Leader: b.leader.Load,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return r, stop
}

// tick lets the recorders waiting on the clock flush: once each has armed
// its timer again, its flush is over.
func (b *statsBundle) tick(t *testing.T, recorders int) {
	t.Helper()
	waitTimers(t, b.clock, recorders)
	b.clock.Advance(testStatsInterval)
	waitTimers(t, b.clock, recorders)
}

// minute reads a tenant's statistics of the minute starting at start.
func (b *statsBundle) minute(t *testing.T, tenant uuid.UUID, start time.Time) *model.MinuteStats {
	t.Helper()
	got, err := b.db.TaskStatsBetween(context.Background(), tenant, start, start.Add(time.Minute))
	require.NoError(t, err)
	if len(got) == 0 {
		return &model.MinuteStats{Start: start}
	}
	require.Len(t, got, 1)
	return &got[0]
}

func setupStats(t *testing.T) *statsBundle {
	t.Helper()
	db := storetest.DB(t)
	start := time.Date(2026, 11, 24, 10, 0, 10, 0, time.UTC)
	return &statsBundle{db: db, clock: clock.NewFake(start), store: &failingStats{StatsStore: db}}
}

// TestStatsRecorderAddsUp counts attempts of two tenants over two minutes on
// two nodes: each flush writes what was counted since the last, nodes and
// flushes add to the same minutes, and nothing is written twice.
func TestStatsRecorderAddsUp(t *testing.T) {
	t.Parallel()
	b := setupStats(t)
	acme, globex := uuid.New(), uuid.New()
	m0 := b.clock.Now().Truncate(time.Minute)
	m1 := m0.Add(time.Minute)
	one, _ := b.run(t)
	two, _ := b.run(t)

	one.Add(acme, m0.Add(10*time.Second), model.StatusDelivered, time.Millisecond)
	one.Add(acme, m0.Add(20*time.Second), model.StatusRetrying, 3*time.Millisecond)
	one.Add(globex, m0.Add(30*time.Second), model.StatusDead, time.Second)
	two.Add(acme, m0.Add(40*time.Second), model.StatusDelivered, time.Millisecond)
	b.tick(t, 2)

	got := b.minute(t, acme, m0)
	require.EqualValues(t, 2, got.Delivered)
	require.EqualValues(t, 1, got.Retried)
	require.EqualValues(t, 0, got.Dead, "globex's dead attempt is globex's")
	require.EqualValues(t, 2, got.Lateness[model.LatenessBucket(time.Millisecond)])
	require.EqualValues(t, 1, got.Lateness[model.LatenessBucket(3*time.Millisecond)])
	require.EqualValues(t, 1, b.minute(t, globex, m0).Dead)
	require.Zero(t, one.pendingFor(acme, m0), "written, so forgotten")

	// A second flush to the same minute adds to it; the next minute starts
	// a row of its own.
	one.Add(acme, m0.Add(50*time.Second), model.StatusDelivered, 100*time.Millisecond)
	two.Add(acme, m0.Add(55*time.Second), model.StatusDead, 100*time.Millisecond)
	one.Add(acme, m1.Add(time.Second), model.StatusDelivered, 0)
	b.tick(t, 2)
	got = b.minute(t, acme, m0)
	require.EqualValues(t, 3, got.Delivered)
	require.EqualValues(t, 1, got.Retried)
	require.EqualValues(t, 1, got.Dead)
	require.EqualValues(t, 5, got.Lateness.Count())
	require.EqualValues(t, 2, got.Lateness[model.LatenessBucket(100*time.Millisecond)])
	require.EqualValues(t, 1, b.minute(t, acme, m1).Attempts())

	// Nothing new: nothing written.
	writes := b.store.writes.Load()
	b.tick(t, 2)
	require.Equal(t, writes, b.store.writes.Load())
}

// TestStatsRecorderKeepsFailedWrites: counts whose write failed are written
// with the next, once.
func TestStatsRecorderKeepsFailedWrites(t *testing.T) {
	t.Parallel()
	b := setupStats(t)
	acme := uuid.New()
	m0 := b.clock.Now().Truncate(time.Minute)
	r, _ := b.run(t)

	b.store.fail.Store(1)
	r.Add(acme, m0, model.StatusDelivered, 0)
	b.tick(t, 1)
	require.Zero(t, b.minute(t, acme, m0).Attempts())
	require.EqualValues(t, 1, r.pendingFor(acme, m0).Delivered, "kept for the next write")

	r.Add(acme, m0, model.StatusDelivered, 0)
	b.tick(t, 1)
	require.EqualValues(t, 2, b.minute(t, acme, m0).Delivered)
	require.Zero(t, r.pendingFor(acme, m0))
}

// TestStatsRecorderWritesAtStop: the attempts counted since the last flush
// are written when the recorder stops, without waiting for the interval.
func TestStatsRecorderWritesAtStop(t *testing.T) {
	t.Parallel()
	b := setupStats(t)
	acme := uuid.New()
	m0 := b.clock.Now().Truncate(time.Minute)
	r, stop := b.run(t)
	r.Add(acme, m0, model.StatusDead, time.Minute)
	stop()
	got := b.minute(t, acme, m0)
	require.EqualValues(t, 1, got.Dead)
	require.EqualValues(t, 1, got.Lateness[model.LatenessBucket(time.Minute)])
}

// TestStatsRecorderPurges: the leader deletes statistics older than two
// days, once a minute; a node that is not the leader deletes nothing.
func TestStatsRecorderPurges(t *testing.T) {
	t.Parallel()
	b := setupStats(t)
	acme := uuid.New()
	now := b.clock.Now().Truncate(time.Minute)
	old, kept := now.Add(-StatsKeep-time.Minute), now.Add(-StatsKeep+2*time.Minute)
	row := func(at time.Time) model.TenantMinuteStats {
		r := model.TenantMinuteStats{TenantID: acme}
		r.Start = at
		r.Add(model.StatusDelivered, 0)
		return r
	}
	require.NoError(t, b.db.AddTaskStats(context.Background(), []model.TenantMinuteStats{row(old), row(kept)}))
	b.run(t)

	b.tick(t, 1)
	require.EqualValues(t, 1, b.minute(t, acme, old).Attempts(), "not the leader")

	b.leader.Store(true)
	b.tick(t, 1)
	require.Zero(t, b.minute(t, acme, old).Attempts())
	require.EqualValues(t, 1, b.minute(t, acme, kept).Attempts())

	// kept is past two days three minutes on; the next purge is a minute
	// after the last.
	for range 3 * time.Minute / testStatsInterval {
		b.tick(t, 1)
	}
	require.Zero(t, b.minute(t, acme, kept).Attempts())
}

// TestStatsRecorderAddAllocatesNothing: counting an attempt costs a lock and
// a map lookup; only a tenant's first attempt of a minute allocates.
func TestStatsRecorderAddAllocatesNothing(t *testing.T) {
	// Not parallel: AllocsPerRun counts the whole process's allocations.
	r := NewStatsRecorder(StatsConfig{})
	tenant, at := uuid.New(), time.Now()
	r.Add(tenant, at, model.StatusDelivered, time.Millisecond)
	allocs := testing.AllocsPerRun(1000, func() { r.Add(tenant, at, model.StatusRetrying, 3*time.Millisecond) })
	require.Zero(t, allocs)
	got := r.pendingFor(tenant, at)
	require.EqualValues(t, 1, got.Delivered)
	require.Greater(t, got.Retried, int64(1000))
}
