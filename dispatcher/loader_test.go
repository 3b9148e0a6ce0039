package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

type loaderBundle struct {
	db     *store.DB
	clock  *clock.Fake
	loader *loader
	tenant uuid.UUID
	// armed receives what the loader feeds the wheel.
	armed chan dueAt

	mu         sync.Mutex
	partitions []int16
	pending    map[uuid.UUID]bool
}

// setupLoader builds a loader on a fresh database, owning every partition,
// with a 30s window.
func setupLoader(t *testing.T) *loaderBundle {
	t.Helper()
	db := storetest.DB(t)
	b := &loaderBundle{
		db: db, clock: clock.NewFake(time.Now()), armed: make(chan dueAt, 64),
		partitions: allPartitions(), pending: map[uuid.UUID]bool{},
	}
	b.tenant = storetest.CreateTenant(t, db, model.Limits{})
	b.loader = newLoader(loaderConfig{
		Store: db, Clock: b.clock, Logger: quietLogger(), Metrics: testMetrics(t),
		Lookahead: 30 * time.Second, LoadInterval: time.Second, SweepInterval: 5 * time.Second,
		Partitions: func() []int16 { b.mu.Lock(); defer b.mu.Unlock(); return b.partitions },
		Arm:        func(id uuid.UUID, at time.Time) { b.armed <- dueAt{id, at} },
		Pending:    func(id uuid.UUID) bool { b.mu.Lock(); defer b.mu.Unlock(); return b.pending[id] },
	})
	return b
}

func (b *loaderBundle) task(t *testing.T, due time.Duration) *model.Task {
	t.Helper()
	return storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", b.clock.Now().Add(due))
}

// armedIDs drains what was armed so far.
func (b *loaderBundle) armedIDs() map[uuid.UUID]time.Time {
	out := map[uuid.UUID]time.Time{}
	for {
		select {
		case a := <-b.armed:
			out[a.id] = a.at
		default:
			return out
		}
	}
}

// TestLoaderLoadsTheWindow: a pass arms what falls due within Lookahead,
// overdue included, widens the window announcements go by, and the next pass
// reads only the slice of time the clock has uncovered since.
func TestLoaderLoadsTheWindow(t *testing.T) {
	t.Parallel()
	b := setupLoader(t)
	ctx := context.Background()
	overdue, soon, later := b.task(t, -time.Minute), b.task(t, 10*time.Second), b.task(t, 80*time.Second)

	cursor, ok := b.loader.load(ctx, model.DueCursor{})
	require.True(t, ok)
	armed := b.armedIDs()
	require.Len(t, armed, 2)
	require.True(t, overdue.RunAt.Equal(armed[overdue.ID]))
	require.True(t, soon.RunAt.Equal(armed[soon.ID]))
	require.True(t, b.loader.window.covers(b.clock.Now().Add(30*time.Second)))
	require.False(t, b.loader.window.covers(b.clock.Now().Add(31*time.Second)))

	// Stored inside the slice already read: announced, not loaded again.
	inside := b.task(t, 20*time.Second)
	b.clock.Advance(time.Minute)
	cursor, ok = b.loader.load(ctx, cursor)
	require.True(t, ok)
	armed = b.armedIDs()
	require.Len(t, armed, 1)
	require.Contains(t, armed, later.ID)

	// A rescan reads the whole window again.
	_, ok = b.loader.load(ctx, model.DueCursor{})
	require.True(t, ok)
	armed = b.armedIDs()
	require.Len(t, armed, 4)
	require.Contains(t, armed, inside.ID)
	_ = cursor
}

// TestLoaderTakesOverPartitions: partitions gained are read from the
// beginning of time up to the window already loaded; when the loader is
// behind on takeovers, it is asked to read everything instead.
func TestLoaderTakesOverPartitions(t *testing.T) {
	t.Parallel()
	b := setupLoader(t)
	b.partitions = nil // owns nothing yet
	ctx := context.Background()
	overdue, soon, beyond := b.task(t, -time.Hour), b.task(t, 10*time.Second), b.task(t, time.Minute)
	_, ok := b.loader.load(ctx, model.DueCursor{})
	require.True(t, ok)
	require.Empty(t, b.armedIDs())

	b.loader.takeOver(allPartitions())
	b.loader.catchUp(ctx, receive(t, b.loader.gained))
	armed := b.armedIDs()
	require.Len(t, armed, 2)
	require.Contains(t, armed, overdue.ID)
	require.Contains(t, armed, soon.ID)
	require.NotContains(t, armed, beyond.ID)

	for range cap(b.loader.gained) {
		b.loader.takeOver([]int16{1})
	}
	require.Empty(t, b.loader.rescan)
	b.loader.takeOver([]int16{2})
	receive(t, b.loader.rescan)
}

// TestLoaderSweep: tasks overdue by more than a sweep interval that are
// neither in the wheel nor in flight are armed; the others are left alone.
func TestLoaderSweep(t *testing.T) {
	t.Parallel()
	b := setupLoader(t)
	stray, pending, recent := b.task(t, -time.Minute), b.task(t, -time.Minute), b.task(t, -time.Second)
	b.pending[pending.ID] = true

	b.loader.sweep(context.Background())
	armed := b.armedIDs()
	require.Len(t, armed, 1)
	require.Contains(t, armed, stray.ID)
	require.NotContains(t, armed, recent.ID)
	require.Equal(t, 1.0, counterValue(t, b.loader.cfg.Metrics.swept))
}
