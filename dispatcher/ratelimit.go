package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// Tenants' dispatch limits: at most dispatch_rate webhooks a second and
// dispatch_concurrency in flight to any one target host of a tenant (Cloud
// Tasks' maxDispatchesPerSecond and maxConcurrentDispatches), across every
// node, decided in Redis (store/lua/dispatch_admit.lua).
//
//   - The rate is decided when a batch of due tasks is claimed, a moment
//     before they fall due, for the instant each is meant to leave: one
//     pipelined round trip per batch, asked in due order. The limiter hands
//     out slots one interval apart to successive callers, so tasks keep
//     their due order: 500 tasks due at once at 20/s leave at 0, 50 ms,
//     100 ms, ..., and a task falling due later queues behind them. (Tasks
//     due within a few milliseconds of each other, claimed by different
//     claimers at once, may swap places.) A task whose slot is less than
//     holdWithin away waits for it in memory, like a claim taken ahead of
//     its due time; one further off is given back to Postgres, due at its
//     slot, all of a batch in one statement, and uses its slot when it comes
//     back without queueing again. Either way it is a deferral, not an
//     attempt nor a failure (hookwheel_deferrals_total{reason="rate_limit"}).
//   - The concurrency limit is decided at the instant of sending, and the
//     slot given back when the send is over. With every slot taken, the task
//     waits here, in memory and in due order, without holding a sender: a
//     send to the host finishing on this node lets the first in line try
//     again at once, and while slots are held elsewhere the first in line
//     tries every waitPoll. One that has waited half its lease margin is
//     handed back to the queue (hookwheel_deferrals_total{reason="concurrency"}).
//     A slot is a Redis lease of the send's timeout plus the lease margin,
//     so the slots of a node that died come back.
//   - A task sent later than its rate slot by more than the limiter's grace
//     (half an interval: it waited for a concurrency slot or a
//     sender) has lost the slot, and asks for a new one as it is about to be
//     sent; so lateness can never crowd sends above the rate.
//
// Limits are read from Postgres and cached for limitsTTL, so an operator's
// change applies within a few seconds. When Redis fails, sends go ahead
// unchecked for a while (hookwheel_dispatch_limit_unchecked_total): the
// limits protect receivers, and a Redis outage must not stop delivery.

const (
	// limitsTTL is how long a tenant's limits are used before being read
	// again.
	limitsTTL = 5 * time.Second
	// limitsTimeout bounds a limiter round trip and a limits read.
	limitsTimeout = 500 * time.Millisecond
	// limitsSkip is how long sends go unchecked after Redis failed.
	limitsSkip = 5 * time.Second
	// waitPoll is how often the first task waiting for a concurrency slot
	// tries again when no send on this node will wake it.
	waitPoll = 50 * time.Millisecond
	// holdWithin: a task whose rate slot is this close waits for it in
	// memory, held like a claim taken ahead of its due time, rather than
	// going back to Postgres and being claimed again, two round trips that
	// would eat into a short wait (and, on a loaded database, make it miss
	// its slot). It keeps the task dispatching (not cancelable) for up to
	// this long, well within its lease.
	holdWithin = time.Second
	// headTransit is how long the first in line may take from being handed
	// to a sender to asking the limiter before the next one is let through
	// instead (it may wait for a slot of its target on this node meanwhile).
	headTransit = time.Second
)

// gateKey names the limits of one tenant's webhooks to one host.
type gateKey struct {
	tenant uuid.UUID
	host   string
}

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

type cachedLimits struct {
	limits    model.Limits
	fetchedAt time.Time
	loaded    bool
	loading   bool
	ready     chan struct{} // closed once loaded
}

// dispatchLimits enforces tenants' dispatch limits for one Dispatcher.
type dispatchLimits struct {
	d         *Dispatcher
	unchecked prometheus.Counter
	// downUntil (Unix nanoseconds) skips the limiter after Redis failed.
	downUntil atomic.Int64
	// wake tells the waker that a gate was kicked or filled.
	wake chan struct{}

	mu      sync.Mutex
	tenants map[uuid.UUID]*cachedLimits
	gates   map[gateKey]*gate
	waiting int
	stopped bool
	// slots holds, for each claim whose rate was decided when it was
	// claimed, the instant its slot is for, until it is sent.
	slots  map[uuid.UUID]time.Time
	pruned time.Time
}

