package dispatcher

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

const (
	// holdWithin: a task whose rate slot is this close waits for it in
	// memory, held like a claim taken ahead of its due time, rather than
	// going back to Postgres and being claimed again, two round trips that
	// would eat into a short wait (and, on a loaded database, make it miss
	// its slot). It keeps the task dispatching (not cancelable) for up to
	// this long, well within its lease.
	holdWithin = time.Second
)

// slotKey names the rate slot a claim holds under its host's limit, or under
// its flow key's.
type slotKey struct {
	id   uuid.UUID
	flow bool
}

// rateLimitClaims decides the dispatch rates of freshly claimed tasks, for
// the instant each falls due, and returns those to send: at their due time,
// or held a little later for their slot (NextAttemptAt moved there). The
// others are given back to the queue, due at their slots. A task's flow key
// is asked first, for the instant it is due; its host then for the instant
// its key gave it, so that a task its key sends far off takes no slot of
// its host. Before any of it, the claims of tenants with no deliveries left
// today are given back, due at the next UTC midnight (dailydeliveries.go),
// Redis or not.
func (l *dispatchLimits) rateLimitClaims(claims []*model.ClaimedTask) []*model.ClaimedTask {
	claims = l.daily.hold(claims)
	if l.cfg.Limiter == nil || len(claims) == 0 {
		return claims
	}
	claims = l.decideRates(claims, flowLimitFor)
	return l.decideRates(claims, l.limitFor)
}

// decideRates is rateLimitClaims under one kind of limit: each claim's
// limit by limitOf, its rate only (concurrency is decided when sending).
func (l *dispatchLimits) decideRates(claims []*model.ClaimedTask, limitOf func(*model.ClaimedTask) model.DispatchLimit) []*model.ClaimedTask {
	type pending struct {
		c     *model.ClaimedTask
		limit model.DispatchLimit
		meant time.Time
	}
	now := l.cfg.Clock.Now()
	var (
		limited []pending
		keep    []*model.ClaimedTask // the unlimited, once a claim is limited
	)
	for i, c := range claims {
		limit := limitOf(c)
		if limit.Rate <= 0 {
			if keep != nil {
				keep = append(keep, c)
			}
			continue
		}
		if keep == nil {
			// Most batches have no limited claim: they cost no copy.
			keep = append(make([]*model.ClaimedTask, 0, len(claims)), claims[:i]...)
		}
		limit.Concurrency = 0 // decided when sending
		meant := now
		if c.NextAttemptAt != nil && c.NextAttemptAt.After(now) {
			meant = *c.NextAttemptAt
		}
		limited = append(limited, pending{c, limit, meant})
	}
	if len(limited) == 0 || l.skipping(len(limited)) {
		return claims
	}
	// Asked in due order, they get their slots in due order.
	slices.SortFunc(limited, func(a, b pending) int {
		if n := a.meant.Compare(b.meant); n != 0 {
			return n
		}
		return bytes.Compare(a.c.ID[:], b.c.ID[:])
	})
	reqs := make([]model.DispatchRequest, len(limited))
	for i, p := range limited {
		reqs[i] = model.DispatchRequest{Limit: p.limit, TaskID: p.c.ID, Attempt: p.c.Attempt, Token: p.c.ClaimToken, At: p.meant}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	defer cancel()
	admissions, err := l.cfg.Limiter.AdmitDispatches(ctx, reqs)
	if err != nil {
		l.failed(len(limited), err)
		return claims
	}
	var (
		deferred []*model.ClaimedTask
		until    []time.Time
	)
	l.mu.Lock()
	l.forgetSlotsLocked(now)
	for i, p := range limited {
		a := admissions[i]
		key := slotKey{p.c.ID, p.limit.Flow != ""}
		switch {
		case a.Outcome != model.DispatchLater:
			l.slots[key] = p.meant
			keep = append(keep, p.c)
			continue
		case a.Wait <= holdWithin:
			// Held until its slot, as if due then (a deferral given back to
			// Postgres comes back due then too).
			at := p.meant.Add(a.Wait)
			p.c.NextAttemptAt = &at
			l.slots[key] = at
			keep = append(keep, p.c)
		default:
			deferred = append(deferred, p.c)
			until = append(until, deferUntil(p.limit, now, p.meant.Add(a.Wait)))
		}
		l.cfg.Metrics.deferrals.WithLabelValues(gateKey{}.of(p.limit).reason(true)).Inc()
	}
	l.mu.Unlock()
	if len(deferred) > 0 {
		l.cfg.Defer(deferred, func(i int) time.Time { return until[i] })
	}
	return keep
}

// flowDeferAhead is the furthest ahead a claim waiting for its flow key's
// rate slot is given back to Postgres. Its slot stays reserved for it in
// Redis, which answers how long is left each time it comes back; but should
// the tenant change the key's rate (from one a day to a hundred a second,
// say), it is seen within this long, instead of once the slots booked at
// the old rate have passed.
const flowDeferAhead = time.Minute

// deferUntil is when a claim whose slot under limit is at goes back to the
// queue for: at, but no further than flowDeferAhead for a flow key.
func deferUntil(limit model.DispatchLimit, now, at time.Time) time.Time {
	if limit.Flow != "" && at.Sub(now) > flowDeferAhead {
		return now.Add(flowDeferAhead)
	}
	return at
}

// forgetSlotsLocked drops, now and then, the slots of claims that never
// reached a sender (given back unsent): past their lease, no claim can still
// use them. Sent claims drop theirs as they go.
func (l *dispatchLimits) forgetSlotsLocked(now time.Time) {
	if now.Sub(l.pruned) < l.cfg.LeaseMargin {
		return
	}
	l.pruned = now
	for id, at := range l.slots {
		if now.Sub(at) > l.cfg.LeaseMargin {
			delete(l.slots, id)
		}
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
