package tenants

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// ErrUnauthenticated is returned for a missing, malformed, unknown, revoked
// or expired key.
var ErrUnauthenticated = errors.New("invalid API key")

// ErrScopeNotHeld refuses a key that would grant a scope its creator's key
// does not hold: a key can hand on its own rights, never more.
var ErrScopeNotHeld = errors.New("a key cannot grant a scope it does not hold")

// keyEncoding spells key ids and secrets in lowercase letters and digits
// only, so a key survives copy-paste, URLs and shell quoting.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

const (
	keyPrefix      = "hw_"
	keyIDBytes     = 8  // 13 characters: unique enough to find the row, and public
	keySecretBytes = 20 // 160 random bits
	// MaxKeyNameLength bounds a key's name, in characters.
	MaxKeyNameLength = 100
	// MaxUsableKeys bounds the keys a tenant may create for itself that
	// are usable at once (neither revoked nor expired): every key is a row,
	// an audit entry and a place in the nodes' key caches, and listing
	// them is one page. The operator may mint keys beyond it, so a tenant
	// at the bound is never locked out.
	MaxUsableKeys = 100
)

// ErrTooManyKeys refuses a key that would take its tenant over
// MaxUsableKeys.
var ErrTooManyKeys = fmt.Errorf("a tenant may hold at most %d usable API keys", MaxUsableKeys)

// KeySpec is what a new key is to be.
type KeySpec struct {
	// Name labels the key for its owner; may be empty.
	Name string
	// Scopes the key grants; empty means every scope (model.ScopeAll).
	Scopes []model.Scope
	// ExpiresAt, when set, must be in the future.
	ExpiresAt *time.Time
}

// FieldError is a KeySpec or rotation request the Service refuses: which
// field, and why.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Caller is who an API key authenticates: the tenant and the key itself,
// whose scopes decide what the call may do.
type Caller struct {
	Tenant *model.Tenant
	Key    *model.APIKey
}

// Actor names the caller in the audit log.
func (c *Caller) Actor() string { return model.KeyActor(c.Key.ID) }

// NewKey is a created key with its full value, shown once.
type NewKey struct {
	Key model.APIKey
	// APIKey is "hw_<key id>_<secret>"; only the secret's hash is stored.
	APIKey string
}

func newAPIKey(tenantID uuid.UUID, spec KeySpec, actor string) (string, *model.APIKey, error) {
	raw := make([]byte, keyIDBytes+keySecretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, fmt.Errorf("generate api key: %w", err)
	}
	keyID := keyEncoding.EncodeToString(raw[:keyIDBytes])
	secret := keyEncoding.EncodeToString(raw[keyIDBytes:])
	key := &model.APIKey{
		ID: keyID, TenantID: tenantID, SecretHash: hashSecret(secret),
		Name: spec.Name, Scopes: spec.Scopes, ExpiresAt: spec.ExpiresAt, CreatedBy: actor,
	}
	return keyPrefix + keyID + "_" + secret, key, nil
}

// hashSecret is a single SHA-256: the secret holds 160 random bits, so there
// is nothing for a slow password hash to protect against, and authenticating
// a request stays a microsecond affair (GitHub and Stripe tokens are stored
// the same way).
func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// parseAPIKey splits "hw_<key id>_<secret>".
func parseAPIKey(key string) (keyID, secret string, ok bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return "", "", false
	}
	keyID, secret, ok = strings.Cut(rest, "_")
	if !ok || keyID == "" || secret == "" || len(keyID) > 64 || len(secret) > 128 {
		return "", "", false
	}
	// Only keyEncoding's alphabet: anything else (invalid UTF-8 included,
	// which Postgres refuses with an error rather than "no such key") cannot
	// be a key, and is refused without a query.
	if !inKeyAlphabet(keyID) || !inKeyAlphabet(secret) {
		return "", "", false
	}
	return keyID, secret, true
}

