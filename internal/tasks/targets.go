package tasks

import (
	"context"
	"fmt"
	"net/url"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Target pauses: a tenant holds its tasks to one target (a receiver down
// for a migration) and lets them out again. What a pause holds is the
// dispatcher's (heldTenants); the rules of a target and the audit are here.

// Audit actions of target pauses.
const (
	AuditTargetPaused  = "target.paused"
	AuditTargetResumed = "target.resumed"
)

// MaxPauseReason bounds the reason a tenant gives for a pause, in bytes.
const MaxPauseReason = 500

// CheckTargetKey checks a target as given, "https://host:port" (the port may
// be left out, as may a trailing "/"), reporting what is wrong with it
// under field, and returns it as the dispatcher keys its targets
// (model.TargetKey), or "" when refused. A path, query or fragment is
// refused rather than dropped: a pause holds every path of the target, and
// one given a path would read as pausing that path alone.
func CheckTargetKey(rep Reporter, field, raw string) string {
	if len(raw) > MaxURLLength {
		rep.Add(field, "must be at most %d characters", MaxURLLength)
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		rep.Add(field, "is not a valid URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		rep.Add(field, "must be an absolute http or https URL: \"https://host:port\"")
	case u.Host == "" || u.Hostname() == "":
		rep.Add(field, "must name a host")
	case !validPort(u.Port()):
		rep.Add(field, "must have a port from 1 to 65535, or none")
	case !validHost(u.Host):
		rep.Add(field, "has a host that cannot be sent as an HTTP Host header")
	case u.User != nil:
		rep.Add(field, "must not carry credentials")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		rep.Add(field, "is a scheme, host and port only, \"https://host:port\": a pause holds every path of its target")
	default:
		return model.TargetKey(raw)
	}
	return ""
}

// PauseTarget pauses target (a model.TargetKey) for the tenant, as actor,
// with reason: the tenant's tasks to it wait, unclaimed and not attempted,
// until ResumeTarget. A target paused already keeps its pause as it was;
// created says whether this call made it. Every dispatcher holds it as it
// commits (the change is announced).
func (s *Service) PauseTarget(ctx context.Context, tenantID uuid.UUID, target, reason, actor string) (*model.TargetPause, bool, error) {
	p := &model.TargetPause{TenantID: tenantID, Target: target, PausedAt: s.clock.Now().UTC(),
		PausedBy: model.PausedByTenant, Reason: reason}
	stored, created, err := s.store.PauseTarget(ctx, p,
		auditEntry(tenantID, actor, AuditTargetPaused, map[string]any{"target": target, "reason": reason}))
	if err != nil {
		return nil, false, fmt.Errorf("pause target %s: %w", target, err)
	}
	return stored, created, nil
}

// ResumeTarget lifts the tenant's pause of target and returns the pause as
// it was: model.ErrNotFound when the target was not paused. The tasks that
// waited go out at the target's pace (heldTenants says how).
func (s *Service) ResumeTarget(ctx context.Context, tenantID uuid.UUID, target, actor string) (*model.TargetPause, error) {
	p, err := s.store.ResumeTarget(ctx, tenantID, target, s.clock.Now().UTC(),
		auditEntry(tenantID, actor, AuditTargetResumed, map[string]any{"target": target}))
	if err != nil {
		return nil, fmt.Errorf("resume target %s: %w", target, err)
	}
	return p, nil
}

// ListPausedTargets returns the tenant's paused targets in target order.
func (s *Service) ListPausedTargets(ctx context.Context, tenantID uuid.UUID) ([]*model.TargetPause, error) {
	ps, err := s.store.ListTargetPauses(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list paused targets: %w", err)
	}
	return ps, nil
}
