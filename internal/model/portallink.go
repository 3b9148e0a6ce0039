package model

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// PortalLink is a tenant's read-only view of one label's tasks, for the
// tenant's own customer: whoever holds its token sees the tasks carrying
// Label (LabelKey:LabelValue) and their attempts, and nothing else, until
// ExpiresAt or a revocation.
type PortalLink struct {
	ID         uuid.UUID
	TenantID   uuid.UUID
	SecretHash []byte
	LabelKey   string
	LabelValue string
	// Name and Description are the tenant's words for the link, shown to
	// the tenant and on the portal's page; may be empty.
	Name, Description string
	// CreatedBy is the actor that created the link (see Actor).
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// Label is the link's label as a filter spells it, "key:value".
func (l *PortalLink) Label() string { return l.LabelKey + ":" + l.LabelValue }

// Usable reports whether the link may open the portal at now.
func (l *PortalLink) Usable(now time.Time) bool {
	return l.RevokedAt == nil && now.Before(l.ExpiresAt)
}

// ErrPortalLinkQuota refuses a portal link that would take its tenant over
// the live links it may hold.
var ErrPortalLinkQuota = errors.New("portal link quota reached")
