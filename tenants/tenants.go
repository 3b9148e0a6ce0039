// Package tenants manages hookwheel's customers: tenants, their API keys
// (shown once, stored only as a hash behind a public key id), their webhook
// signing secrets and settings, and it tells which tenant an API key belongs
// to. It knows nothing of HTTP: reading the key off a request is the API's.
package tenants

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
)

// ErrUnauthenticated is returned for a missing, malformed, unknown or revoked key.
var ErrUnauthenticated = errors.New("invalid API key")

// keyEncoding spells key ids and secrets in lowercase letters and digits
// only, so a key survives copy-paste, URLs and shell quoting.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

const (
	keyPrefix      = "hw_"
	keyIDBytes     = 8  // 13 characters: unique enough to find the row, and public
	keySecretBytes = 20 // 160 random bits
)

// Store is where tenants and keys live: the store methods the Service calls.
// *store.DB is one.
type Store interface {
	CreateTenant(ctx context.Context, t *model.Tenant, key *model.APIKey) error
	GetAPIKey(ctx context.Context, id string) (*model.APIKey, *model.Tenant, error)
	RevokeAPIKey(ctx context.Context, tenantID uuid.UUID, keyID string) error
	GetTenant(ctx context.Context, id uuid.UUID) (*model.Tenant, error)
	SetTenantRetry(ctx context.Context, id uuid.UUID, r model.RetryDefaults) (*model.Tenant, error)
	SetTenantLimits(ctx context.Context, id uuid.UUID, l model.Limits) (*model.Tenant, error)
	SetTenantTargetGrants(ctx context.Context, id uuid.UUID, cidrs []netip.Prefix) (*model.Tenant, error)
}

// Config configures a Service.
type Config struct {
	// Store is where tenants and keys live. Required.
	Store Store
	// UnknownKeyTTL is how long a key id found to name no key is answered
	// from memory, without a query. Default 10s.
	UnknownKeyTTL time.Duration
	// UnknownKeys bounds how many such ids are remembered; the oldest go
	// first. Default 10,000.
	UnknownKeys int
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Service creates tenants and authenticates their keys.
type Service struct {
	store   Store
	unknown *unknownKeys
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.UnknownKeyTTL <= 0 {
		cfg.UnknownKeyTTL = 10 * time.Second
	}
	if cfg.UnknownKeys <= 0 {
		cfg.UnknownKeys = 10_000
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Service{store: cfg.Store, unknown: newUnknownKeys(cfg.UnknownKeys, cfg.UnknownKeyTTL, cfg.Clock)}
}

// Created is a new tenant with the credentials shown to its owner once.
type Created struct {
	Tenant model.Tenant
	// APIKey is the full key, "hw_<key id>_<secret>"; only its hash is stored.
	APIKey string
}

// Create makes a tenant with a fresh API key and signing secret.
func (s *Service) Create(ctx context.Context, name string) (*Created, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("create tenant id: %w", err)
	}
	secret, err := signing.NewSecret()
	if err != nil {
		return nil, err
	}
	apiKey, stored, err := newAPIKey(id)
	if err != nil {
		return nil, err
	}
	t := model.Tenant{ID: id, Name: name, SigningSecret: secret}
	if err := s.store.CreateTenant(ctx, &t, stored); err != nil {
		return nil, err
	}
	// Key ids are random, so one tried before it existed is all but
	// impossible; a new key must work at once all the same.
	s.unknown.forget(stored.ID)
	return &Created{Tenant: t, APIKey: apiKey}, nil
}

func newAPIKey(tenantID uuid.UUID) (string, *model.APIKey, error) {
	raw := make([]byte, keyIDBytes+keySecretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, fmt.Errorf("generate api key: %w", err)
	}
	keyID := keyEncoding.EncodeToString(raw[:keyIDBytes])
	secret := keyEncoding.EncodeToString(raw[keyIDBytes:])
	return keyPrefix + keyID + "_" + secret, &model.APIKey{ID: keyID, TenantID: tenantID, SecretHash: hashSecret(secret)}, nil
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

// Authenticate returns the tenant a key belongs to, or ErrUnauthenticated.
func (s *Service) Authenticate(ctx context.Context, apiKey string) (*model.Tenant, error) {
	keyID, secret, ok := parseAPIKey(apiKey)
	if !ok || s.unknown.known(keyID) {
		return nil, ErrUnauthenticated
	}
	stored, tenant, err := s.store.GetAPIKey(ctx, keyID)
	if errors.Is(err, model.ErrNotFound) {
		s.unknown.remember(keyID)
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate key %s: %w", keyID, err)
	}
	if subtle.ConstantTimeCompare(stored.SecretHash, hashSecret(secret)) != 1 || stored.RevokedAt != nil {
		return nil, ErrUnauthenticated
	}
	return tenant, nil
}

// Get reads a tenant.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*model.Tenant, error) {
	return s.store.GetTenant(ctx, id)
}

// SetRetryDefaults replaces the retry policy defaults of a tenant's new tasks.
func (s *Service) SetRetryDefaults(ctx context.Context, id uuid.UUID, r model.RetryDefaults) (*model.Tenant, error) {
	return s.store.SetTenantRetry(ctx, id, r)
}

// SetLimits replaces a tenant's rate limits and quotas as a whole. API limits
// apply from the tenant's next call (they are read with its key); dispatch
// limits within the dispatchers' cache time of a few seconds.
func (s *Service) SetLimits(ctx context.Context, id uuid.UUID, l model.Limits) (*model.Tenant, error) {
	return s.store.SetTenantLimits(ctx, id, l)
}

// KeyID returns the public id of a well-formed key, for logs and revocation.
func KeyID(apiKey string) (string, bool) {
	keyID, _, ok := parseAPIKey(apiKey)
	return keyID, ok
}

// Revoke makes one of a tenant's keys unusable.
func (s *Service) Revoke(ctx context.Context, tenantID uuid.UUID, keyID string) error {
	return s.store.RevokeAPIKey(ctx, tenantID, keyID)
}

// SetTargetGrants replaces the private ranges this tenant's webhooks may
// reach. The API checks new tasks against them at once; dispatchers read
// them with every claim.
func (s *Service) SetTargetGrants(ctx context.Context, id uuid.UUID, cidrs []netip.Prefix) (*model.Tenant, error) {
	return s.store.SetTenantTargetGrants(ctx, id, cidrs)
}
