package app

import (
	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/dispatcher"
)

// Breakers reports the circuit breakers of this node's dispatcher (none on
// an API-only node).
func (n *Node) Breakers() []dispatcher.BreakerStatus {
	if n.dispatcher == nil {
		return nil
	}
	return n.dispatcher.Breakers()
}

// breakerSource shows the dispatcher's targets to the API: every breaker to
// the operator, a tenant's own targets to the tenant.
type breakerSource struct{ d *dispatcher.Dispatcher }

func (b breakerSource) NodeID() uuid.UUID { return b.d.NodeID() }

func (b breakerSource) BreakerStatuses() []api.BreakerStatus {
	var out []api.BreakerStatus
	for _, s := range b.d.Breakers() {
		out = append(out, api.BreakerStatus{
			Target:              s.Target,
			State:               s.State,
			Requests:            s.Counts.Requests,
			Failures:            s.Counts.TotalFailures,
			ConsecutiveFailures: s.Counts.ConsecutiveFailures,
			OpenedAt:            s.OpenedAt,
			NextProbeAt:         s.NextProbeAt,
			InFlight:            s.InFlight,
			Waiting:             s.Parked,
			RecentClaims:        s.RecentClaims,
			Tenants:             s.Tenants,
		})
	}
	return out
}

func (b breakerSource) TenantTargets(tenant uuid.UUID) []api.TargetStatus {
	var out []api.TargetStatus
	for _, t := range b.d.TenantTargets(tenant) {
		out = append(out, api.TargetStatus{
			Target:      t.Target,
			State:       t.State,
			NextProbeAt: t.NextProbeAt,
			InFlight:    t.InFlight,
			Waiting:     t.Waiting,
			Attempts:    t.Attempts,
			Failures:    t.Failures,
			Since:       t.Since,
			LastUsed:    t.LastUsed,
		})
	}
	return out
}
