package dispatcher

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The concurrency half of the dispatch limits (see dispatchlimits.go): decided
// at the instant of sending, with claims that find every slot taken waiting
// here, per (tenant, host), in due order, without holding a sender.

const (
	// waitPoll is how often the first task waiting for a concurrency slot
	// tries again when no send on this node will wake it.
	waitPoll = 50 * time.Millisecond
	// headTransit is how long the first in line may take from being handed
	// to a sender to asking the limiter before the next one is let through
	// instead (it may wait for a slot of its target on this node meanwhile).
	headTransit = time.Second
)

// gate holds the claims waiting for a concurrency slot of one (tenant, host),
// first in line first.
type gate struct {
	queue []*model.ClaimedTask
	// head is the claim handed back to the senders to try again, and when;
	// until it has asked, the others keep waiting behind it.
	head      uuid.UUID
	headSince time.Time
	// kick asks the waker to hand the first in line to a sender.
	kick bool
}

// waitingCount is how many claims wait for a concurrency slot.
func (l *dispatchLimits) waitingCount() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.waiting)
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
func (l *dispatchLimits) release(key gateKey, limit model.DispatchLimit, c *model.ClaimedTask) {
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
