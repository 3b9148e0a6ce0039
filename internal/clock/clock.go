// Package clock lets code read time and wait for it through an interface, so
// that tests can substitute a deterministic clock for the real one.
package clock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once d has
	// elapsed. A d <= 0 makes it fire at once.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that code under test needs. Stop and Reset
// have the semantics of *time.Timer since Go 1.23: after either returns, no
// value sent before the call can be received from C.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped an armed timer.
	Stop() bool
	// Reset rearms the timer to fire after d. It reports whether the timer
	// was armed before the call.
	Reset(d time.Duration) bool
}

// Every calls fn every interval, as told by c, until ctx ends: the first time
// an interval from now, each next one an interval after the last call
// returned, so that a slow call never piles calls up.
func Every(ctx context.Context, c Clock, interval time.Duration, fn func()) {
	t := c.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		fn()
		t.Reset(interval)
	}
}

// Real returns the Clock of the operating system. Its Now keeps the monotonic
// clock reading, so durations measured between two readings are immune to
// wall-clock steps; callers should not strip it (for example with UTC) before
// comparing or subtracting.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a Clock whose time moves only when a test calls Advance or Set.
// Timers fire synchronously inside those calls, by a non-blocking send on a
// channel with a buffer of one, so a test never has to sleep: it arranges for
// the code under test to be waiting (see WaitForTimers), moves the time, and
// then waits for the effect on a channel of its own.
//
// The zero value is a usable clock at the zero time; a Fake is safe for
// concurrent use.
type Fake struct {
	mu    sync.Mutex
	now   time.Time
	armed map[*fakeTimer]struct{}
	// armedGrew is closed, and forgotten, whenever a timer is armed; it
	// exists only while some WaitForTimers call waits on it.
	armedGrew chan struct{}
}

// NewFake returns a Fake whose time starts at start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start}
}

// Now returns the fake current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a Timer that fires once the fake time has moved d past
// the current fake time. A d <= 0 fires it before NewTimer returns.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the fake time by d and fires, in deadline order, every armed
// timer whose deadline it reaches. Each fired timer receives the new time.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the fake time to t, backwards if t is earlier, and fires every
// armed timer whose deadline is not after t, as Advance does.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

// WaitForTimers blocks until at least n timers are armed (created or reset
// and neither fired nor stopped since), or ctx is done. Tests call it before
// Advance so that the time moves only once the code under test waits on it.
func (f *Fake) WaitForTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.armed) >= n {
			f.mu.Unlock()
			return nil
		}
		if f.armedGrew == nil {
			f.armedGrew = make(chan struct{})
		}
		grew := f.armedGrew
		f.mu.Unlock()

		select {
		case <-grew:
		case <-ctx.Done():
			return fmt.Errorf("clock: waiting for %d armed timers: %w", n, ctx.Err())
		}
	}
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	var due []*fakeTimer
	for timer := range f.armed {
		if !timer.when.After(t) {
			due = append(due, timer)
		}
	}
	// Map order is random; firing by deadline keeps runs reproducible.
	slices.SortFunc(due, func(a, b *fakeTimer) int { return a.when.Compare(b.when) })
	for _, timer := range due {
		timer.fireLocked()
	}
}

func (f *Fake) armLocked(t *fakeTimer) {
	if f.armed == nil {
		f.armed = make(map[*fakeTimer]struct{})
	}
	f.armed[t] = struct{}{}
	if f.armedGrew != nil {
		close(f.armedGrew)
		f.armedGrew = nil
	}
}

type fakeTimer struct {
	f    *Fake
	c    chan time.Time
	when time.Time // guarded by f.mu
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, armed := t.f.armed[t]
	delete(t.f.armed, t)
	t.drain()
	return armed
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, armed := t.f.armed[t]
	t.drain()
	t.when = t.f.now.Add(d)
	t.f.armLocked(t)
	if d <= 0 {
		t.fireLocked()
	}
	return armed
}

func (t *fakeTimer) fireLocked() {
	delete(t.f.armed, t)
	select {
	case t.c <- t.f.now:
	default:
		// Unreachable while Stop and Reset drain the channel: a timer fires
		// at most once per arming. Dropping is what a real timer would do.
	}
}

// drain discards a value fired but not yet received, so that Stop and Reset
// leave no stale tick behind, as *time.Timer does since Go 1.23.
func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}
