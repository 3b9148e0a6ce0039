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
	// Limits are the tenant's rate limits and quotas.
	Limits Limits
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