func newDispatchLimits(d *Dispatcher, reg prometheus.Registerer) (*dispatchLimits, error) {
	l := &dispatchLimits{
		d: d,
		unchecked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_dispatch_limit_unchecked_total",
			Help: "Sends of tenants with dispatch limits that went ahead without a limiter decision because Redis (or reading the limits) failed.",
		}),
		wake:    make(chan struct{}, 1),
		tenants: make(map[uuid.UUID]*cachedLimits),
		gates:   make(map[gateKey]*gate),
		slots:   make(map[uuid.UUID]time.Time),
	}
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookwheel_dispatch_limit_waiting",
		Help: "Claimed tasks waiting on this node for a concurrency slot of their tenant and host.",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.waiting)
	})
	for _, c := range []prometheus.Collector{l.unchecked, waiting} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// hostKey is the host of a webhook URL as per-host limits name it.
func hostKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	key, _ := model.HostKey(u.Hostname())
	return key
}

// limitFor returns what limits c's send: the tenant's limits for the host
// of its URL.
func (l *dispatchLimits) limitFor(c *model.ClaimedTask) store.DispatchLimit {
	limits := l.tenantLimits(c.TenantID)
	if limits.DispatchRate == 0 && limits.DispatchConcurrency == 0 && len(limits.Targets) == 0 {
		return store.DispatchLimit{}
	}
	host := hostKey(c.URL)
	rate, concurrency := limits.ForHost(host)
	return store.DispatchLimit{TenantID: c.TenantID, Host: host, Rate: rate, Concurrency: concurrency}
}

// skipping reports whether Redis failed a moment ago, counting the decision
// skipped.
func (l *dispatchLimits) skipping(now time.Time, n int) bool {
	if until := l.downUntil.Load(); until != 0 && now.UnixNano() < until {
		l.unchecked.Add(float64(n))
		return true
	}
	return false
}

func (l *dispatchLimits) failed(now time.Time, n int, err error) {
	l.unchecked.Add(float64(n))
	l.downUntil.Store(now.Add(limitsSkip).UnixNano())
	l.d.logger.Warn("dispatch limits unavailable; sending unchecked for a while", "tasks", n, "err", err, "retry_in", limitsSkip)
}

