// Package tenants manages hookwheel's customers and their credentials:
// tenants, their settings and their life (suspended, resumed, deleted: the
// Deleter removes a deleted tenant's rows in the background); API keys
// (shown once, stored only as a hash behind a public key id, with scopes,
// expiry and last use); webhook signing secrets (rotated with a grace
// period, sealed at rest under the installation's keyring); and the audit
// log of every change to them. It tells which tenant and key an API key is.
// It knows nothing of HTTP: reading the key off a request is the API's.
package tenants

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
)

// Store is where tenants and keys live: the store methods the Service calls.
// *store.DB is one. Each change takes the audit entry that records it, to be
// written in the same transaction.
type Store interface {
	CreateTenant(ctx context.Context, t *model.Tenant, key *model.APIKey, audit model.AuditEntry) error
	GetTenant(ctx context.Context, id uuid.UUID) (*model.Tenant, error)
	ListTenants(ctx context.Context, after *uuid.UUID, limit, upTo int) ([]model.TenantSummary, error)
	SetTenantRetry(ctx context.Context, id uuid.UUID, r model.RetryDefaults, audit model.AuditEntry) (*model.Tenant, error)
	SetTenantLimits(ctx context.Context, id uuid.UUID, l model.Limits, audit model.AuditEntry) (*model.Tenant, error)
	SetTenantTargetGrants(ctx context.Context, id uuid.UUID, cidrs []netip.Prefix, audit model.AuditEntry) (*model.Tenant, error)
	SetTenantRetention(ctx context.Context, id uuid.UUID, retention *time.Duration, audit model.AuditEntry) (*model.Tenant, error)
	SetTenantOperationsURL(ctx context.Context, id uuid.UUID, url *string, audit model.AuditEntry) (*model.Tenant, error)
	SetTenantStatus(ctx context.Context, id uuid.UUID, to model.TenantStatus, from []model.TenantStatus,
		audit model.AuditEntry) (*model.Tenant, error)

	CreateAPIKey(ctx context.Context, key *model.APIKey, grantorID string, audit model.AuditEntry) error
	GetAPIKey(ctx context.Context, id string) (*model.APIKey, *model.Tenant, error)
	ListAPIKeys(ctx context.Context, tenantID uuid.UUID) ([]model.APIKey, error)
	RevokeAPIKey(ctx context.Context, tenantID uuid.UUID, keyID string, audit model.AuditEntry) (*model.APIKey, error)
	TouchAPIKeys(ctx context.Context, lastUsed map[string]time.Time) error

	CreatePortalLink(ctx context.Context, link *model.PortalLink, grantorID string, maxLive int, audit model.AuditEntry) error
	GetPortalLink(ctx context.Context, id uuid.UUID) (*model.PortalLink, *model.Tenant, error)
	ListPortalLinks(ctx context.Context, tenantID uuid.UUID, before *uuid.UUID, limit int) ([]model.PortalLink, error)
	RevokePortalLink(ctx context.Context, tenantID, id uuid.UUID, audit model.AuditEntry) (*model.PortalLink, error)

	UpdateSigningSecrets(ctx context.Context, tenantID uuid.UUID,
		change func([]model.SigningSecret) ([]model.SigningSecret, error), audit *model.AuditEntry) (*model.Tenant, error)
	TenantIDsAfter(ctx context.Context, after uuid.UUID, limit int) ([]uuid.UUID, error)

	RecordAudit(ctx context.Context, entry model.AuditEntry) error
	ListAudit(ctx context.Context, f model.AuditFilter) ([]model.AuditEntry, error)

	PlanStore
	MeteringStore

	SharedSecret(ctx context.Context, name, candidate string) (string, error)
	ListSharedSecrets(ctx context.Context) (map[string]string, error)
	ReplaceSharedSecret(ctx context.Context, name, old, value string) error
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
	// KeyCacheTTL is how long a key found valid is answered from memory
	// with its tenant: a key revoked on another node is refused here within
	// this time (a revocation on this node, at once). A change to the
	// tenant itself (suspended, deleted, new limits) drops its keys at once
	// wherever the node hears it announced (TenantChanged), else within
	// this time too. Default 2s; negative disables the cache, so that every
	// call reads the key from Postgres.
	KeyCacheTTL time.Duration
	// KeyCacheSize bounds the keys cached. Default 10,000.
	KeyCacheSize int
	// Keyring seals new signing secrets and opens stored ones. Default:
	// the empty keyring, which stores them in plaintext.
	Keyring *keyring.Keyring
	// Usage receives each key's use, to record last_used_at. Default:
	// none recorded.
	Usage *UsageRecorder
	// Clock defaults to the real clock.
	Clock clock.Clock
	// DefaultLimits are the node's limits for a tenant that sets none of its
	// own, field by field: every tenant the Service returns carries in
	// Limits its own limits resolved over these (model.Limits.Resolve).
	// They are applied when a tenant is read, never written into it, so a
	// changed default reaches every tenant without an override. Default
	// none: a tenant is limited only by what it sets. The binary sets
	// model.DefaultNodeLimits, changed by HOOKWHEEL_DEFAULT_*.
	DefaultLimits model.Limits
	// DefaultPlan is the plan a new tenant goes on when its create names
	// none (HOOKWHEEL_DEFAULT_PLAN). Plans are made through the API once
	// nodes run, so one that does not exist (yet) is no error: the tenant
	// goes on no plan, and each such create logs a warning. Default none.
	DefaultPlan string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service creates tenants, authenticates their keys and manages their
// credentials.
type Service struct {
	store   Store
	clock   clock.Clock
	keyring *keyring.Keyring
	usage   *UsageRecorder
	unknown *unknownKeys
	keys    *keyCache
	// defaults are Config.DefaultLimits.
	defaults    model.Limits
	defaultPlan string
	logger      *slog.Logger
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.UnknownKeyTTL <= 0 {
		cfg.UnknownKeyTTL = 10 * time.Second
	}
	if cfg.UnknownKeys <= 0 {
		cfg.UnknownKeys = 10_000
	}
	if cfg.KeyCacheTTL == 0 {
		cfg.KeyCacheTTL = 2 * time.Second
	}
	if cfg.KeyCacheSize <= 0 {
		cfg.KeyCacheSize = 10_000
	}
	if cfg.Keyring == nil {
		cfg.Keyring = &keyring.Keyring{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{
		store:       cfg.Store,
		clock:       cfg.Clock,
		keyring:     cfg.Keyring,
		usage:       cfg.Usage,
		unknown:     newUnknownKeys(cfg.UnknownKeys, cfg.UnknownKeyTTL, cfg.Clock),
		keys:        newKeyCache(cfg.KeyCacheSize, cfg.KeyCacheTTL, cfg.Clock),
		defaults:    cfg.DefaultLimits,
		defaultPlan: cfg.DefaultPlan,
		logger:      cfg.Logger,
	}
}

// DefaultLimits are the node's limits for tenants without their own.
func (s *Service) DefaultLimits() model.Limits { return s.defaults }

// resolve sets t.Limits to the limits that apply to t: its own over its
// plan's over the node's defaults. Every tenant leaving the Service goes
// through it.
func (s *Service) resolve(t *model.Tenant) *model.Tenant {
	if t != nil {
		t.Limits = t.LimitOverrides.Resolve(t.PlanLimits, s.defaults)
	}
	return t
}

// Created is a new tenant with the credentials shown to its owner once.
type Created struct {
	Tenant model.Tenant
	// APIKey is the full key, "hw_<key id>_<secret>"; only its hash is stored.
	APIKey string
	// SigningSecret is the plaintext of the tenant's first signing secret.
	SigningSecret string
}

// Create makes a tenant with a fresh full-access API key and signing secret,
// on the node's default plan (Config.DefaultPlan).
func (s *Service) Create(ctx context.Context, name string, actor string) (*Created, error) {
	return s.CreateOn(ctx, name, nil, actor)
}

// CreateOn is Create on plan, or on the node's default plan when plan is
// nil: model.ErrNoSuchPlan when the plan asked for does not exist.
func (s *Service) CreateOn(ctx context.Context, name string, plan *string, actor string) (*Created, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("create tenant id: %w", err)
	}
	secret, plain, err := s.newSigningSecret(id, signing.HMACSHA256)
	if err != nil {
		return nil, err
	}
	apiKey, stored, err := newAPIKey(id, KeySpec{Name: "initial", Scopes: []model.Scope{model.ScopeAll}}, actor)
	if err != nil {
		return nil, err
	}
	plan, fallback := s.createPlan(plan)
	t := model.Tenant{ID: id, Name: name, SigningSecrets: []model.SigningSecret{secret}, Plan: plan}
	detail := map[string]any{"name": name, "key_id": stored.ID, "signing_secret_id": secret.ID}
	if plan != nil {
		detail["plan"] = *plan
	}
	audit := model.AuditEntry{TenantID: &id, Actor: actor, Action: "tenant.created", Detail: detail}
	err = s.store.CreateTenant(ctx, &t, stored, audit)
	if fallback && isNoSuchPlan(err) {
		s.logger.Warn("the default plan (HOOKWHEEL_DEFAULT_PLAN) does not exist; the new tenant is on no plan",
			"plan", *plan, "tenant", id)
		t.Plan = nil
		delete(detail, "plan")
		err = s.store.CreateTenant(ctx, &t, stored, audit)
	}
	if err != nil {
		return nil, err
	}
	// Key ids are random, so one tried before it existed is all but
	// impossible; a new key must work at once all the same.
	s.unknown.forget(stored.ID)
	s.resolve(&t)
	return &Created{Tenant: t, APIKey: apiKey, SigningSecret: plain}, nil
}

// Get reads a tenant.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*model.Tenant, error) {
	t, err := s.store.GetTenant(ctx, id)
	return s.resolve(t), err
}

// WaitingCountLimit is where List stops counting a tenant's waiting tasks:
// the count is a range scan over them, and a page lists up to hundreds of
// tenants.
const WaitingCountLimit = 10_000

// List reads up to limit tenants, oldest first, after the tenant with id
// after when it is given, each with its waiting tasks (scheduled, retrying
// or dispatching) counted up to WaitingCountLimit.
func (s *Service) List(ctx context.Context, after *uuid.UUID, limit int) ([]model.TenantSummary, error) {
	list, err := s.store.ListTenants(ctx, after, limit, WaitingCountLimit)
	for i := range list {
		s.resolve(&list[i].Tenant)
	}
	return list, err
}

// SetRetryDefaults replaces the retry policy defaults of a tenant's new tasks.
func (s *Service) SetRetryDefaults(ctx context.Context, id uuid.UUID, r model.RetryDefaults, actor string) (*model.Tenant, error) {
	detail := map[string]any{"max_attempts": r.MaxAttempts, "min_backoff": durationText(r.MinBackoff),
		"max_backoff": durationText(r.MaxBackoff)}
	return s.changed(s.store.SetTenantRetry(ctx, id, r, s.audit(id, actor, "tenant.retry_changed", detail)))
}

// SetLimits replaces a tenant's own rate limits and quotas as a whole: a
// zero field takes the node's default, model.Unlimited lifts it. API limits
// apply on this node from the tenant's next call, on others within
// KeyCacheTTL (they are read with its key); dispatch limits within the
// dispatchers' cache time of a few seconds.
func (s *Service) SetLimits(ctx context.Context, id uuid.UUID, l model.Limits, actor string) (*model.Tenant, error) {
	return s.changed(s.store.SetTenantLimits(ctx, id, l, s.audit(id, actor, "tenant.limits_changed", map[string]any{"limits": l})))
}

// SetTargetGrants replaces the private ranges this tenant's webhooks may
// reach. The API checks new tasks against them at once; dispatchers read
// them with every claim.
func (s *Service) SetTargetGrants(ctx context.Context, id uuid.UUID, cidrs []netip.Prefix, actor string) (*model.Tenant, error) {
	list := make([]string, len(cidrs))
	for i, p := range cidrs {
		list[i] = p.String()
	}
	return s.changed(s.store.SetTenantTargetGrants(ctx, id, cidrs,
		s.audit(id, actor, "tenant.target_grants_changed", map[string]any{"target_allow_cidrs": list})))
}

// SetRetention sets how long the tenant's finished tasks and their attempts
// are kept before they are purged; nil goes back to the node default. The
// purger applies it on its next pass, to tasks already finished too.
func (s *Service) SetRetention(ctx context.Context, id uuid.UUID, retention *time.Duration, actor string) (*model.Tenant, error) {
	return s.changed(s.store.SetTenantRetention(ctx, id, retention,
		s.audit(id, actor, "tenant.retention_changed", map[string]any{"retention": durationText(retention)})))
}

// SetOperationsURL sets where hookwheel tells the tenant of what it did to
// its deliveries (target.paused, target.recovered); nil: nowhere. url must
// have passed the checks of a task's URL. The audit records its origin
// alone: a URL's path or query may be its credential.
func (s *Service) SetOperationsURL(ctx context.Context, id uuid.UUID, url *string, actor string) (*model.Tenant, error) {
	var origin any
	if url != nil {
		origin = model.TargetKey(*url)
	}
	return s.changed(s.store.SetTenantOperationsURL(ctx, id, url,
		s.audit(id, actor, "tenant.operations_url_changed", map[string]any{"operations_url": origin})))
}

// changed passes on the result of a change to a tenant, dropping the
// tenant's cached keys so that this node sees the change at once.
func (s *Service) changed(t *model.Tenant, err error) (*model.Tenant, error) {
	if t != nil {
		s.keys.forgetTenant(t.ID)
	}
	return s.resolve(t), err
}

func (s *Service) audit(tenantID uuid.UUID, actor, action string, detail map[string]any) model.AuditEntry {
	return model.AuditEntry{TenantID: &tenantID, Actor: actor, Action: action, Detail: detail}
}

func durationText(d *time.Duration) any {
	if d == nil {
		return nil
	}
	return d.String()
}

// ListAudit returns audit entries, newest first: one tenant's, or with a nil
// tenant every entry.
func (s *Service) ListAudit(ctx context.Context, f model.AuditFilter) ([]model.AuditEntry, error) {
	return s.store.ListAudit(ctx, f)
}
