package tenants

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Plans: named sets of limits the operator gives tenants. A tenant's
// effective limits are its own over its plan's over the node's defaults,
// field by field; the store reads the plan's with the tenant, so a plan's
// change reaches its tenants wherever tenants are read: on this node at once
// (PutPlan drops the cached keys), on others within KeyCacheTTL, in the
// dispatchers within their limits cache's time.

// PlanStore is what plans need of the store; *store.DB is one.
type PlanStore interface {
	PutPlan(ctx context.Context, p *model.Plan, audit model.AuditEntry) (created bool, err error)
	ListPlans(ctx context.Context) ([]model.Plan, error)
	GetPlan(ctx context.Context, name string) (*model.Plan, error)
	DeletePlan(ctx context.Context, name string, audit model.AuditEntry) error
	SetTenantPlan(ctx context.Context, id uuid.UUID, plan *string, audit model.AuditEntry) (*model.Tenant, error)
}

var planName = regexp.MustCompile(model.PlanNamePattern)

// ValidPlanName reports whether name may name a plan (model.PlanNamePattern).
func ValidPlanName(name string) bool { return planName.MatchString(name) }

// PutPlan creates the plan p.Name with p.Limits (as set: a zero field takes
// the node's default, model.Unlimited lifts it), or replaces an existing
// plan's limits as a whole, audited as actor's. created tells which.
func (s *Service) PutPlan(ctx context.Context, p model.Plan, actor string) (*model.Plan, bool, error) {
	if !ValidPlanName(p.Name) {
		return nil, false, fmt.Errorf("put plan %q: the name does not match %s", p.Name, model.PlanNamePattern)
	}
	created, err := s.store.PutPlan(ctx, &p, model.AuditEntry{Actor: actor, Action: "plan.put",
		Detail: map[string]any{"plan": p.Name, "limits": p.Limits}})
	if err != nil {
		return nil, false, err
	}
	s.keys.forgetAll()
	return &p, created, nil
}

// ListPlans returns every plan, by name.
func (s *Service) ListPlans(ctx context.Context) ([]model.Plan, error) {
	return s.store.ListPlans(ctx)
}

// GetPlan reads a plan: model.ErrNotFound when there is none of that name.
func (s *Service) GetPlan(ctx context.Context, name string) (*model.Plan, error) {
	return s.store.GetPlan(ctx, name)
}

// DeletePlan deletes a plan, audited as actor's: model.ErrNotFound when
// there is none of that name, model.ErrPlanInUse while a tenant is on it.
func (s *Service) DeletePlan(ctx context.Context, name string, actor string) error {
	return s.store.DeletePlan(ctx, name, model.AuditEntry{Actor: actor, Action: "plan.deleted",
		Detail: map[string]any{"plan": name}})
}

// SetPlan puts a tenant on a plan, or on none with nil, audited as actor's:
// model.ErrNoSuchPlan when the plan does not exist. Its limits apply as
// SetLimits's do.
func (s *Service) SetPlan(ctx context.Context, id uuid.UUID, plan *string, actor string) (*model.Tenant, error) {
	var name any
	if plan != nil {
		name = *plan
	}
	return s.changed(s.store.SetTenantPlan(ctx, id, plan, s.audit(id, actor, "tenant.plan_changed", map[string]any{"plan": name})))
}

// createPlan is the plan a new tenant goes on: the one asked for, else the
// node's default (Config.DefaultPlan), else none. fallback says the plan is
// the default, which the create drops (with a warning) if it does not exist.
func (s *Service) createPlan(asked *string) (plan *string, fallback bool) {
	switch {
	case asked != nil:
		return asked, false
	case s.defaultPlan != "":
		p := s.defaultPlan
		return &p, true
	default:
		return nil, false
	}
}

// isNoSuchPlan reports whether err refuses a plan that does not exist.
func isNoSuchPlan(err error) bool { return errors.Is(err, model.ErrNoSuchPlan) }
