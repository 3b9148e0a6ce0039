package dispatcher

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// pendingSend is a send waiting for its answer, and what its breaker has
// been told of it.
type pendingSend struct {
	started time.Time
	report  func(error)
	// reported is set once the breaker was told: early, as stuck, or at
	// the answer.
	reported bool
}

// sending registers a send to t that its breaker let through (report is
// the breaker's), and returns what tells the breaker of its answer.
func (ts *targets) sending(t *target, report func(error)) (answered func(error)) {
	now := ts.cfg.Clock.Now()
	ps := &pendingSend{started: now, report: report}
	ts.mu.Lock()
	t.sends[ps] = struct{}{}
	t.attempts++
	t.lastUsed = now
	ts.mu.Unlock()
	return func(err error) {
		now := ts.cfg.Clock.Now()
		ts.mu.Lock()
		delete(t.sends, ps)
		told := ps.reported
		ps.reported = true
		t.lastUsed = now
		if !told && errors.Is(err, errTargetFailed) {
			t.failures++
		}
		ts.mu.Unlock()
		if !told {
			ps.report(err)
		}
	}
}

// Run watches the targets until ctx ends: every second it tells the
// breakers of sends stuck past StuckAfter, and forgets idle targets.
func (ts *targets) Run(ctx context.Context) { clock.Every(ctx, ts.cfg.Clock, watchEvery, ts.watch) }

// watchEvery is how often the targets, and the tenants' shares, are watched.
const watchEvery = time.Second

// watch reports stuck sends to their breakers, gives back the claims parked
// beyond a target's room, and forgets idle targets.
func (ts *targets) watch() {
	now := ts.cfg.Clock.Now()
	var stuck []func(error)
	type surplus struct {
		claims []*model.ClaimedTask
		waits  []time.Duration
	}
	var shed []surplus
	var idle []*target
	isIdle := func(t *target) bool {
		return t.inflight == 0 && len(t.parked) == 0 && len(t.sends) == 0 && now.Sub(t.lastUsed) >= ts.cfg.Breaker.IdleAfter
	}
	ts.mu.Lock()
	for _, t := range ts.byID {
		for ps := range t.sends {
			if !ps.reported && now.Sub(ps.started) >= ts.cfg.Breaker.StuckAfter {
				ps.reported = true
				stuck = append(stuck, ps.report)
				t.failures++
			}
		}
		if room := ts.roomLocked(t, now); len(t.parked) > room && ts.cfg.Shed != nil {
			// The newest go, each to come back in its turn: the oldest
			// keep their places in line.
			sp := surplus{claims: slices.Clone(t.parked[room:])}
			per := ts.paceLocked(t, now)
			for i := range sp.claims {
				sp.waits = append(sp.waits, lineWait(room+1+i, ts.cfg.MaxInflight, per))
			}
			shed = append(shed, sp)
			clear(t.parked[room:])
			t.parked = t.parked[:room]
		}
		if isIdle(t) {
			idle = append(idle, t)
		}
	}
	ts.mu.Unlock()
	// Outside ts.mu: a report may trip the breaker, and reading a breaker's
	// state may move it from open to half-open; either change takes ts.mu.
	for _, report := range stuck {
		report(errTargetStuck)
	}
	for _, s := range shed {
		ts.cfg.Shed(s.claims, s.waits)
	}
	for _, t := range idle {
		if t.breaker.State() != gobreaker.StateClosed && now.Sub(t.lastUsed) < ts.cfg.Breaker.ForgetOpenAfter {
			continue
		}
		ts.mu.Lock()
		if ts.byID[targetID{tenant: t.tenant, key: t.key}] == t && isIdle(t) {
			ts.forgetLocked(t)
		}
		ts.mu.Unlock()
	}
}

// errTargetStuck tells a breaker that a send has waited StuckAfter for its
// answer.
var errTargetStuck = errors.New("target did not answer in time")
