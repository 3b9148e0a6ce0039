package dispatcher

import (
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// A target is where webhooks go: a URL's scheme, host (compared without
// regard to case) and port. Its state on a node is kept per tenant and
// target: each tenant sending to a host has a circuit breaker of its own
// there, its own stuck-send detection, its own MaxPerTarget send slots and
// claims parked for them, so that a dead or slow receiver neither gets
// hammered nor holds up anyone else's webhooks, and one tenant's failures or
// hanging sends to a host (which many tenants share: Slack, Zapier, their
// customers' endpoints) never defer nor slow another tenant's webhooks
// there. No state is shared by the tenants of a host: what bounds the sum
// of their sends to it is each tenant's share of the senders (shares.go) and
// the node's Senders, not a host-wide breaker or cap, which one tenant alone
// could trip or fill for all. Only the metrics fold the tenants' breakers of
// a host into one series per host (targetlabels.go), without a tenant label.

// BreakerConfig tunes the circuit breakers, one per tenant and target. Zero fields take the
// defaults.
type BreakerConfig struct {
	// ConsecutiveFailures trips the breaker. Default 5.
	ConsecutiveFailures uint32
	// FailureRatio over Window trips it too, once MinRequests were made in
	// the window. Defaults 0.5, 60s and 20.
	FailureRatio float64
	Window       time.Duration
	MinRequests  uint32
	// Cooldown is how long a tripped breaker stays open before it lets one
	// probe through (half-open). Default 30s.
	Cooldown time.Duration
	// ReleasePace spaces out the tasks deferred while a breaker was open, so
	// that they do not all come back at the instant it closes: the k-th
	// deferral is due at the probe time plus k × ReleasePace. Default 20ms
	// (50 a second).
	ReleasePace time.Duration
	// StuckAfter: a send still unanswered this long counts as a failure of
	// its target at once (its eventual answer does not count again), so a
	// target that accepts connections and never answers trips its breaker
	// after ConsecutiveFailures such sends, not after their timeouts, which
	// may be many minutes. Default 15s (Svix's whole timeout).
	StuckAfter time.Duration
	// IdleAfter: a target with a closed breaker and nothing in flight or
	// waiting is forgotten after this long unused, so that a tenant sending
	// to ever new hosts does not grow the node's memory without end.
	// Default 10m.
	IdleAfter time.Duration
	// ForgetOpenAfter: a target whose breaker is open (or half-open), with
	// nothing in flight or waiting, is forgotten after this long unused.
	// Its breaker is kept longer than a closed one's because it is what
	// defers the host's next tasks without spending their attempts; but
	// not for ever, or a tenant sending to ever new failing hosts would
	// grow the node's memory without end. A task for a forgotten host
	// starts on a closed breaker, which ConsecutiveFailures failures trip
	// again. Default 1h.
	ForgetOpenAfter time.Duration
}

func (c *BreakerConfig) setDefaults() {
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = 5
	}
	if c.FailureRatio <= 0 {
		c.FailureRatio = 0.5
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.MinRequests == 0 {
		c.MinRequests = 20
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 30 * time.Second
	}
	if c.ReleasePace <= 0 {
		c.ReleasePace = 20 * time.Millisecond
	}
	if c.StuckAfter <= 0 {
		c.StuckAfter = 15 * time.Second
	}
	if c.IdleAfter <= 0 {
		c.IdleAfter = 10 * time.Minute
	}
	if c.ForgetOpenAfter <= 0 {
		c.ForgetOpenAfter = time.Hour
	}
}

// errTargetFailed tells a breaker that an attempt failed in a way that says
// the target is unwell (network error, timeout, 408/425/429/5xx).
var errTargetFailed = errors.New("target failed")

// errNotSent tells a breaker that the request it let through was not sent
// (its body could not be read, or our own shutdown cut it off): neither a
// success nor a failure of the target.
var errNotSent = errors.New("not sent")

// targetKey is the target of a URL (model.TargetKey):
// "https://example.com:443".
func targetKey(raw string) string { return model.TargetKey(raw) }

// targetID names one tenant's state at one target.
type targetID struct {
	tenant uuid.UUID
	key    string
}

// target is one tenant's state at one target: its breaker, its send slots
// and the claims parked for them, its sends waiting for an answer.
type target struct {
	key     string
	tenant  uuid.UUID
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	// Guarded by targets.mu.
	inflight int
	parked   []*model.ClaimedTask
	// sends are the sends to the target waiting for their answer.
	sends map[*pendingSend]struct{}
	// sendTime is a moving average of how long a send to the target takes,
	// to tell a task that finds no room when a slot is likely free.
	sendTime time.Duration
	// drained counts the sends to the target finished lately, and
	// busySince is when it last began to have sends in flight (zero while
	// it has none): they size its room for parked claims (roomLocked).
	drained   drainMeter
	busySince time.Time
	openedAt  time.Time
	deferred  int
	lastUsed  time.Time
	// traffic counts the claims that reached the target, sent or not,
	// decayed since trafficAt (targetlabels.go): the busiest targets keep a
	// label of their own on the per-target series.
	traffic   float64
	trafficAt time.Time
	// since is when the target was made (the tenant's first claim to it
	// after it was last forgotten); attempts are the tenant's sends to it
	// since, failures those its breaker counted as the target's failures.
	// For the tenant's view of it (GET /v1/targets).
	since              time.Time
	attempts, failures uint64
}

// targetsConfig configures newTargets.
type targetsConfig struct {
	Breaker BreakerConfig
	// MaxInflight and MaxWaiting bound a tenant's sends to a target and its
	// claims parked for them (Config.MaxPerTarget, MaxWaitingPerTarget):
	// MaxWaiting
	// until it has been sending for drainMeasured, then what its drain
	// earns (drainRoom), at least MaxInflight.
	MaxInflight int
	MaxWaiting  int
	Clock       clock.Clock
	// Shed gives back claims parked beyond a target's room, which shrank
	// since they parked (its sends began to hang), claims[i] to come back
	// after waits[i]; their tenant's parked count is the callee's to lower.
	// Nil leaves them parked until a slot or their age gives them back.
	Shed func(claims []*model.ClaimedTask, waits []time.Duration)
	// OnChange, optional, hears of every breaker's changes of state.
	OnChange func(tenant uuid.UUID, key string, from, to gobreaker.State)
}

// targets holds the state of every tenant at every target this node sends
// to. Each entry is made by a claim of its tenant and forgotten once idle,
// so the entries are bounded by the claims of the last IdleAfter (or
// ForgetOpenAfter, for open breakers), whatever hosts tenants choose.
type targets struct {
	cfg targetsConfig

	mu   sync.Mutex
	byID map[targetID]*target
	// byTenant indexes the targets by tenant, so a tenant's view reads its
	// own targets, not every target of the node.
	byTenant map[uuid.UUID]map[*target]struct{}
}

func newTargets(cfg targetsConfig) *targets {
	cfg.Breaker.setDefaults()
	return &targets{cfg: cfg, byID: map[targetID]*target{}, byTenant: map[uuid.UUID]map[*target]struct{}{}}
}

// get returns tenant's target with this key, made if new, for a claim of
// the tenant that reached it: the claim counts in its traffic.
func (ts *targets) get(key string, tenant uuid.UUID) *target {
	now := ts.cfg.Clock.Now()
	id := targetID{tenant: tenant, key: key}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok {
		t = ts.newTarget(id, now)
		ts.byID[id] = t
		mine := ts.byTenant[tenant]
		if mine == nil {
			mine = map[*target]struct{}{}
			ts.byTenant[tenant] = mine
		}
		mine[t] = struct{}{}
	}
	t.lastUsed = now
	t.traffic = decayed(t.traffic, t.trafficAt, now) + 1
	t.trafficAt = now
	return t
}

// forgetLocked drops t.
func (ts *targets) forgetLocked(t *target) {
	delete(ts.byID, targetID{tenant: t.tenant, key: t.key})
	if mine := ts.byTenant[t.tenant]; mine != nil {
		delete(mine, t)
		if len(mine) == 0 {
			delete(ts.byTenant, t.tenant)
		}
	}
}

// newTarget makes tenant's target with this key and its breaker.
func (ts *targets) newTarget(id targetID, now time.Time) *target {
	t := &target{key: id.key, tenant: id.tenant, since: now, sends: map[*pendingSend]struct{}{}}
	cfg := ts.cfg.Breaker
	t.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         id.key,
		MaxRequests:  1,
		Interval:     cfg.Window,
		BucketPeriod: cfg.Window / 10,
		Timeout:      cfg.Cooldown,
		// A claim that was let through and then not sent says nothing of
		// the target either way.
		IsExcluded: func(err error) bool { return errors.Is(err, errNotSent) },
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= cfg.ConsecutiveFailures ||
				(c.Requests >= cfg.MinRequests && float64(c.TotalFailures) >= cfg.FailureRatio*float64(c.Requests))
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			// Called under the breaker's own lock, never under ts.mu.
			ts.mu.Lock()
			if to == gobreaker.StateOpen {
				t.openedAt = ts.cfg.Clock.Now()
				t.deferred = 0
			}
			ts.mu.Unlock()
			if ts.cfg.OnChange != nil {
				ts.cfg.OnChange(t.tenant, name, from, to)
			}
		},
	})
	return t
}

// count is the number of targets kept, one per tenant and target.
func (ts *targets) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.byID)
}

// deferUntil is when a task refused by t's breaker should be tried again:
// the breaker's next probe, spaced by ReleasePace from the other deferrals.
func (ts *targets) deferUntil(t *target, now time.Time) time.Time {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	probe := t.openedAt.Add(ts.cfg.Breaker.Cooldown)
	if probe.Before(now) {
		// Half-open, a probe in flight: its answer comes within a timeout.
		probe = now.Add(time.Second)
	}
	at := probe.Add(time.Duration(t.deferred) * ts.cfg.Breaker.ReleasePace)
	t.deferred++
	return at
}
