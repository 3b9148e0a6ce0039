package dispatcher

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// The concurrency half of the dispatch limits (see ratelimit.go): decided
// at the instant of sending, with claims that find every slot taken waiting
// here, per (tenant, host), in due order, without holding a sender.

// admit decides, at the instant c is about to be sent, what only that
// instant can, under its flow key's limits and then its target's: a
// concurrency slot, and a new rate slot if c is too late for the one it was
// given when claimed. When c may be sent, release must be called once the
// send is over. When it may not, c has been deferred or waits for a
// concurrency slot: the caller is done with it.
//
// Where both bind, c queues behind its target's waiting claims before it
// takes anything of its key's; a send its target holds back gives its key's
// concurrency slot back at once and keeps its key's rate slot, to use if it
// comes back within that slot's grace.
func (l *dispatchLimits) admit(c *model.ClaimedTask) (release func(), ok bool) {
	if l.cfg.Limiter == nil {
		return func() {}, true
	}
	target, flow := l.limitFor(c), flowLimitFor(c)
	if !flow.Limited() || l.queuedBehind(c, target) {
		release, _, ok = l.admitUnder(c, target)
		return release, ok
	}
	releaseFlow, flowSlot, ok := l.admitUnder(c, flow)
	if !ok {
		// Waiting for its key, c no longer tries its target's slots: the
		// next in line there may.
		l.passHead(gateKey{}.of(target), c.ID)
		return nil, false
	}
	// Kept before the target decides, since a claim it hands back may come
	// round again at once; forgotten if c goes now.
	keep := slotKey{c.ID, true}
	if !flowSlot.IsZero() {
		l.mu.Lock()
		l.slots[keep] = flowSlot
		l.mu.Unlock()
	}
	releaseTarget, _, ok := l.admitUnder(c, target)
	if !ok {
		releaseFlow()
		return nil, false
	}
	l.mu.Lock()
	delete(l.slots, keep)
	l.mu.Unlock()
	return func() { releaseTarget(); releaseFlow() }, true
}

// queuedBehind reports whether claims wait for the concurrency slots of c's
// target already, c not first among them: c must queue behind them.
func (l *dispatchLimits) queuedBehind(c *model.ClaimedTask, target store.DispatchLimit) bool {
	if target.Concurrency <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[gateKey{}.of(target)]
	return g != nil && g.head != c.ID && (len(g.queue) > 0 || g.head != uuid.Nil)
}

