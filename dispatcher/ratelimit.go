package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/failopen"
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

// gateKey names the limits of one tenant's webhooks to one host, or of one
// of its flow keys.
type gateKey struct {
	tenant uuid.UUID
	host   string
	flow   string
}

func (k gateKey) of(l store.DispatchLimit) gateKey {
	return gateKey{tenant: l.TenantID, host: l.Host, flow: l.Flow}
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

// dispatchLimiter decides dispatch limits across every node (Redis).
type dispatchLimiter interface {
	AdmitDispatches(ctx context.Context, reqs []store.DispatchRequest) ([]store.DispatchAdmission, error)
	AdmitDispatch(ctx context.Context, q store.DispatchRequest) (store.DispatchAdmission, error)
	ReleaseDispatch(ctx context.Context, l store.DispatchLimit, taskID, token uuid.UUID) error
}

// limitsReader reads tenants' dispatch limits (Postgres).
type limitsReader interface {
	TenantLimits(ctx context.Context, tenantID uuid.UUID) (model.Limits, error)
}

// limitsConfig configures newDispatchLimits. Every field is required unless
// it says otherwise.
type limitsConfig struct {
	// Limiter decides the limits. Nil (no Redis): nothing is limited.
	Limiter dispatchLimiter
	Limits  limitsReader
	// Defaults are the node's limits, under each tenant's own. Optional.
	Defaults model.Limits
	// Down skips the limiter for a while after it failed.
	Down    *failopen.Window
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Defer gives claims back to the queue, claims[i] until until(i).
	Defer func(claims []*model.ClaimedTask, until func(i int) time.Time)
	// HoldUntil keeps a claim in memory until at, then sends it; false when
	// the dispatcher is stopping.
	HoldUntil func(c *model.ClaimedTask, at time.Time) bool
	// Send hands claims that waited for a concurrency slot back to the
	// senders.
	Send chan<- *model.ClaimedTask
	// SendTime is the moving average of a tenant's send to a target (targetKey), to
	// tell a claim that finds no room to wait when a slot is likely free.
	SendTime            func(tenant uuid.UUID, target string) time.Duration
	LeaseMargin         time.Duration
	MaxWaitingPerTarget int
}

// slotKey names the rate slot a claim holds under its host's limit, or under
// its flow key's.
type slotKey struct {
	id   uuid.UUID
	flow bool
}

// dispatchLimits enforces tenants' dispatch limits on this node's sends.
type dispatchLimits struct {
	cfg limitsConfig
	// wake tells the waker that a gate was kicked or filled.
	wake chan struct{}

	mu      sync.Mutex
	tenants map[uuid.UUID]*cachedLimits
	gates   map[gateKey]*gate
	waiting int
	stopped bool
	// slots holds, for each claim whose rate was decided when it was
	// claimed (under its host's limit and, apart, its flow key's), the
	// instant its slot is for, until it is sent.
	slots  map[slotKey]time.Time
	pruned time.Time
}

func newDispatchLimits(cfg limitsConfig) *dispatchLimits {
	return &dispatchLimits{
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		tenants: make(map[uuid.UUID]*cachedLimits),
		gates:   make(map[gateKey]*gate),
		slots:   make(map[slotKey]time.Time),
	}
}

// waitingCount is how many claims wait for a concurrency slot.
func (l *dispatchLimits) waitingCount() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.waiting)
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

// flowLimitFor returns what limits c's send as a task of its flow key (the
// limits the claim read with it); unlimited for a task without a key.
func flowLimitFor(c *model.ClaimedTask) store.DispatchLimit {
	if !c.Flow.Limited() {
		return store.DispatchLimit{}
	}
	return store.DispatchLimit{TenantID: c.TenantID, Flow: c.Flow.Key, Rate: c.Flow.PerSecond(), Concurrency: c.Flow.Parallelism,
		Period: c.Flow.Period}
}

// limitFor returns what limits c's send to its target: the tenant's limits
// for the host of its URL.
func (l *dispatchLimits) limitFor(c *model.ClaimedTask) store.DispatchLimit {
	limits := l.tenantLimits(c.TenantID)
	if limits.DispatchRate == 0 && limits.DispatchConcurrency == 0 && len(limits.Targets) == 0 {
		return store.DispatchLimit{}
	}
	host := hostKey(c.URL)
	rate, concurrency := limits.ForHost(host)
	return store.DispatchLimit{TenantID: c.TenantID, Host: host, Rate: rate, Concurrency: concurrency}
}

// skipping reports whether Redis failed a moment ago, counting the n
// decisions skipped.
func (l *dispatchLimits) skipping(n int) bool {
	if l.cfg.Down.Skipping() {
		l.cfg.Metrics.limitUnchecked.Add(float64(n))
		return true
	}
	return false
}

func (l *dispatchLimits) failed(n int, err error) {
	l.cfg.Metrics.limitUnchecked.Add(float64(n))
	l.cfg.Down.Failed()
	l.cfg.Logger.Warn("dispatch limits unavailable; sending unchecked for a while", "tasks", n, "err", err, "retry_in", l.cfg.Down.Skip())
}

// rateLimitClaims decides the dispatch rates of freshly claimed tasks, for
// the instant each falls due, and returns those to send: at their due time,
// or held a little later for their slot (NextAttemptAt moved there). The
// others are given back to the queue, due at their slots. A task's flow key
// is asked first, for the instant it is due; its host then for the instant
// its key gave it, so that a task its key sends far off takes no slot of
// its host.
func (l *dispatchLimits) rateLimitClaims(claims []*model.ClaimedTask) []*model.ClaimedTask {
	if l.cfg.Limiter == nil || len(claims) == 0 {
		return claims
	}
	claims = l.decideRates(claims, flowLimitFor)
	return l.decideRates(claims, l.limitFor)
}

// decideRates is rateLimitClaims under one kind of limit: each claim's
// limit by limitOf, its rate only (concurrency is decided when sending).
func (l *dispatchLimits) decideRates(claims []*model.ClaimedTask, limitOf func(*model.ClaimedTask) store.DispatchLimit) []*model.ClaimedTask {
	type pending struct {
		c     *model.ClaimedTask
		limit store.DispatchLimit
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
	reqs := make([]store.DispatchRequest, len(limited))
	for i, p := range limited {
		reqs[i] = store.DispatchRequest{Limit: p.limit, TaskID: p.c.ID, Attempt: p.c.Attempt, Token: p.c.ClaimToken, At: p.meant}
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
		case a.Outcome != store.DispatchLater:
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
func deferUntil(limit store.DispatchLimit, now, at time.Time) time.Time {
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

// tenantLimits returns a tenant's limits, read from Postgres at most every
// limitsTTL. One caller reads while the others use what was read before (or,
// the first time, wait for it). A tenant whose limits cannot be read is
// unlimited until they can: delivery goes on.
func (l *dispatchLimits) tenantLimits(id uuid.UUID) model.Limits {
	now := l.cfg.Clock.Now()
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
	limits, err := l.cfg.Limits.TenantLimits(ctx, id)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil, errors.Is(err, model.ErrNotFound):
		e.limits, e.fetchedAt = limits.Resolve(l.cfg.Defaults), now
	default:
		// Keep what we had; try again in a second.
		e.fetchedAt = now.Add(time.Second - limitsTTL)
		l.cfg.Metrics.limitUnchecked.Inc()
		l.cfg.Logger.Warn("reading a tenant's dispatch limits failed; using the last known", "tenant", id, "err", err)
	}
	e.loading = false
	if !e.loaded {
		e.loaded = true
		close(e.ready)
	}
	return e.limits
}
