package wheel

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
)

const (
	// timersBatch bounds how many due timers the driver collects under the
	// lock before it releases it to call Fire, so that a burst of due timers
	// does not stall Schedule and Cancel.
	timersBatch = 1024
	// timersMaxSleep bounds one sleep of the driver. Timer ticks are wall-clock
	// milliseconds while the sleep runs on the monotonic clock, so a step of
	// the wall clock would otherwise delay a far timer by the step.
	timersMaxSleep = time.Minute
)

// TimersConfig configures NewTimers.
type TimersConfig struct {
	// Clock supplies the time and the driver's sleeps. Default: clock.Real().
	Clock clock.Clock
	// Fire is called once for each timer that comes due, with the time it
	// was scheduled for rounded up to the millisecond. Required. It is called
	// from the goroutine of Run, never while Timers holds its lock, so it may
	// call Schedule and Cancel; it may block briefly, which delays the timers
	// due after it.
	Fire func(id uuid.UUID, at time.Time)
}

// Timers fires callbacks at scheduled instants. It is the concurrent driver of
// a Wheel: one goroutine (Run) sleeps until the earliest deadline and fires
// what is due, while Schedule and Cancel, called from any goroutine, cost a
// map operation and a list splice under a mutex.
//
// A timer never fires early: Fire is called only once Clock.Now() has reached
// the scheduled time.
type Timers struct {
	clock clock.Clock
	fire  func(uuid.UUID, time.Time)
	// wake holds at most one pending request for the driver to recompute its
	// sleep, so Schedule never blocks on it.
	wake chan struct{}

	mu    sync.Mutex
	wheel *Wheel
	// handing holds the timers taken out of the wheel as due and not yet
	// handed to Fire: a whole tick comes out at once, and its Fire calls
	// may wait on a consumer for a while (100,000 tasks due at one
	// instant wait for the claimers), during which Contains must still
	// find them, or a sweep would take them for lost and arm them again.
	handing map[uuid.UUID]struct{}
	// sleepUntil is the tick the driver will next wake at (math.MaxInt64 for
	// none); a Schedule before it must wake the driver.
	sleepUntil int64
}

// NewTimers returns Timers with no timer scheduled. It panics if cfg.Fire is
// nil, a programming error.
func NewTimers(cfg TimersConfig) *Timers {
	if cfg.Fire == nil {
		panic("wheel: TimersConfig.Fire is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Timers{
		clock:      cfg.Clock,
		fire:       cfg.Fire,
		wake:       make(chan struct{}, 1),
		wheel:      NewWheel(cfg.Clock.Now().UnixMilli()),
		handing:    make(map[uuid.UUID]struct{}),
		sleepUntil: math.MaxInt64,
	}
}

// ceilMs returns the first Unix millisecond not before at, so that a timer
// filed under it never fires before at.
func ceilMs(at time.Time) int64 {
	ms := at.UnixMilli() // rounds down, negative times included
	if at.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// Schedule sets the timer id to fire at at, replacing its previous time if it
// is pending. A time already past fires at once.
func (t *Timers) Schedule(id uuid.UUID, at time.Time) {
	ms := ceilMs(at)
	t.mu.Lock()
	t.wheel.Add(id, ms)
	wake := ms < t.sleepUntil
	if wake {
		t.sleepUntil = ms
	}
	t.mu.Unlock()
	if wake {
		select {
		case t.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Cancel stops the timer id and reports whether it was pending. A timer whose
// Fire call has begun, or is about to, is no longer pending.
func (t *Timers) Cancel(id uuid.UUID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The driver may now wake for nothing; it then sleeps again, which is
	// cheaper than waking it on every cancel.
	return t.wheel.Remove(id)
}

// Contains reports whether the timer id is pending, or came due and has not
// been handed to Fire yet.
func (t *Timers) Contains(id uuid.UUID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.handing[id]; ok {
		return true
	}
	return t.wheel.Contains(id)
}

// Len returns the number of pending timers.
func (t *Timers) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wheel.Len()
}

// Run fires timers as they come due until ctx is done, then returns nil. It
// checks ctx before each Fire call, so that a Fire blocked on a consumer that
// stopped with ctx cannot hold it up; timers that came due but were not yet
// handed to Fire by then are dropped, the store being the durable record;
// pending timers stay and fire if Run is called again. Run must not be called
// again before it returns.
func (t *Timers) Run(ctx context.Context) error {
	var (
		sleep clock.Timer
		due   []firedTimer
	)
	defer func() {
		if sleep != nil {
			sleep.Stop()
		}
	}()
	for {
		var (
			next int64
			more bool
		)
		due, next, more = t.collect(due[:0])
		for i, d := range due {
			if ctx.Err() != nil {
				t.mu.Lock()
				for _, dropped := range due[i:] {
					delete(t.handing, dropped.id)
				}
				t.mu.Unlock()
				return nil
			}
			t.fire(d.id, time.UnixMilli(d.at).UTC())
			// Fire has it now (a timer it rescheduled is in the wheel again).
			t.mu.Lock()
			delete(t.handing, d.id)
			t.mu.Unlock()
		}
		clear(due)
		if more {
			continue
		}

		var timerC <-chan time.Time
		if next != math.MaxInt64 {
			d := time.UnixMilli(next).Sub(t.clock.Now())
			if d <= 0 {
				continue // came due while firing
			}
			d = min(d, timersMaxSleep)
			if sleep == nil {
				sleep = t.clock.NewTimer(d)
			} else {
				sleep.Reset(d)
			}
			timerC = sleep.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.wake:
		case <-timerC:
		}
	}
}

// collect removes up to about timersBatch due timers from the wheel and
// appends them to due. It returns the tick to sleep until (math.MaxInt64 for
// none) and whether more timers are due already.
func (t *Timers) collect(due []firedTimer) (_ []firedTimer, next int64, more bool) {
	nowMs := t.clock.Now().UnixMilli()
	appendDue := func(id uuid.UUID, atMs int64) {
		due = append(due, firedTimer{id: id, at: atMs})
		t.handing[id] = struct{}{}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	// Advancing deadline by deadline rather than straight to nowMs lets the
	// batch bound apply; each step fires one tick or refines one slot.
	for len(due) < timersBatch {
		d, ok := t.wheel.NextDeadline()
		if !ok || d > nowMs {
			break
		}
		t.wheel.Advance(d, appendDue)
	}
	next, ok := t.wheel.NextDeadline()
	switch {
	case !ok:
		next = math.MaxInt64
	case next <= nowMs:
		more = true
	default:
		// Nothing else is due; moving the wheel up to now keeps later
		// insertions on its finest levels.
		t.wheel.Advance(nowMs, appendDue)
	}
	t.sleepUntil = next
	return due, next, more
}
