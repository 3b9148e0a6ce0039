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
	// OperationsURL is where hookwheel tells the tenant of what it did to
	// its deliveries (a target it paused, one recovered), by a signed POST
	// sent as one of its tasks; nil: nowhere.
	OperationsURL *string
	// Status is where the tenant is in its life: active, suspended or
	// being deleted.
	Status TenantStatus
	// Deletion is the progress of the tenant's deletion while Status is
	// TenantDeleting; nil otherwise.
	Deletion *TenantDeletion
}

// TenantStatus is where a tenant is in its life.
type TenantStatus string

const (
	// TenantActive is a tenant in use.
	TenantActive TenantStatus = "active"
	// TenantSuspended is a tenant the operator suspended: its calls are
	// refused, its due tasks wait (unclaimed, not attempted) and its
	// schedules keep materialising, until it is resumed.
	TenantSuspended TenantStatus = "suspended"
	// TenantDeleting is a tenant whose deletion was asked for: its keys are
	// refused, its tasks held, and its rows deleted in the background, its
	// own row last.
	TenantDeleting TenantStatus = "deleting"
)

// Held reports whether the dispatchers hold the tenant's tasks.
func (s TenantStatus) Held() bool { return s != TenantActive && s != "" }

// TenantDeletion is how far a tenant's deletion has gone.
type TenantDeletion struct {
	RequestedAt time.Time
	// Deleted counts the rows deleted so far, by table ("tasks",
	// "attempts", "schedules", ...).
	Deleted map[string]int64
}

// DeletionBatch is what one batch of a tenant's deletion did.
type DeletionBatch struct {
	// Table is the table the batch deleted from, and Rows how many of its
	// rows (Attempts more of attempts, with a batch of tasks).
	Table    string
	Rows     int
	Attempts int
	// Done is set by the batch that deleted the tenant's row: nothing of
	// it is left.
	Done bool
	// Busy is set when another node was deleting a batch of this tenant:
	// nothing was done.
	Busy bool
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