// admitUnder is admit under one limit: a target's (limit.Host) or a flow
// key's (limit.Flow). slot is the rate slot c is sent on, zero when the
// limit has no rate or c is not sent.
func (l *dispatchLimits) admitUnder(c *model.ClaimedTask, limit store.DispatchLimit) (release func(), slot time.Time, ok bool) {
	noop := func() {}
	now := l.cfg.Clock.Now()
	// The slot it was given when claimed, if any: forgotten as c is sent or
	// leaves, kept while it waits here for a concurrency slot.
	sk := slotKey{c.ID, limit.Flow != ""}
	l.mu.Lock()
	decidedSlot, decided := l.slots[sk]
	delete(l.slots, sk)
	l.mu.Unlock()
	sentOn := time.Time{}
	switch {
	case limit.Rate > 0 && decided && now.Sub(decidedSlot) < store.DispatchGrace(limit.Rate):
		limit.Rate = 0 // the slot it was given when claimed still holds
		sentOn = decidedSlot
	case limit.Rate > 0:
		sentOn = now
	}
	if !limit.Limited() {
		return noop, sentOn, true
	}
	key := gateKey{}.of(limit)
	park := func(front bool) {
		l.mu.Lock()
		outcome, ahead := l.parkLocked(key, c, front, limit.Concurrency)
		if outcome == parkWaiting && decided {
			l.slots[sk] = decidedSlot
		}
		l.mu.Unlock()
		switch outcome {
		case parkStopped:
			l.giveBack(key, c, time.Time{})
		case parkCrowded:
			// As many wait here already as make sense: back to the queue
			// until this one's turn is likely to come.
			perSlot := max(l.cfg.SendTime(c.TenantID, targetKey(c.URL)), time.Millisecond)
			wait := time.Duration(float64(ahead+1) / float64(limit.Concurrency) * float64(perSlot))
			l.giveBack(key, c, l.cfg.Clock.Now().Add(min(max(wait, time.Second), 30*time.Second)))
		}
	}

	head, queued := false, false
	l.mu.Lock()
	if g := l.gates[key]; g != nil {
		switch {
		case g.head == c.ID:
			head, g.head = true, uuid.Nil
		case limit.Concurrency > 0 && (len(g.queue) > 0 || g.head != uuid.Nil):
			queued = true
		}
	}
	l.mu.Unlock()
	if queued {
		// Others wait for a slot already: queue behind them.
		park(false)
		return nil, time.Time{}, false
	}

	if l.skipping(1) {
		if head {
			l.kickGate(key)
		}
		return noop, time.Time{}, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	defer cancel()
	admission, err := l.cfg.Limiter.AdmitDispatch(ctx, store.DispatchRequest{
		Limit: limit, TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken, Lease: c.Timeout + l.cfg.LeaseMargin, At: now})
	if err != nil {
		l.failed(1, err)
		if head {
			l.kickGate(key)
		}
		return noop, time.Time{}, true
	}
	switch admission.Outcome {
	case store.DispatchNow:
		if head {
			// A slot was free; the next in line may find one too.
			l.kickGate(key)
		}
		if limit.Concurrency == 0 {
			return noop, sentOn, true
		}
		return func() { l.release(key, limit, c) }, sentOn, true
	case store.DispatchLater:
		if head {
			l.kickGate(key)
		}
		l.cfg.Metrics.deferrals.WithLabelValues(key.reason(true)).Inc()
		at := now.Add(admission.Wait)
		if admission.Wait > holdWithin || !l.holdUntil(c, sk, at) {
			back := deferUntil(limit, now, at)
			l.cfg.Defer([]*model.ClaimedTask{c}, func(int) time.Time { return back })
		}
		return nil, time.Time{}, false
	default: // store.DispatchBusy
		park(head)
		return nil, time.Time{}, false
	}
}

// reason is the deferral metric's reason for a wait under k's rate (or, when
// !rate, its concurrency).
func (k gateKey) reason(rate bool) string {
	switch {
	case k.flow != "" && rate:
		return "flow_rate"
	case k.flow != "":
		return "flow_parallelism"
	case rate:
		return "rate_limit"
	}
	return "concurrency"
}

// passHead lets the next claim in line at key try for a slot, when the one
// handed back to try (id) will not ask.
func (l *dispatchLimits) passHead(key gateKey, id uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.gates[key]; g != nil && g.head == id {
		g.head, g.kick = uuid.Nil, true
		l.signal()
	}
}

type parkOutcome int

const (
	parkWaiting parkOutcome = iota // queued for a concurrency slot
	parkStopped                    // the dispatcher is stopping: give c back
	parkCrowded                    // too many wait already: give c back for a while
)

// maxGateWaiting is how many claims may wait for the concurrency slots of one
// (tenant, host) on a node: enough to keep the slots busy, and never so many
// that a slow host holds much of the node's claim budget (MaxClaimed) while
// other tenants' tasks wait to be claimed.
func (l *dispatchLimits) maxGateWaiting(concurrency int) int {
	return max(1, min(4*concurrency+16, l.cfg.MaxWaitingPerTarget))
}

// parkLocked queues c for a concurrency slot, at the front when it was first
// in line already; ahead is how many wait before it.
func (l *dispatchLimits) parkLocked(key gateKey, c *model.ClaimedTask, front bool, concurrency int) (_ parkOutcome, ahead int) {
	if l.stopped {
		return parkStopped, 0
	}
	g := l.gates[key]
	if g == nil {
		g = &gate{}
		l.gates[key] = g
	}
	if !front && len(g.queue) >= l.maxGateWaiting(concurrency) {
		return parkCrowded, len(g.queue)
	}
	if front {
		g.queue = append([]*model.ClaimedTask{c}, g.queue...)
	} else {
		g.queue = append(g.queue, c)
	}
	l.waiting++
	l.signal()
	return parkWaiting, len(g.queue) - 1
}

// release gives back c's concurrency slot and lets the first in line try it.
func (l *dispatchLimits) release(key gateKey, limit store.DispatchLimit, c *model.ClaimedTask) {
	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	defer cancel()
	if err := l.cfg.Limiter.ReleaseDispatch(ctx, limit, c.ID, c.ClaimToken); err != nil {
		l.cfg.Logger.Warn("releasing a dispatch slot failed; it comes back when its lease ends",
			"task", c.ID, "host", limit.Host, "flow_key", limit.Flow, "err", err)
	}
	l.kickGate(key)
}

func (l *dispatchLimits) kickGate(key gateKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.gates[key]; g != nil {
		g.kick = true
		l.signal()
	}
}

// signal wakes the waker; l.mu may be held.
func (l *dispatchLimits) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// giveBack hands an unsent claim that found key's concurrency slots taken
// back to the queue, due at notBefore (zero: as it was).
func (l *dispatchLimits) giveBack(key gateKey, c *model.ClaimedTask, notBefore time.Time) {
	l.cfg.Metrics.deferrals.WithLabelValues(key.reason(false)).Inc()
	l.cfg.Defer([]*model.ClaimedTask{c}, func(int) time.Time { return notBefore })
}

// run is the waker: it hands the first claim waiting at each kicked gate
// back to the senders, polls the gates whose slots are held elsewhere, and
// gives back claims that waited too long. It returns when ctx ends, after
// giving back every claim still waiting.
func (l *dispatchLimits) run(ctx context.Context) {
	// The poll runs only while claims wait, and is not pushed back by
	// wakes: gates waiting on other nodes' slots are polled even while
	// sends to other gates keep waking the waker.
	poll := l.cfg.Clock.NewTimer(waitPoll)
	defer poll.Stop()
	armed := true
	for {
		tick := false
		select {
		case <-ctx.Done():
			l.stop()
			return
		case <-l.wake:
		case <-poll.C():
			tick, armed = true, false
		}
		heads, expired, more := l.next(tick)
		if len(expired) > 0 {
			l.cfg.Defer(expired, asDue)
		}
		if more && !armed {
			poll.Reset(waitPoll)
			armed = true
		}
		for i, c := range heads {
			select {
			case l.cfg.Send <- c:
			case <-ctx.Done():
				l.cfg.Defer(heads[i:], asDue)
				l.stop()
				return
			}
		}
	}
}

// next takes, from every kicked gate (every gate on a poll tick) that has no
// claim out trying already, its first claim to try again; and every claim
// that has waited past half its lease margin. more reports whether claims
// are still waiting.
func (l *dispatchLimits) next(tick bool) (heads, expired []*model.ClaimedTask, more bool) {
	now := l.cfg.Clock.Now()
	maxWait := l.cfg.LeaseMargin / 2
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, g := range l.gates {
		kept := g.queue[:0]
		for _, c := range g.queue {
			if now.Sub(c.ClaimedAt) > maxWait {
				l.cfg.Metrics.deferrals.WithLabelValues(key.reason(false)).Inc()
				expired = append(expired, c)
				l.waiting--
				continue
			}
			kept = append(kept, c)
		}
		clear(g.queue[len(kept):])
		g.queue = kept
		if g.head != uuid.Nil && now.Sub(g.headSince) > headTransit {
			g.head = uuid.Nil
		}
		if (g.kick || tick) && g.head == uuid.Nil && len(g.queue) > 0 {
			c := g.queue[0]
			g.queue[0] = nil
			g.queue = g.queue[1:]
			l.waiting--
			g.head, g.headSince = c.ID, now
			heads = append(heads, c)
		}
		g.kick = false
		if len(g.queue) == 0 && g.head == uuid.Nil {
			delete(l.gates, key)
		}
	}
	return heads, expired, l.waiting > 0
}

// stop gives back every waiting claim and refuses new ones.
func (l *dispatchLimits) stop() {
	l.mu.Lock()
	l.stopped = true
	var unsent []*model.ClaimedTask
	for key, g := range l.gates {
		unsent = append(unsent, g.queue...)
		delete(l.gates, key)
	}
	l.waiting = 0
	l.mu.Unlock()
	if len(unsent) > 0 {
		l.cfg.Defer(unsent, asDue)
	}
}

// holdUntil holds c in memory until its rate slot at (under the limit sk
// names), which it keeps: it reports false when the dispatcher is stopping
// and c must be given back.
func (l *dispatchLimits) holdUntil(c *model.ClaimedTask, sk slotKey, at time.Time) bool {
	// The slot is known before the hold can release c to a sender.
	l.mu.Lock()
	l.slots[sk] = at
	l.mu.Unlock()
	if l.cfg.HoldUntil(c, at) {
		return true
	}
	l.mu.Lock()
	delete(l.slots, sk)
	l.mu.Unlock()
	return false
}
