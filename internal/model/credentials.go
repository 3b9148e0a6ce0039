package model

import (
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// APIKey is the stored form of a tenant's API key: its public id and the hash
// of its secret, never the secret itself.
type APIKey struct {
	ID         string
	TenantID   uuid.UUID
	SecretHash []byte
	// Name is the owner's label ("ci", "billing-service"); may be empty.
	Name string
	// Scopes are what the key may do; ScopeAll grants everything.
	Scopes    []Scope
	CreatedAt time.Time
	// CreatedBy is the actor that created the key (see Actor).
	CreatedBy string
	// ExpiresAt, when set, ends the key's validity.
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// Usable reports whether the key may authenticate a call at now.
func (k *APIKey) Usable(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// Allows reports whether the key grants scope.
func (k *APIKey) Allows(scope Scope) bool {
	return slices.Contains(k.Scopes, ScopeAll) || slices.Contains(k.Scopes, scope)
}

// Scope is one permission an API key may carry.
type Scope string

// The scopes of API keys. Each operation of the API names the one it needs
// (x-hookwheel-scope in the OpenAPI document).
const (
	ScopeAll            Scope = "*"
	ScopeTasksRead      Scope = "tasks:read"
	ScopeTasksWrite     Scope = "tasks:write"
	ScopeSchedulesRead  Scope = "schedules:read"
	ScopeSchedulesWrite Scope = "schedules:write"
	ScopeTopicsRead     Scope = "topics:read"
	ScopeTopicsWrite    Scope = "topics:write"
	ScopeFlowKeysRead   Scope = "flow-keys:read"
	ScopeFlowKeysWrite  Scope = "flow-keys:write"
	ScopeKeysManage     Scope = "keys:manage"
	ScopeSecretsManage  Scope = "secrets:manage"
	ScopeAuditRead      Scope = "audit:read"
)

// Scopes lists every scope a key may be given, ScopeAll first.
func Scopes() []Scope {
	return []Scope{ScopeAll, ScopeTasksRead, ScopeTasksWrite, ScopeSchedulesRead, ScopeSchedulesWrite,
		ScopeTopicsRead, ScopeTopicsWrite, ScopeFlowKeysRead, ScopeFlowKeysWrite, ScopeKeysManage, ScopeSecretsManage, ScopeAuditRead}
}

// JoinScopes spells scopes for people: "tasks:read, keys:manage".
func JoinScopes(scopes []Scope, sep string) string {
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	return strings.Join(names, sep)
}

// SigningSecret is one of a tenant's webhook signing secrets, in its stored
// form.
type SigningSecret struct {
	// ID is public: it names the secret in listings and in the
	// Hookwheel-Signature JWT's kid header.
	ID string `json:"id"`
	// Algorithm is how the secret signs, a signing.Algorithm:
	// "hmac-sha256" or "ed25519". Empty is "hmac-sha256", as secrets made
	// before Ed25519 keys existed are stored.
	Algorithm string `json:"algorithm,omitempty"`
	// Value is the private part, "whsec_..." (HMAC) or "whsk_..."
	// (Ed25519) or, when the installation has an encryption key, that
	// string sealed by it (see internal/keyring).
	Value string `json:"value"`
	// PublicKey is an Ed25519 key's public half, "whpk_...", shown to the
	// tenant for its receivers; empty for an HMAC secret. It is public, so
	// it is stored as it is.
	PublicKey string    `json:"public_key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt ends a superseded secret's grace period; nil for the
	// current secret.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// SealContext binds the sealed form of the secret to its tenant and id (see
// keyring.Keyring.Seal): a sealed value copied onto another tenant's row
// does not open there.
func (s SigningSecret) SealContext(tenantID uuid.UUID) string {
	return "signing-secret/" + tenantID.String() + "/" + s.ID
}

// ActiveSigningSecrets returns the secrets that sign at now, current first:
// those whose grace period has not ended.
func ActiveSigningSecrets(secrets []SigningSecret, now time.Time) []SigningSecret {
	active := make([]SigningSecret, 0, len(secrets))
	for _, s := range secrets {
		if s.ExpiresAt == nil || now.Before(*s.ExpiresAt) {
			active = append(active, s)
		}
	}
	return active
}

// AuditEntry records one change to a tenant's or the installation's
// configuration: who did what, when.
type AuditEntry struct {
	ID uuid.UUID
	// TenantID is the tenant concerned; nil for the installation itself.
	TenantID *uuid.UUID
	// Actor is who acted: ActorOperator, ActorCLI or KeyActor(key id).
	Actor string
	// Action names the change, "<object>.<verb>" (e.g. "key.revoked").
	Action string
	// Detail holds what changed; never a secret.
	Detail map[string]any
	At     time.Time
}

// Actors that are not API keys.
const (
	ActorOperator = "operator" // the admin API, authenticated by HOOKWHEEL_ADMIN_TOKEN
	ActorCLI      = "cli"      // the hookwheel command, run with database access
)

// KeyActor is the actor of a change made with a tenant's API key.
func KeyActor(keyID string) string { return "key:" + keyID }

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	// TenantID limits the entries to one tenant's; nil lists every entry.
	TenantID *uuid.UUID
	// Before is the cursor: entries older than this id.
	Before *uuid.UUID
	// Limit caps the entries returned.
	Limit int
}