// rateLimitClaims decides the dispatch rate of freshly claimed tasks, for
// the instant each falls due, and returns those to send: at their due time,
// or held a little later for their slot (NextAttemptAt moved there). The
// others are given back to the queue, due at their slots.
func (l *dispatchLimits) rateLimitClaims(claims []*model.ClaimedTask) []*model.ClaimedTask {
	if l.d.redis == nil || len(claims) == 0 {
		return claims
	}
	type pending struct {
		c     *model.ClaimedTask
		limit store.DispatchLimit
		meant time.Time
	}
	now := l.d.clock.Now()
	var limited []pending
	keep := claims[:0:0]
	for _, c := range claims {
		limit := l.limitFor(c)
		if limit.Rate <= 0 {
			keep = append(keep, c)
			continue
		}
		limit.Concurrency = 0 // decided when sending
		meant := now
		if c.NextAttemptAt != nil && c.NextAttemptAt.After(now) {
			meant = *c.NextAttemptAt
		}
		limited = append(limited, pending{c, limit, meant})
	}
	if len(limited) == 0 || l.skipping(now, len(limited)) {
		return claims
	}
	// Asked in due order, they get their slots in due order.
	slices.SortFunc(limited, func(a, b pending) int {
		if n := a.meant.Compare(b.meant); n != 0 {
			return n
		}
		return bytes.Compare(a.c.ID[:], b.c.ID[:])
	})
	reqs := make([]store.DispatchRequest, len(limited))
	for i, p := range limited {
		reqs[i] = store.DispatchRequest{Limit: p.limit, TaskID: p.c.ID, Token: p.c.ClaimToken, At: p.meant}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	defer cancel()
	admissions, err := l.d.redis.AdmitDispatches(ctx, reqs)
	if err != nil {
		l.failed(now, len(limited), err)
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
		switch {
		case a.Outcome != store.DispatchLater:
			l.slots[p.c.ID] = p.meant
			keep = append(keep, p.c)
			continue
		case a.Wait <= holdWithin:
			// Held until its slot, as if due then (a deferral given back to
			// Postgres comes back due then too).
			at := p.meant.Add(a.Wait)
			p.c.NextAttemptAt = &at
			l.slots[p.c.ID] = at
			keep = append(keep, p.c)
		default:
			deferred = append(deferred, p.c)
			until = append(until, p.meant.Add(a.Wait))
		}
		l.d.metrics.deferrals.WithLabelValues("rate_limit").Inc()
	}
	l.mu.Unlock()
	if len(deferred) > 0 {
		l.d.deferClaimsUntil(deferred, until)
	}
	return keep
}

// forgetSlotsLocked drops, now and then, the slots of claims that never
// reached a sender (given back unsent): past their lease, no claim can still
// use them. Sent claims drop theirs as they go.
func (l *dispatchLimits) forgetSlotsLocked(now time.Time) {
	if now.Sub(l.pruned) < l.d.cfg.LeaseMargin {
		return
	}
	l.pruned = now
	for id, at := range l.slots {
		if now.Sub(at) > l.d.cfg.LeaseMargin {
			delete(l.slots, id)
		}
	}
}

// admit decides, at the instant c is about to be sent, what only that
// instant can: a concurrency slot, and a new rate slot if c is too late for
// the one it was given when claimed. When c may be sent, release must be
// called once the send is over. When it may not, c has been deferred or
// waits for a concurrency slot: the caller is done with it.
func (l *dispatchLimits) admit(c *model.ClaimedTask) (release func(), ok bool) {
	noop := func() {}
	if l.d.redis == nil {
		return noop, true
	}
	limit := l.limitFor(c)
	now := l.d.clock.Now()
	// The slot it was given when claimed, if any: forgotten as c is sent or
	// leaves, kept while it waits here for a concurrency slot.
	l.mu.Lock()
	slot, decided := l.slots[c.ID]
	delete(l.slots, c.ID)
	l.mu.Unlock()
	if limit.Rate > 0 && decided && now.Sub(slot) < store.DispatchGrace(limit.Rate) {
		limit.Rate = 0 // the slot it was given when claimed still holds
	}
	if !limit.Limited() {
		return noop, true
	}
	key := gateKey{c.TenantID, limit.Host}
	park := func(front bool) {
		l.mu.Lock()
		outcome, ahead := l.parkLocked(key, c, front, limit.Concurrency)
		if outcome == parkWaiting && decided {
			l.slots[c.ID] = slot
		}
		l.mu.Unlock()
		switch outcome {
		case parkStopped:
			l.giveBack(c, time.Time{})
		case parkCrowded:
			// As many wait here already as make sense: back to the queue
			// until this one's turn is likely to come.
			perSlot := max(l.d.targets.sendTimeOf(targetKey(c.URL)), time.Millisecond)
			wait := time.Duration(float64(ahead+1) / float64(limit.Concurrency) * float64(perSlot))
			l.giveBack(c, l.d.clock.Now().Add(min(max(wait, time.Second), 30*time.Second)))
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
		return nil, false
	}

	if l.skipping(now, 1) {
		if head {
			l.kickGate(key)
		}
		return noop, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	defer cancel()
	admission, err := l.d.redis.AdmitDispatch(ctx, store.DispatchRequest{
		Limit: limit, TaskID: c.ID, Token: c.ClaimToken, Lease: c.Timeout + l.d.cfg.LeaseMargin, At: now})
	if err != nil {
		l.failed(now, 1, err)
		if head {
			l.kickGate(key)
		}
		return noop, true
	}
	switch admission.Outcome {
	case store.DispatchNow:
		if head {
			// A slot was free; the next in line may find one too.
			l.kickGate(key)
		}
		if limit.Concurrency == 0 {
			return noop, true
		}
		return func() { l.release(key, limit, c) }, true
	case store.DispatchLater:
		if head {
			l.kickGate(key)
		}
		l.d.metrics.deferrals.WithLabelValues("rate_limit").Inc()
		at := now.Add(admission.Wait)
		if admission.Wait > holdWithin || !l.d.holdUntil(c, at) {
			l.d.deferClaims([]*model.ClaimedTask{c}, at)
		}
		return nil, false
	default: // store.DispatchBusy
		park(head)
		return nil, false
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
	return max(1, min(4*concurrency+16, l.d.cfg.MaxWaitingPerTarget))
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
	if err := l.d.redis.ReleaseDispatch(ctx, limit, c.ID, c.ClaimToken); err != nil {
		l.d.logger.Warn("releasing a dispatch slot failed; it comes back when its lease ends",
			"task", c.ID, "host", limit.Host, "err", err)
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

// giveBack hands an unsent claim back to the queue, due at notBefore (zero:
// as it was).
func (l *dispatchLimits) giveBack(c *model.ClaimedTask, notBefore time.Time) {
	l.d.metrics.deferrals.WithLabelValues("concurrency").Inc()
	l.d.deferClaims([]*model.ClaimedTask{c}, notBefore)
}

// run is the waker: it hands the first claim waiting at each kicked gate
// back to the senders, polls the gates whose slots are held elsewhere, and
// gives back claims that waited too long. It returns when ctx ends, after
// giving back every claim still waiting.
func (l *dispatchLimits) run(ctx context.Context) {
	// The poll runs only while claims wait, and is not pushed back by
	// wakes: gates waiting on other nodes' slots are polled even while
	// sends to other gates keep waking the waker.
	poll := l.d.clock.NewTimer(waitPoll)
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
			l.d.metrics.deferrals.WithLabelValues("concurrency").Add(float64(len(expired)))
			l.d.deferClaims(expired, time.Time{})
		}
		if more && !armed {
			poll.Reset(waitPoll)
			armed = true
		}
		for i, c := range heads {
			select {
			case l.d.claimed <- c:
			case <-ctx.Done():
				l.d.deferClaims(heads[i:], time.Time{})
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
	now := l.d.clock.Now()
	maxWait := l.d.cfg.LeaseMargin / 2
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, g := range l.gates {
		kept := g.queue[:0]
		for _, c := range g.queue {
			if now.Sub(c.ClaimedAt) > maxWait {
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
		l.d.deferClaims(unsent, time.Time{})
	}
}

// tenantLimits returns a tenant's limits, read from Postgres at most every
// limitsTTL. One caller reads while the others use what was read before (or,
// the first time, wait for it). A tenant whose limits cannot be read is
// unlimited until they can: delivery goes on.
func (l *dispatchLimits) tenantLimits(id uuid.UUID) model.Limits {
	now := l.d.clock.Now()
	l.mu.Lock()
	e := l.tenants[id]
	switch {
	case e == nil:
		e = &cachedLimits{ready: make(chan struct{})}
		l.tenants[id] = e
	case e.loaded && (e.loading || now.Sub(e.fetchedAt) < limitsTTL):
		limits := e.limits
		l.mu.Unlock()
		return limits
	case !e.loaded:
		ready := e.ready
		l.mu.Unlock()
		<-ready
		l.mu.Lock()
		defer l.mu.Unlock()
		return e.limits
	}
	e.loading = true
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), limitsTimeout)
	limits, err := l.d.db.TenantLimits(ctx, id)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil, errors.Is(err, model.ErrNotFound):
		e.limits, e.fetchedAt = limits, now
	default:
		// Keep what we had; try again in a second.
		e.fetchedAt = now.Add(time.Second - limitsTTL)
		l.unchecked.Inc()
		l.d.logger.Warn("reading a tenant's dispatch limits failed; using the last known", "tenant", id, "err", err)
	}
	e.loading = false
	if !e.loaded {
		e.loaded = true
		close(e.ready)
	}
	return e.limits
}

// holdUntil keeps a claim in memory until at, then hands it to the senders,
// as the claimers do with claims taken ahead of their due time. It reports
// false once the dispatcher is stopping: Run gives back what is held when
// the send wheel has stopped, and a claim held after that would be stranded.
func (d *Dispatcher) holdUntil(c *model.ClaimedTask, at time.Time) bool {
	d.mu.Lock()
	if d.stopping.Load() {
		d.mu.Unlock()
		return false
	}
	c.NextAttemptAt = &at
	d.held[c.ID] = c
	d.mu.Unlock()
	d.limits.mu.Lock()
	d.limits.slots[c.ID] = at
	d.limits.mu.Unlock()
	d.sendTimers.Schedule(c.ID, at)
	return true
}

// deferClaimsUntil is deferClaims with a time of its own for each claim, in
// one statement.
func (d *Dispatcher) deferClaimsUntil(claims []*model.ClaimedTask, until []time.Time) {
	items := make([]store.DeferredClaim, len(claims))
	for i, c := range claims {
		items[i] = store.DeferredClaim{ID: c.ID, Token: c.ClaimToken, NotBefore: until[i]}
		d.settle(c.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.redis != nil {
		release := make([]store.AttemptClaim, len(claims))
		for i, c := range claims {
			release[i] = store.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken}
		}
		if err := d.redis.ReleaseAttempts(ctx, release); err != nil {
			d.metrics.redisErrors.Inc()
			d.logger.Warn("releasing fire-once claims failed; they expire by themselves", "tasks", len(claims), "err", err)
		}
	}
	if err := d.db.DeferClaimsUntil(ctx, items); err != nil {
		d.metrics.storeErrors.WithLabelValues("defer").Inc()
		d.logger.Error("giving claims back failed; their leases will expire and the sweep will recover them", "tasks", len(claims), "err", err)
	}
	if !d.stopping.Load() {
		// Back in the wheel here, unless the node is stopping: then the next
		// owner loads them.
		for i, c := range claims {
			d.Schedule(c.ID, until[i])
		}
	}
}
