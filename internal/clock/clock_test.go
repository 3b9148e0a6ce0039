package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// received reports whether c holds a value now, and the value.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestClockRealKeepsMonotonicReading(t *testing.T) {
	t.Parallel()
	now := clock.Real().Now()
	// Round(0) strips the monotonic reading; a reading that has one differs.
	require.NotEqual(t, now.Round(0), now)
}

func TestClockRealTimerFires(t *testing.T) {
	t.Parallel()
	c := clock.Real()
	before := c.Now()
	timer := c.NewTimer(time.Millisecond)
	select {
	case <-timer.C():
	case <-time.After(10 * time.Second):
		t.Fatal("real timer did not fire")
	}
	require.GreaterOrEqual(t, c.Now().Sub(before), time.Millisecond)
	require.False(t, timer.Stop(), "a fired timer is not armed")
	require.False(t, timer.Reset(time.Hour))
	require.True(t, timer.Stop())
}

func TestClockFakeAdvanceFiresDueTimersOnly(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(start)
	require.Equal(t, start, f.Now())

	soon := f.NewTimer(time.Second)
	late := f.NewTimer(time.Minute)

	f.Advance(time.Second - time.Nanosecond)
	_, ok := received(soon.C())
	require.False(t, ok, "fired before its deadline")

	f.Advance(time.Nanosecond)
	v, ok := received(soon.C())
	require.True(t, ok, "did not fire at its deadline")
	require.Equal(t, start.Add(time.Second), v)
	require.Equal(t, start.Add(time.Second), f.Now())
	_, ok = received(late.C())
	require.False(t, ok)

	f.Set(start.Add(time.Hour))
	v, ok = received(late.C())
	require.True(t, ok)
	require.Equal(t, start.Add(time.Hour), v, "a timer receives the time it was fired at")
}

func TestClockFakeStopAndReset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, f *clock.Fake, timer clock.Timer)
	}{
		{"stop armed", func(t *testing.T, f *clock.Fake, timer clock.Timer) {
			require.True(t, timer.Stop())
			require.False(t, timer.Stop())
			f.Advance(time.Hour)
			_, ok := received(timer.C())
			require.False(t, ok)
		}},
		{"stop drains a fired value", func(t *testing.T, f *clock.Fake, timer clock.Timer) {
			f.Advance(time.Second)
			require.False(t, timer.Stop(), "a fired timer is not armed")
			_, ok := received(timer.C())
			require.False(t, ok, "a stale value survived Stop")
		}},
		{"reset armed moves the deadline", func(t *testing.T, f *clock.Fake, timer clock.Timer) {
			require.True(t, timer.Reset(3*time.Second))
			f.Advance(2 * time.Second)
			_, ok := received(timer.C())
			require.False(t, ok)
			f.Advance(time.Second)
			_, ok = received(timer.C())
			require.True(t, ok)
		}},
		{"reset drains a fired value", func(t *testing.T, f *clock.Fake, timer clock.Timer) {
			f.Advance(time.Second)
			require.False(t, timer.Reset(time.Second))
			_, ok := received(timer.C())
			require.False(t, ok, "a stale value survived Reset")
			f.Advance(time.Second)
			_, ok = received(timer.C())
			require.True(t, ok)
		}},
		{"reset to zero fires at once", func(t *testing.T, f *clock.Fake, timer clock.Timer) {
			require.True(t, timer.Reset(0))
			v, ok := received(timer.C())
			require.True(t, ok)
			require.Equal(t, f.Now(), v)
		}},
		{"set backwards fires nothing", func(t *testing.T, f *clock.Fake, timer clock.Timer) {
			f.Set(start.Add(-time.Hour))
			_, ok := received(timer.C())
			require.False(t, ok)
			f.Set(start.Add(time.Second))
			_, ok = received(timer.C())
			require.True(t, ok)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := clock.NewFake(start)
			tt.run(t, f, f.NewTimer(time.Second))
		})
	}
}

func TestClockFakeNewTimerNonPositiveFiresAtOnce(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(start)
	for _, d := range []time.Duration{0, -time.Second} {
		v, ok := received(f.NewTimer(d).C())
		require.True(t, ok, "d=%v", d)
		require.Equal(t, start, v)
	}
	require.NoError(t, f.WaitForTimers(t.Context(), 0))
}

func TestClockFakeWaitForTimers(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(start)

	done := make(chan error, 1)
	go func() { done <- f.WaitForTimers(t.Context(), 2) }()

	first := f.NewTimer(time.Second)
	f.NewTimer(time.Second)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForTimers did not return once two timers were armed")
	}

	// Fired and stopped timers no longer count.
	f.Advance(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, f.WaitForTimers(ctx, 1), context.DeadlineExceeded)

	first.Reset(time.Second)
	require.NoError(t, f.WaitForTimers(t.Context(), 1))
	first.Stop()
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, f.WaitForTimers(ctx, 1), context.Canceled)
}

func TestClockFakeZeroValue(t *testing.T) {
	t.Parallel()
	var f clock.Fake
	require.True(t, f.Now().IsZero())
	timer := f.NewTimer(time.Second)
	require.NoError(t, f.WaitForTimers(t.Context(), 1))
	f.Advance(time.Second)
	_, ok := received(timer.C())
	require.True(t, ok)
}

// TestEvery: the call comes an interval after the start and after each call,
// never before, and none comes once ctx ends.
func TestEvery(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(start)
	ctx, cancel := context.WithCancel(t.Context())
	calls := make(chan time.Time)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		clock.Every(ctx, f, time.Second, func() { calls <- f.Now() })
	}()

	for i := 1; i <= 3; i++ {
		require.NoError(t, f.WaitForTimers(t.Context(), 1))
		f.Advance(999 * time.Millisecond)
		select {
		case at := <-calls:
			t.Fatalf("called at %s, before the interval", at)
		default:
		}
		f.Advance(time.Millisecond)
		select {
		case at := <-calls:
			require.Equal(t, start.Add(time.Duration(i)*time.Second), at)
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d did not come", i)
		}
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return once ctx ended")
	}
}
