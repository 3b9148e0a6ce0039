package wheel

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// timersStart is whole milliseconds, so ticks and instants line up in tests.
var timersStart = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// timersWait bounds every wait for the driver; it is a failure deadline,
// never a delay that a passing test sits through.
const timersWait = 10 * time.Second

type timersFired struct {
	id  uuid.UUID
	at  time.Time // as passed to Fire
	now time.Time // the clock when Fire was called
}

// startTimers runs Timers on clk until the test ends and returns the channel
// that Fire reports to.
func startTimers(t *testing.T, clk clock.Clock, onFire func(*Timers, uuid.UUID)) (*Timers, <-chan timersFired) {
	t.Helper()
	fired := make(chan timersFired, 10_000)
	var tm *Timers
	tm = NewTimers(TimersConfig{
		Clock: clk,
		Fire: func(id uuid.UUID, at time.Time) {
			fired <- timersFired{id: id, at: at, now: clk.Now()}
			if onFire != nil {
				onFire(tm, id)
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(timersWait):
			t.Error("Run did not return after its context was canceled")
		}
	})
	return tm, fired
}

func waitFired(t *testing.T, fired <-chan timersFired) timersFired {
	t.Helper()
	select {
	case f := <-fired:
		return f
	case <-time.After(timersWait):
		t.Fatal("no timer fired")
		return timersFired{}
	}
}

func requireNoneFired(t *testing.T, fired <-chan timersFired) {
	t.Helper()
	select {
	case f := <-fired:
		t.Fatalf("timer %s fired at %s", f.id, f.now)
	default:
	}
}

// settle returns once the driver sleeps on the fake clock: after a time move
// that fired its timer, that is once it has fired what was due and rearmed.
func settle(t *testing.T, clk *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timersWait)
	defer cancel()
	require.NoError(t, clk.WaitForTimers(ctx, 1))
}

func TestTimersFireAtTheInstantNotBefore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		at     time.Duration // after timersStart
		fireAt time.Duration // the first whole millisecond at or after at
	}{
		{"whole millisecond", 5 * time.Second, 5 * time.Second},
		{"within a millisecond", 5*time.Second + 300*time.Microsecond, 5*time.Second + time.Millisecond},
		{"a nanosecond past a millisecond", 2*time.Second + 1, 2*time.Second + time.Millisecond},
		{"one millisecond", time.Millisecond, time.Millisecond},
		{"ten minutes, through cascades", 10*time.Minute + 7*time.Millisecond, 10*time.Minute + 7*time.Millisecond},
		{"three days, past the longest sleep", 72*time.Hour + 1, 72*time.Hour + time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(timersStart)
			tm, fired := startTimers(t, clk, nil)
			id := uuid.New()
			at := timersStart.Add(tt.at)
			fireAt := timersStart.Add(tt.fireAt)

			tm.Schedule(id, at)
			settle(t, clk)
			clk.Set(fireAt.Add(-time.Nanosecond))
			settle(t, clk)
			requireNoneFired(t, fired)
			require.True(t, tm.Contains(id))

			clk.Set(fireAt)
			f := waitFired(t, fired)
			require.Equal(t, id, f.id)
			require.True(t, f.at.Equal(fireAt), "Fire got at %s, want %s", f.at, fireAt)
			require.True(t, f.now.Equal(fireAt), "fired at %s, want %s", f.now, fireAt)
			require.False(t, f.now.Before(at), "fired early")
			require.False(t, tm.Contains(id))
			require.Zero(t, tm.Len())
		})
	}
}

func TestTimersEarlierScheduleWakesDriver(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(timersStart)
	tm, fired := startTimers(t, clk, nil)
	late, early := uuid.New(), uuid.New()

	tm.Schedule(late, timersStart.Add(time.Hour))
	settle(t, clk) // the driver sleeps for the hour (or its longest sleep)
	tm.Schedule(early, timersStart.Add(time.Second))
	// Had the driver slept on, its timer would not fire at one second and
	// early would wait for the next wake-up: a minute away at least.
	clk.Set(timersStart.Add(time.Second))
	f := waitFired(t, fired)
	require.Equal(t, early, f.id)
	require.True(t, f.now.Equal(timersStart.Add(time.Second)))
	require.True(t, tm.Contains(late))
}

