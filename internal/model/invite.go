package model

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// Invite is the stored form of an invitation to sign up: the hash of its
// code, never the code itself.
type Invite struct {
	// ID is a UUIDv7: id order is creation order.
	ID       uuid.UUID
	CodeHash []byte
	// Prefix is the start of the code, shown so that codes can be told
	// apart without being held.
	Prefix string
	// Note is the operator's word on whom the invite is for; may be empty.
	Note string
	// CreatedBy is the actor that created it (see AuditEntry.Actor).
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	// UsedAt is when a sign-up redeemed it; UsedBy the tenant that sign-up
	// made, nil while it is being made (or if it stopped before).
	UsedAt *time.Time
	UsedBy *uuid.UUID
}

// InviteStatus is what an invite can still do.
type InviteStatus string

// The statuses of an invite.
const (
	InviteUnused  InviteStatus = "unused"
	InviteUsed    InviteStatus = "used"
	InviteExpired InviteStatus = "expired"
)

// Status is what the invite is at now: used once redeemed, else expired
// from ExpiresAt on.
func (i *Invite) Status(now time.Time) InviteStatus {
	switch {
	case i.UsedAt != nil:
		return InviteUsed
	case !now.Before(i.ExpiresAt):
		return InviteExpired
	}
	return InviteUnused
}

// Why an invite code did not redeem.
var (
	// ErrInviteUnknown: no invite has this code (never made, or revoked).
	ErrInviteUnknown = errors.New("unknown invite code")
	// ErrInviteUsed: the code has signed up a tenant already.
	ErrInviteUsed = errors.New("invite code already used")
	// ErrInviteExpired: the code's time ran out before it was used.
	ErrInviteExpired = errors.New("invite code expired")
)

// ActorSignup is the audit log's actor of what a sign-up (POST /v1/signup)
// does: it has no credential of its own; the entry's detail names the
// client's address.
const ActorSignup = "signup"
