package dispatcher

import (
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

type admission int

const (
	sendNow admission = iota // a send slot is the caller's
	parked                   // c waits for a slot; whoever frees one sends it
	full                     // no room to wait either: give c back until wait
)

// admit takes a send slot of the target for c, or parks c until a send to
// the same target finishes (unless mayPark is false: its tenant has as many
// claims waiting as it may), or, when too many already wait, says how long
// until a slot is likely free.
func (ts *targets) admit(t *target, c *model.ClaimedTask, mayPark bool) (admission, time.Duration) {
	now := ts.cfg.Clock.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch {
	case t.inflight < ts.cfg.MaxInflight:
		if t.busySince.IsZero() {
			t.busySince = now
		}
		t.inflight++
		return sendNow, 0
	case mayPark && len(t.parked) < ts.roomLocked(t, now):
		t.parked = append(t.parked, c)
		return parked, 0
	}
	return full, lineWait(len(t.parked)+1, ts.cfg.MaxInflight, ts.paceLocked(t, now))
}

// roomLocked is how many claims may park for t: MaxWaiting while its pace
// is unknown, then five to ten seconds of it. A busy target that answers
// drains its queue within moments, and giving its claims back would cost
// two writes each; one whose sends hang keeps MaxInflight parked, not the
// node's claim budget, from a second after it stops answering, well before
// its breaker opens.
func (ts *targets) roomLocked(t *target, now time.Time) int {
	if t.busySince.IsZero() || now.Sub(t.busySince) < drainMeasured {
		return ts.cfg.MaxWaiting
	}
	return drainRoom(ts.cfg.MaxInflight, ts.cfg.MaxWaiting, t.drained.recent(now))
}

// paceLocked is how long one send to t takes, as far as a claim waiting
// for its slots can tell: its usual time, or the age of its oldest
// unanswered send if that is longer (a target that stopped answering has a
// pace from before it did).
func (ts *targets) paceLocked(t *target, now time.Time) time.Duration {
	per := t.sendTime
	for ps := range t.sends {
		per = max(per, now.Sub(ps.started))
	}
	return per
}

// done records a send that took took, and gives its slot back or hands it
// straight to the oldest task parked for the target, which the caller then
// sends.
func (ts *targets) done(t *target, took time.Duration) (next *model.ClaimedTask) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if took > 0 {
		if t.sendTime == 0 {
			t.sendTime = took
		} else {
			t.sendTime += (took - t.sendTime) / 8
		}
		t.drained.finished(ts.cfg.Clock.Now())
	}
	if len(t.parked) > 0 {
		next = t.parked[0]
		t.parked[0] = nil
		t.parked = t.parked[1:]
		return next
	}
	t.inflight--
	if t.inflight == 0 {
		t.busySince = time.Time{}
	}
	return nil
}

// sendTimeOf is the moving average of how long a send of tenant to the
// target with this key takes; 0 before the first. The dispatch limits use it
// to tell a task that finds no room to wait for a concurrency slot when one
// is likely free.
func (ts *targets) sendTimeOf(tenant uuid.UUID, key string) time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.byID[targetID{tenant: tenant, key: key}]; ok {
		return t.sendTime
	}
	return 0
}
