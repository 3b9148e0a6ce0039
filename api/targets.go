package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/openapi"
)

// TargetStatus is a target as one tenant sees it on this node: the target's
// breaker, shared by every tenant sending to it, and the tenant's own sends.
// The metrics name only the busiest targets (the others share
// target="other"); this is where a tenant finds the rest of its own.
type TargetStatus struct {
	Target             string
	State              string
	NextProbeAt        time.Time
	InFlight, Waiting  int
	Attempts, Failures uint64
	Since, LastUsed    time.Time
}

// ListTargets shows the calling tenant's targets on this node.
func (s *Server) ListTargets(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	out := openapi.TargetList{Data: []openapi.Target{}}
	if s.cfg.Breakers == nil {
		return c.JSON(http.StatusOK, out)
	}
	out.Node = s.cfg.Breakers.NodeID()
	for _, t := range s.cfg.Breakers.TenantTargets(tenant.ID) {
		item := openapi.Target{
			Target:     t.Target,
			State:      openapi.TargetState(t.State),
			InFlight:   t.InFlight,
			Waiting:    t.Waiting,
			Attempts:   int64(t.Attempts),
			Failures:   int64(t.Failures),
			Since:      t.Since,
			LastUsedAt: t.LastUsed,
		}
		if !t.NextProbeAt.IsZero() {
			item.NextProbeAt = &t.NextProbeAt
		}
		out.Data = append(out.Data, item)
	}
	return c.JSON(http.StatusOK, out)
}