// inKeyAlphabet reports whether s uses only the characters keyEncoding writes.
func inKeyAlphabet(s string) bool {
	for i := range len(s) {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// KeyID returns the public id of a well-formed key, for logs and revocation.
func KeyID(apiKey string) (string, bool) {
	keyID, _, ok := parseAPIKey(apiKey)
	return keyID, ok
}

// Authenticate returns the tenant and key an API key is, or
// ErrUnauthenticated. A key found valid is remembered for KeyCacheTTL; its
// expiry is checked on every call.
func (s *Service) Authenticate(ctx context.Context, apiKey string) (*Caller, error) {
	caller, _, _, err := s.authenticate(ctx, apiKey)
	return caller, err
}

// authenticate is Authenticate; when it refuses a key whose id names a key,
// refused is that key and its tenant, and why says why.
func (s *Service) authenticate(ctx context.Context, apiKey string) (caller, refused *Caller, why string, err error) {
	keyID, secret, ok := parseAPIKey(apiKey)
	if !ok || s.unknown.known(keyID) {
		return nil, nil, "", ErrUnauthenticated
	}
	found, err := s.lookupKey(ctx, keyID)
	if err != nil {
		return nil, nil, "", err
	}
	now := s.clock.Now()
	switch {
	case subtle.ConstantTimeCompare(found.Key.SecretHash, hashSecret(secret)) != 1:
		return nil, found, "wrong secret", ErrUnauthenticated
	case found.Key.RevokedAt != nil:
		return nil, found, "revoked", ErrUnauthenticated
	case !found.Key.Usable(now):
		return nil, found, "expired", ErrUnauthenticated
	}
	if err := tenantAdmits(found.Tenant); err != nil {
		return nil, found, "tenant " + string(found.Tenant.Status), err
	}
	if s.usage != nil {
		s.usage.Used(keyID, now)
	}
	return found, nil, "", nil
}

// lookupKey reads a key and its tenant, from the cache when it holds them:
// ErrUnauthenticated when no key has this id.
func (s *Service) lookupKey(ctx context.Context, keyID string) (*Caller, error) {
	if caller, cached := s.keys.get(keyID); cached {
		return caller, nil
	}
	lookup := s.keys.begin()
	stored, tenant, err := s.store.GetAPIKey(ctx, keyID)
	if errors.Is(err, model.ErrNotFound) {
		s.unknown.remember(keyID)
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate key %s: %w", keyID, err)
	}
	caller := &Caller{Tenant: s.resolve(tenant), Key: stored}
	if stored.RevokedAt == nil {
		s.keys.put(keyID, caller, lookup)
	}
	return caller, nil
}

// AuthenticateSession returns the tenant and key a dashboard session signed
// in with, or ErrUnauthenticated when the key is no longer usable (revoked,
// expired, deleted) or is not the tenant's. The session's signature stands
// for the secret, which was checked at sign-in; the key itself is re-read
// as Authenticate reads it, cache and all, so that a revocation ends its
// sessions as fast as it ends the key's calls.
func (s *Service) AuthenticateSession(ctx context.Context, tenantID uuid.UUID, keyID string) (*Caller, error) {
	if !inKeyAlphabet(keyID) || s.unknown.known(keyID) {
		return nil, ErrUnauthenticated
	}
	caller, err := s.lookupKey(ctx, keyID)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	if caller.Tenant.ID != tenantID || !caller.Key.Usable(now) {
		return nil, ErrUnauthenticated
	}
	if err := tenantAdmits(caller.Tenant); err != nil {
		return nil, err
	}
	if s.usage != nil {
		s.usage.Used(keyID, now)
	}
	return caller, nil
}

// CreateKey adds a key to a tenant. grantor is the caller's key when a
// tenant creates it (the new key's scopes must be among the grantor's:
// ErrScopeNotHeld otherwise), nil when the operator does (a recovery key may
// hold any scope). An invalid spec is a *FieldError; an unknown tenant
// model.ErrNotFound.
func (s *Service) CreateKey(ctx context.Context, tenantID uuid.UUID, spec KeySpec, grantor *model.APIKey, actor string) (*NewKey, error) {
	if err := s.checkKeySpec(&spec); err != nil {
		return nil, err
	}
	grantorID := ""
	if grantor != nil {
		grantorID = grantor.ID
		for _, scope := range spec.Scopes {
			if !grantor.Allows(scope) {
				return nil, fmt.Errorf("scope %q: %w", scope, ErrScopeNotHeld)
			}
		}
		// Nor can it outlive its creator: an expiring key (a contractor's,
		// a CI run's) would otherwise mint itself a permanent successor.
		if g := grantor.ExpiresAt; g != nil {
			switch {
			case spec.ExpiresAt == nil:
				spec.ExpiresAt = g
			case spec.ExpiresAt.After(*g):
				return nil, &FieldError{"expires_at", "must be no later than the creating key's own expiry, " + g.UTC().Format(time.RFC3339)}
			}
		}
	}
	if grantor != nil {
		// Checked, not reserved: concurrent creations may together go a
		// key or two over, like the other quotas.
		keys, err := s.store.ListAPIKeys(ctx, tenantID)
		if err != nil {
			return nil, err
		}
		usable := 0
		for i := range keys {
			if keys[i].Usable(s.clock.Now()) {
				usable++
			}
		}
		if usable >= MaxUsableKeys {
			return nil, ErrTooManyKeys
		}
	}
	apiKey, key, err := newAPIKey(tenantID, spec, actor)
	if err != nil {
		return nil, err
	}
	detail := map[string]any{"key_id": key.ID, "name": key.Name, "scopes": key.Scopes}
	if key.ExpiresAt != nil {
		detail["expires_at"] = key.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if err := s.store.CreateAPIKey(ctx, key, grantorID, s.audit(tenantID, actor, "key.created", detail)); err != nil {
		if errors.Is(err, model.ErrGrantorUnusable) {
			// Revoked or expired since this node last checked it.
			return nil, ErrUnauthenticated
		}
		return nil, err
	}
	s.unknown.forget(key.ID)
	return &NewKey{Key: *key, APIKey: apiKey}, nil
}

func (s *Service) checkKeySpec(spec *KeySpec) error {
	if n := utf8.RuneCountInString(spec.Name); n > MaxKeyNameLength || !utf8.ValidString(spec.Name) || strings.ContainsRune(spec.Name, 0) {
		return &FieldError{"name", fmt.Sprintf("must be at most %d characters of valid UTF-8, without NUL", MaxKeyNameLength)}
	}
	if len(spec.Scopes) == 0 {
		spec.Scopes = []model.Scope{model.ScopeAll}
	}
	known := model.Scopes()
	for i, scope := range spec.Scopes {
		if !slices.Contains(known, scope) {
			return &FieldError{fmt.Sprintf("scopes[%d]", i), fmt.Sprintf("unknown scope %q; one of %s", scope, model.JoinScopes(known, ", "))}
		}
	}
	slices.Sort(spec.Scopes)
	spec.Scopes = slices.Compact(spec.Scopes)
	if spec.ExpiresAt != nil {
		// Postgres keeps microseconds: the key shown at creation is the
		// key as stored.
		at := spec.ExpiresAt.UTC().Truncate(time.Microsecond)
		if !at.After(s.clock.Now()) {
			return &FieldError{"expires_at", "must be in the future"}
		}
		spec.ExpiresAt = &at
	}
	return nil
}

// ListKeys returns a tenant's keys, revoked and expired ones included,
// newest first.
func (s *Service) ListKeys(ctx context.Context, tenantID uuid.UUID) ([]model.APIKey, error) {
	return s.store.ListAPIKeys(ctx, tenantID)
}

// RevokeKey makes one of a tenant's keys unusable: at once on this node,
// within KeyCacheTTL on the others. Revoking a revoked key is not an error.
// revoker is the caller's key when a tenant revokes (nil for the operator):
// it may revoke only keys whose every scope it holds, so a narrow
// keys:manage key cannot lock its tenant out by revoking its full-access
// keys (ErrScopeNotHeld).
func (s *Service) RevokeKey(ctx context.Context, tenantID uuid.UUID, keyID string, revoker *model.APIKey, actor string) (*model.APIKey, error) {
	if !inKeyAlphabet(keyID) || len(keyID) > 64 {
		return nil, model.ErrNotFound
	}
	if revoker != nil {
		target, _, err := s.store.GetAPIKey(ctx, keyID)
		if err != nil {
			return nil, err
		}
		if target.TenantID != tenantID {
			return nil, model.ErrNotFound
		}
		for _, scope := range target.Scopes {
			if !revoker.Allows(scope) {
				return nil, fmt.Errorf("key %s holds scope %q: %w", keyID, scope, ErrScopeNotHeld)
			}
		}
	}
	key, err := s.store.RevokeAPIKey(ctx, tenantID, keyID, s.audit(tenantID, actor, "key.revoked", map[string]any{"key_id": keyID}))
	if err != nil {
		return nil, err
	}
	s.keys.forget(keyID)
	return key, nil
}
