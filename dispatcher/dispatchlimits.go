package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
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
)

// gateKey names the limits of one tenant's webhooks to one host, or of one
// of its flow keys.
type gateKey struct {
	tenant uuid.UUID
	host   string
	flow   string
}

func (k gateKey) of(l model.DispatchLimit) gateKey {
	return gateKey{tenant: l.TenantID, host: l.Host, flow: l.Flow}
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

type cachedLimits struct {
	limits    model.Limits
	fetchedAt time.Time
	loaded    bool
	loading   bool
	ready     chan struct{} // closed once loaded
}

// dispatchLimiter decides dispatch limits across every node (Redis).
type dispatchLimiter interface {
	AdmitDispatches(ctx context.Context, reqs []model.DispatchRequest) ([]model.DispatchAdmission, error)
	AdmitDispatch(ctx context.Context, q model.DispatchRequest) (model.DispatchAdmission, error)
	ReleaseDispatch(ctx context.Context, l model.DispatchLimit, taskID, token uuid.UUID) error
}

// limitsReader reads tenants' dispatch limits and the day's deliveries
// (Postgres).
type limitsReader interface {
	TenantLimits(ctx context.Context, tenantID uuid.UUID) (model.Limits, error)
	deliveriesReader
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

// dispatchLimits enforces tenants' dispatch limits on this node's sends.
type dispatchLimits struct {
	cfg limitsConfig
	// wake tells the waker that a gate was kicked or filled.
	wake chan struct{}
	// daily holds the claims of tenants past deliveries_per_day.
	daily *dailyDeliveries

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
	l := &dispatchLimits{
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		tenants: make(map[uuid.UUID]*cachedLimits),
		gates:   make(map[gateKey]*gate),
		slots:   make(map[slotKey]time.Time),
	}
	l.daily = newDailyDeliveries(dailyConfig{
		Store: cfg.Limits, Limit: func(id uuid.UUID) int { return l.tenantLimits(id).DeliveriesPerDay },
		Clock: cfg.Clock, Logger: cfg.Logger, Metrics: cfg.Metrics, Defer: cfg.Defer,
	})
	return l
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
func flowLimitFor(c *model.ClaimedTask) model.DispatchLimit {
	if !c.Flow.Limited() {
		return model.DispatchLimit{}
	}
	return model.DispatchLimit{TenantID: c.TenantID, Flow: c.Flow.Key, Rate: c.Flow.PerSecond(), Concurrency: c.Flow.Parallelism,
		Period: c.Flow.Period}
}

// limitFor returns what limits c's send to its target: the tenant's limits
// for the host of its URL.
func (l *dispatchLimits) limitFor(c *model.ClaimedTask) model.DispatchLimit {
	limits := l.tenantLimits(c.TenantID)
	if limits.DispatchRate == 0 && limits.DispatchConcurrency == 0 && len(limits.Targets) == 0 {
		return model.DispatchLimit{}
	}
	host := hostKey(c.URL)
	rate, concurrency := limits.ForHost(host)
	return model.DispatchLimit{TenantID: c.TenantID, Host: host, Rate: rate, Concurrency: concurrency}
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
func (l *dispatchLimits) queuedBehind(c *model.ClaimedTask, target model.DispatchLimit) bool {
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
func (l *dispatchLimits) admitUnder(c *model.ClaimedTask, limit model.DispatchLimit) (release func(), slot time.Time, ok bool) {
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
	case limit.Rate > 0 && decided && now.Sub(decidedSlot) < model.DispatchGrace(limit.Rate):
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
	admission, err := l.cfg.Limiter.AdmitDispatch(ctx, model.DispatchRequest{
		Limit: limit, TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken, Lease: c.Timeout + l.cfg.LeaseMargin, At: now})
	if err != nil {
		l.failed(1, err)
		if head {
			l.kickGate(key)
		}
		return noop, time.Time{}, true
	}
	switch admission.Outcome {
	case model.DispatchNow:
		if head {
			// A slot was free; the next in line may find one too.
			l.kickGate(key)
		}
		if limit.Concurrency == 0 {
			return noop, sentOn, true
		}
		return func() { l.release(key, limit, c) }, sentOn, true
	case model.DispatchLater:
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
	default: // model.DispatchBusy
		park(head)
		return nil, time.Time{}, false
	}
}
