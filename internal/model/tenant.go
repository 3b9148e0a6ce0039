package model

import (
	"net/netip"
	"time"

	"github.com/google/uuid"
)

// Tenant is one customer of a hookwheel installation.
type Tenant struct {
	ID            uuid.UUID
	Name          string
	SigningSecret string
	CreatedAt     time.Time
	// Retry holds the tenant's defaults for its tasks' retry policy.
	Retry RetryDefaults
	// Limits are the tenant's rate limits and quotas.
	Limits Limits
	// TargetAllowCIDRs are private ranges this tenant's webhooks may reach,
	// granted by the operator to this tenant alone.
	TargetAllowCIDRs []netip.Prefix
}

// RetryDefaults are a tenant's own defaults, field by field; nil means
// hookwheel's default.
type RetryDefaults struct {
	MaxAttempts *int
	MinBackoff  *time.Duration
	MaxBackoff  *time.Duration
}

// APIKey is the stored form of a tenant's API key: its public id and the hash
// of its secret, never the secret itself.
type APIKey struct {
	ID         string
	TenantID   uuid.UUID
	SecretHash []byte
	CreatedAt  time.Time
	RevokedAt  *time.Time
}
