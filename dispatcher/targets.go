package dispatcher

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sort"
	"strings"
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

// targetKey is the scheme, host and port of a URL:
// "https://example.com:443". Host names are case-insensitive (RFC 4343), so
// the host is lowercased: "EXAMPLE.com" and "example.com" are one target; a
// missing port is the scheme's default.
func targetKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

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

// pendingSend is a send waiting for its answer, and what its breaker has
// been told of it.
type pendingSend struct {
	started time.Time
	report  func(error)
	// reported is set once the breaker was told: early, as stuck, or at
	// the answer.
	reported bool
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

// errNotSent tells a breaker that the request it let through was not sent
// (its body could not be read, or our own shutdown cut it off): neither a
// success nor a failure of the target.
var errNotSent = errors.New("not sent")

// errTargetStuck tells a breaker that a send has waited StuckAfter for its
// answer.
var errTargetStuck = errors.New("target did not answer in time")

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

// BreakerStatus is one target's breakers as this node sees them: the
// breakers of the tenants sending to it, folded. Each tenant's breaker
// decides for that tenant's tasks alone; the folded row is the operator's
// view of the host.
type BreakerStatus struct {
	Target string
	// State is the most open of the tenants' breakers: "open" when one
	// tenant's breaker is open, even if the others are closed.
	State string
	// Counts sums the tenants' breakers' counts, but for the consecutive
	// ones, the highest of them.
	Counts gobreaker.Counts
	// OpenedAt is the latest opening among the tenants' breakers.
	OpenedAt time.Time
	// NextProbeAt is set while a tenant's breaker is open: the earliest
	// probe among the open ones.
	NextProbeAt time.Time
	InFlight    int
	Parked      int
	// RecentClaims counts the claims that reached the target, each
	// weighing half after five minutes: the busiest targets by it have a
	// series of their own in the metrics.
	RecentClaims float64
	// Tenants is how many tenants this node keeps state for at the target:
	// those that sent claims to it in the last IdleAfter (or whose breaker
	// there is still open).
	Tenants int
}

// targetSnapshot is one tenant's target at one instant, or, folded by
// host, every tenant's at that target, for the statuses and the metrics.
type targetSnapshot struct {
	key       string
	state     gobreaker.State
	counts    gobreaker.Counts
	openedAt  time.Time
	nextProbe time.Time
	inflight  int
	parked    int
	traffic   float64
	tenants   int
}

// snapshot reads every tenant's every target, in no particular order.
func (ts *targets) snapshot() []targetSnapshot {
	ts.mu.Lock()
	list := make([]*target, 0, len(ts.byID))
	for _, t := range ts.byID {
		list = append(list, t)
	}
	ts.mu.Unlock()
	now := ts.cfg.Clock.Now()
	out := make([]targetSnapshot, 0, len(list))
	for _, t := range list {
		// Outside ts.mu: reading an open breaker past its cooldown turns it
		// half-open, and the change takes ts.mu.
		state, counts := t.breaker.State(), t.breaker.Counts()
		ts.mu.Lock()
		s := targetSnapshot{
			key: t.key, state: state, counts: counts, openedAt: t.openedAt,
			inflight: t.inflight, parked: len(t.parked),
			traffic: decayed(t.traffic, t.trafficAt, now), tenants: 1,
		}
		if state == gobreaker.StateOpen {
			s.nextProbe = t.openedAt.Add(ts.cfg.Breaker.Cooldown)
		}
		ts.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// byHost folds the tenants' targets of a snapshot into one per target key,
// in no particular order: the most open state, the counts summed (the
// consecutive ones, the highest), the latest opening and the earliest probe.
func byHost(snap []targetSnapshot) []targetSnapshot {
	at := make(map[string]int, len(snap))
	var out []targetSnapshot
	for _, s := range snap {
		i, ok := at[s.key]
		if !ok {
			at[s.key] = len(out)
			out = append(out, s)
			continue
		}
		f := &out[i]
		f.state = max(f.state, s.state)
		f.counts.Requests += s.counts.Requests
		f.counts.TotalSuccesses += s.counts.TotalSuccesses
		f.counts.TotalFailures += s.counts.TotalFailures
		f.counts.ConsecutiveSuccesses = max(f.counts.ConsecutiveSuccesses, s.counts.ConsecutiveSuccesses)
		f.counts.ConsecutiveFailures = max(f.counts.ConsecutiveFailures, s.counts.ConsecutiveFailures)
		if s.openedAt.After(f.openedAt) {
			f.openedAt = s.openedAt
		}
		if !s.nextProbe.IsZero() && (f.nextProbe.IsZero() || s.nextProbe.Before(f.nextProbe)) {
			f.nextProbe = s.nextProbe
		}
		f.inflight += s.inflight
		f.parked += s.parked
		f.traffic += s.traffic
		f.tenants += s.tenants
	}
	return out
}

func (ts *targets) statuses() []BreakerStatus {
	snap := byHost(ts.snapshot())
	out := make([]BreakerStatus, 0, len(snap))
	for _, t := range snap {
		out = append(out, BreakerStatus{Target: t.key, State: t.state.String(), Counts: t.counts, OpenedAt: t.openedAt,
			NextProbeAt: t.nextProbe, InFlight: t.inflight, Parked: t.parked, RecentClaims: t.traffic, Tenants: t.tenants})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// TenantTarget is a target as one tenant sees it on this node: the
// tenant's own breaker there (its state decides when the tenant's tasks
// go; other tenants' failures never move it) and the tenant's own sends.
type TenantTarget struct {
	Target string
	State  string
	// NextProbeAt is set while the breaker is open.
	NextProbeAt time.Time
	// InFlight are the tenant's sends to the target waiting for their
	// answer; Waiting its claims waiting for one of its send slots there.
	InFlight, Waiting int
	// Attempts are the tenant's sends to the target since Since, Failures
	// those the target failed (network errors, timeouts, 408, 425, 429,
	// 5xx, or no answer within the breaker's StuckAfter).
	Attempts, Failures uint64
	// Since is when this node began counting them: the tenant's first
	// claim to the target after it was forgotten (IdleAfter without one).
	// LastUsed is the tenant's latest claim or answer there.
	Since, LastUsed time.Time
}

// tenantTargets reads the targets this node keeps for tenant, by target.
func (ts *targets) tenantTargets(tenant uuid.UUID) []TenantTarget {
	type entry struct {
		t   *target
		out TenantTarget
	}
	ts.mu.Lock()
	list := make([]entry, 0, len(ts.byTenant[tenant]))
	for t := range ts.byTenant[tenant] {
		list = append(list, entry{t: t, out: TenantTarget{Target: t.key, Attempts: t.attempts, Failures: t.failures,
			Since: t.since, LastUsed: t.lastUsed, InFlight: len(t.sends), Waiting: len(t.parked)}})
	}
	ts.mu.Unlock()
	out := make([]TenantTarget, 0, len(list))
	for _, e := range list {
		state := e.t.breaker.State()
		e.out.State = state.String()
		if state == gobreaker.StateOpen {
			ts.mu.Lock()
			e.out.NextProbeAt = e.t.openedAt.Add(ts.cfg.Breaker.Cooldown)
			ts.mu.Unlock()
		}
		out = append(out, e.out)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}