func TestTimersCancelPreventsFire(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(timersStart)
	tm, fired := startTimers(t, clk, nil)
	canceled, kept, barrier := uuid.New(), uuid.New(), uuid.New()

	tm.Schedule(canceled, timersStart.Add(time.Second))
	tm.Schedule(kept, timersStart.Add(time.Second))
	tm.Schedule(barrier, timersStart.Add(2*time.Second))
	settle(t, clk)
	require.True(t, tm.Cancel(canceled))
	require.False(t, tm.Cancel(canceled))
	require.False(t, tm.Cancel(uuid.New()))

	clk.Set(timersStart.Add(2 * time.Second))
	// Fire calls come in time order, so once the barrier has fired anything
	// due at one second has too.
	require.Equal(t, kept, waitFired(t, fired).id)
	require.Equal(t, barrier, waitFired(t, fired).id)
	requireNoneFired(t, fired)
}

func TestTimersRescheduleMoves(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(timersStart)
	tm, fired := startTimers(t, clk, nil)
	moved, barrier := uuid.New(), uuid.New()

	tm.Schedule(moved, timersStart.Add(time.Second))
	tm.Schedule(moved, timersStart.Add(5*time.Second))
	tm.Schedule(barrier, timersStart.Add(2*time.Second))
	require.Equal(t, 2, tm.Len())
	settle(t, clk)
	clk.Set(timersStart.Add(2 * time.Second))
	require.Equal(t, barrier, waitFired(t, fired).id)
	requireNoneFired(t, fired)

	settle(t, clk)
	clk.Set(timersStart.Add(5 * time.Second))
	f := waitFired(t, fired)
	require.Equal(t, moved, f.id)
	require.True(t, f.now.Equal(timersStart.Add(5*time.Second)))
}

func TestTimersPastDueFiresAtOnce(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(timersStart)
	tm, fired := startTimers(t, clk, nil)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	ats := []time.Time{timersStart.Add(-time.Second), timersStart.Add(-time.Hour), timersStart}

	for i, id := range ids {
		tm.Schedule(id, ats[i])
	}
	// No time moves: they were due when scheduled. Fire may see them in one
	// batch or several, but each batch in time order.
	got := map[uuid.UUID]time.Time{}
	for range ids {
		f := waitFired(t, fired)
		require.True(t, f.now.Equal(timersStart))
		got[f.id] = f.at
	}
	for i, id := range ids {
		require.True(t, got[id].Equal(ats[i]), "at of %d", i)
	}
}

func TestTimersBurstFiresInOrder(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(timersStart)
	var (
		mu          sync.Mutex
		rescheduled = map[uuid.UUID]bool{}
	)
	// Fire may call back into Timers: the lock is not held around it.
	tm, fired := startTimers(t, clk, func(tm *Timers, id uuid.UUID) {
		mu.Lock()
		defer mu.Unlock()
		if !rescheduled[id] {
			rescheduled[id] = true
			tm.Schedule(id, timersStart.Add(time.Hour))
		}
		tm.Cancel(uuid.New())
	})
	const n = 3 * timersBatch
	rng := rand.New(rand.NewPCG(3, 4))
	for range n {
		tm.Schedule(uuid.New(), timersStart.Add(time.Duration(rng.Int64N(int64(time.Minute)))))
	}
	settle(t, clk)
	clk.Set(timersStart.Add(time.Minute))
	var last time.Time
	for range n {
		f := waitFired(t, fired)
		require.False(t, f.at.Before(last), "out of order")
		last = f.at
	}
	require.Eventually(t, func() bool { return tm.Len() == n }, timersWait, time.Millisecond,
		"each fired timer rescheduled itself")
}

func TestTimersRunReturnsOnCancel(t *testing.T) {
	t.Parallel()
	for _, pending := range []bool{false, true} {
		clk := clock.NewFake(timersStart)
		tm := NewTimers(TimersConfig{Clock: clk, Fire: func(uuid.UUID, time.Time) {}})
		if pending {
			tm.Schedule(uuid.New(), timersStart.Add(time.Hour))
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tm.Run(ctx) }()
		if pending {
			settle(t, clk)
		}
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(timersWait):
			t.Fatalf("Run did not return (pending=%v)", pending)
		}
		if pending {
			require.Equal(t, 1, tm.Len(), "pending timers stay")
		}
	}
}

