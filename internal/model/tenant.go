package model

import (
	"net/netip"
	"time"

	"github.com/google/uuid"
)

// Tenant is one customer of a hookwheel installation.
type Tenant struct {
	ID   uuid.UUID
	Name string
	// SigningSecrets sign the tenant's webhooks, current first, then those
	// still in a rotation's grace period (and expired ones not yet pruned:
	// see ActiveSigningSecrets).
	SigningSecrets []SigningSecret
	CreatedAt      time.Time
	// Retry holds the tenant's defaults for its tasks' retry policy.
	Retry RetryDefaults
	// Limits are the tenant's effective rate limits and quotas, resolved
	// (a zero field is unlimited): what every enforcement point reads. The
	// store resolves LimitOverrides over PlanLimits; tenants.Service, which
	// knows the node's defaults, resolves them over those too.
	Limits Limits
	// LimitOverrides are the tenant's own limits as the operator set them:
	// a zero field takes the plan's, else the node's default;
	// model.Unlimited lifts it.
	LimitOverrides Limits
	// Plan names the tenant's plan; nil: none.
	Plan *string
	// PlanLimits are the limits of the tenant's plan as set (read with the
	// tenant, so a plan's change reaches every reader of its tenants);
	// zero without a plan.
	PlanLimits Limits
	// TargetAllowCIDRs are private ranges this tenant's webhooks may reach,
	// granted by the operator to this tenant alone.
	TargetAllowCIDRs []netip.Prefix
	// Retention is how long the tenant's finished tasks are kept; nil
	// means the node default (HOOKWHEEL_RETENTION).
	Retention *time.Duration
}

// TenantSummary is a tenant as the operator's list shows it.
type TenantSummary struct {
	Tenant
	// WaitingTasks counts the tenant's scheduled, retrying and dispatching
	// tasks, up to the bound the list was read with.
	WaitingTasks int
}

// RetryDefaults are a tenant's own defaults, field by field; nil means
// hookwheel's default.
type RetryDefaults struct {
	MaxAttempts *int
	MinBackoff  *time.Duration
	MaxBackoff  *time.Duration
}

// Plan is a named set of limits that tenants are given: a tenant's own
// limits override its plan's field by field, the plan's the node's defaults.
type Plan struct {
	// Name matches PlanNamePattern.
	Name string
	// Limits as set: a zero field takes the node's default, Unlimited lifts it.
	Limits    Limits
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PlanNamePattern is what a plan's name must match: lowercase letters,
// digits, '-' and '_', at most 63 characters, starting with a letter or digit.
const PlanNamePattern = `^[a-z0-9][a-z0-9_-]{0,62}$`
