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
	// store resolves LimitOverrides alone; tenants.Service, which knows the
	// node's defaults, resolves them over those.
	Limits Limits
	// LimitOverrides are the tenant's own limits as the operator set them:
	// a zero field takes the node's default, model.Unlimited lifts it.
	LimitOverrides Limits
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