func TestTimersConfig(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { NewTimers(TimersConfig{}) })
	tm := NewTimers(TimersConfig{Fire: func(uuid.UUID, time.Time) {}})
	require.NotNil(t, tm.clock, "defaults to the real clock")
	require.Zero(t, tm.Len())
}

func TestTimersCeilMs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		at   time.Time
		want int64
	}{
		{time.UnixMilli(1000), 1000},
		{time.UnixMilli(1000).Add(1), 1001},
		{time.UnixMilli(1000).Add(-1), 1000},
		{time.UnixMilli(-1000), -1000},
		{time.UnixMilli(-1000).Add(1), -999},
		{time.UnixMilli(-1000).Add(-1), -1000},
	}
	for _, tt := range tests {
		got := ceilMs(tt.at)
		require.Equal(t, tt.want, got, "%s", tt.at)
		require.False(t, time.UnixMilli(got).Before(tt.at))
	}
}

// TestTimersRealClock checks the driver against the real clock: 1,000 timers
// due within 200 ms each fire exactly once, none early.
func TestTimersRealClock(t *testing.T) {
	t.Parallel()
	tm, fired := startTimers(t, clock.Real(), nil)
	const n = 1000
	rng := rand.New(rand.NewPCG(5, 6))
	// Wall-clock instants, as the store hands them over: the wheel ticks on
	// the wall clock, so that is what "not early" is measured on.
	base := time.Now().Round(0)
	ats := make(map[uuid.UUID]time.Time, n)
	for range n {
		id := uuid.New()
		ats[id] = base.Add(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
		tm.Schedule(id, ats[id])
	}

	seen := make(map[uuid.UUID]bool, n)
	var maxLate time.Duration
	for range n {
		f := waitFired(t, fired)
		at, ok := ats[f.id]
		require.True(t, ok, "unknown timer fired")
		require.False(t, seen[f.id], "fired twice")
		seen[f.id] = true
		require.False(t, f.now.Round(0).Before(at), "fired %s early", at.Sub(f.now.Round(0)))
		maxLate = max(maxLate, f.now.Round(0).Sub(at))
	}
	t.Logf("latest of %d timers: %s after its time", n, maxLate)

	// A last timer flushes out any duplicate still on its way.
	barrier := uuid.New()
	tm.Schedule(barrier, time.Now())
	require.Equal(t, barrier, waitFired(t, fired).id)
	requireNoneFired(t, fired)
	require.Zero(t, tm.Len())
}

func BenchmarkTimersScheduleCancel(b *testing.B) {
	offsets := benchOffsets()
	clk := clock.NewFake(time.UnixMilli(wheelT0))
	tm := NewTimers(TimersConfig{Clock: clk, Fire: func(uuid.UUID, time.Time) {}})
	for i := range uint64(benchResident) {
		tm.Schedule(benchID(i), time.UnixMilli(wheelT0+offsets[i%uint64(len(offsets))]))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		id := benchID(benchResident + i)
		tm.Schedule(id, time.UnixMilli(wheelT0+offsets[i%uint64(len(offsets))]))
		tm.Cancel(id)
	}
}

// TestTimersContainsUntilHandedToFire: timers due together come out of the
// wheel at once and are handed to Fire one by one; while Fire holds up the
// first, the others are still found by Contains, and each is gone once
// handed over.
func TestTimersContainsUntilHandedToFire(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(timersStart)
	release := make(chan struct{})
	var first sync.Once
	tm, fired := startTimers(t, clk, func(*Timers, uuid.UUID) {
		first.Do(func() { <-release })
	})
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for _, id := range ids {
		tm.Schedule(id, timersStart)
	}
	held := waitFired(t, fired)
	for _, id := range ids {
		require.True(t, tm.Contains(id), "timer %s, due and not yet handed on", id)
	}
	require.Zero(t, tm.Len(), "out of the wheel")
	close(release)
	for range ids[1:] {
		waitFired(t, fired)
	}
	for _, id := range ids {
		require.Eventually(t, func() bool { return !tm.Contains(id) }, timersWait, time.Millisecond, "timer %s handed on", id)
	}
	require.Contains(t, ids, held.id)
}
