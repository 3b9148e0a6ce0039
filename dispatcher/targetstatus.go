package dispatcher

import (
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/sony/gobreaker/v2"
)

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
