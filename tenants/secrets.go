package tenants

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
)

const (
	// DefaultGrace is how long a superseded signing secret keeps signing
	// when a rotation names no grace period, as Svix's default.
	DefaultGrace = 24 * time.Hour
	// MaxGrace bounds a rotation's grace period.
	MaxGrace = 7 * 24 * time.Hour
	// maxSigningSecrets bounds the secrets a tenant holds at once: every
	// webhook carries one signature per active secret. Rotating more often
	// than the grace period drops the oldest beyond it.
	maxSigningSecrets = 5
)

// newSigningSecret makes a signing key of algorithm for tenantID: its stored
// form, its private part sealed when the keyring has a key, and the value
// the tenant is shown once: an HMAC secret itself, or "" for an Ed25519 key,
// whose private key never leaves the server (its public key is in the
// stored form, and shown whenever asked).
func (s *Service) newSigningSecret(tenantID uuid.UUID, algorithm signing.Algorithm) (model.SigningSecret, string, error) {
	var private, public, shown string
	var err error
	switch algorithm {
	case signing.HMACSHA256:
		private, err = signing.NewSecret()
		shown = private
	case signing.Ed25519:
		private, public, err = signing.NewKeyPair()
	default:
		err = fmt.Errorf("unknown signing algorithm %q", algorithm)
	}
	if err != nil {
		return model.SigningSecret{}, "", err
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return model.SigningSecret{}, "", fmt.Errorf("generate signing secret id: %w", err)
	}
	secret := model.SigningSecret{
		ID: "ss_" + keyEncoding.EncodeToString(raw), Algorithm: string(algorithm), PublicKey: public,
		CreatedAt: s.clock.Now().UTC(),
	}
	if secret.Value, err = s.keyring.Seal(private, secret.SealContext(tenantID)); err != nil {
		return model.SigningSecret{}, "", fmt.Errorf("seal signing secret: %w", err)
	}
	return secret, shown, nil
}

// algorithmOf is how a stored secret signs: those stored before Ed25519
// keys existed name no algorithm, and are HMAC-SHA256 secrets.
func algorithmOf(secret model.SigningSecret) signing.Algorithm {
	if secret.Algorithm == "" {
		return signing.HMACSHA256
	}
	return signing.Algorithm(secret.Algorithm)
}

// RotatedSecret is a new current signing secret, its plaintext shown once.
type RotatedSecret struct {
	model.SigningSecret
	// Plaintext is the new HMAC secret, "whsec_...", shown only now; ""
	// for an Ed25519 key, whose public key is SigningSecret.PublicKey.
	Plaintext string
	// GraceEndsAt is when the secrets it replaced stop signing.
	GraceEndsAt time.Time
}

// RotateSigningSecret makes a new current signing secret for a tenant, of
// algorithm: "" keeps the current secret's, so that a routine rotation never
// moves receivers from a public key back to a shared secret, or the reverse,
// unasked. The secrets it replaces go on signing, after it, until grace has
// passed (those already due to expire sooner keep their earlier end); with a
// grace of 0 they stop at once. A grace beyond MaxGrace or negative, or an
// unknown algorithm, is a *FieldError.
func (s *Service) RotateSigningSecret(ctx context.Context, tenantID uuid.UUID, grace time.Duration,
	algorithm signing.Algorithm, actor string,
) (*RotatedSecret, error) {
	if grace < 0 || grace > MaxGrace {
		return nil, &FieldError{"grace", fmt.Sprintf("must be between 0s and %s", formatHours(MaxGrace))}
	}
	if algorithm != "" && !algorithm.Valid() {
		return nil, &FieldError{"algorithm", fmt.Sprintf("must be %s or %s", signing.HMACSHA256, signing.Ed25519)}
	}
	now := s.clock.Now().UTC()
	graceEnds := now.Add(grace)
	var (
		secret model.SigningSecret
		shown  string
	)
	audit := s.audit(tenantID, actor, "signing_secret.rotated", map[string]any{"grace": grace.String()})
	_, err := s.store.UpdateSigningSecrets(ctx, tenantID, func(current []model.SigningSecret) ([]model.SigningSecret, error) {
		active := model.ActiveSigningSecrets(current, now)
		made := algorithm
		if made == "" {
			// Read under the row's lock: a rotation that committed just
			// before this one made the current secret this one follows.
			made = signing.HMACSHA256
			if len(active) > 0 {
				made = algorithmOf(active[0])
			}
		}
		var err error
		if secret, shown, err = s.newSigningSecret(tenantID, made); err != nil {
			return nil, err
		}
		// The entry is written after this returns, in the same transaction.
		audit.Detail["signing_secret_id"] = secret.ID
		audit.Detail["algorithm"] = string(made)
		next := []model.SigningSecret{secret}
		for _, old := range active {
			if len(next) == maxSigningSecrets || grace == 0 {
				break
			}
			if old.ExpiresAt == nil || old.ExpiresAt.After(graceEnds) {
				old.ExpiresAt = &graceEnds
			}
			next = append(next, old)
		}
		return next, nil
	}, &audit)
	if err != nil {
		return nil, err
	}
	s.keys.forgetTenant(tenantID)
	return &RotatedSecret{SigningSecret: secret, Plaintext: shown, GraceEndsAt: graceEnds}, nil
}

func formatHours(d time.Duration) string { return fmt.Sprintf("%dh", int(d.Hours())) }

// SigningSecrets lists a tenant's secrets that sign now, current first, each
// naming its algorithm. The values are left out: a secret is shown once,
// when it is made, and an Ed25519 private key never; an Ed25519 key's public
// key is kept.
func (s *Service) SigningSecrets(ctx context.Context, tenantID uuid.UUID) ([]model.SigningSecret, error) {
	t, err := s.store.GetTenant(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	active := model.ActiveSigningSecrets(t.SigningSecrets, s.clock.Now())
	for i := range active {
		active[i].Value = ""
		active[i].Algorithm = string(algorithmOf(active[i]))
	}
	return active, nil
}

// RekeyResult counts what Rekey changed.
type RekeyResult struct {
	// Tenants whose secrets were rewritten, of Scanned.
	Tenants, Scanned int
	// Secrets re-sealed under the keyring's first key.
	Secrets int
	// Shared are the installation's own secrets re-sealed (see SharedSecret).
	Shared int
}

// Rekey seals every stored signing secret, and the installation's shared
// secrets, under the keyring's first key:
// plaintext ones (the keyring was just set) and those sealed by an older
// key (the key is being rotated). Expired secrets are dropped on the way.
// It runs beside serving nodes: each tenant is rewritten under its row lock
// and nodes whose keyring holds both keys open either form, so no webhook
// goes unsigned. It refuses to run without a key.
func (s *Service) Rekey(ctx context.Context, actor string) (RekeyResult, error) {
	var res RekeyResult
	if !s.keyring.Enabled() {
		return res, errors.New("rekey: HOOKWHEEL_ENCRYPTION_KEY is not set: there is no key to seal with")
	}
	const page = 500
	var after uuid.UUID
	for {
		ids, err := s.store.TenantIDsAfter(ctx, after, page)
		if err != nil {
			return res, fmt.Errorf("rekey: %w", err)
		}
		for _, id := range ids {
			res.Scanned++
			n, err := s.rekeyTenant(ctx, id)
			if err != nil {
				return res, fmt.Errorf("rekey tenant %s: %w", id, err)
			}
			if n > 0 {
				res.Tenants++
				res.Secrets += n
			}
		}
		if len(ids) < page {
			break
		}
		after = ids[len(ids)-1]
	}
	shared, err := s.rekeyShared(ctx)
	res.Shared = shared
	if err != nil {
		return res, fmt.Errorf("rekey: %w", err)
	}
	err = s.store.RecordAudit(ctx, model.AuditEntry{Actor: actor, Action: "secrets.rekeyed", Detail: map[string]any{
		"key_id": s.keyring.SealingKeyID(), "tenants": res.Tenants, "secrets": res.Secrets, "shared": res.Shared,
	}})
	return res, err
}

func (s *Service) rekeyTenant(ctx context.Context, id uuid.UUID) (int, error) {
	resealed := 0
	now := s.clock.Now()
	_, err := s.store.UpdateSigningSecrets(ctx, id, func(current []model.SigningSecret) ([]model.SigningSecret, error) {
		resealed = 0
		active := model.ActiveSigningSecrets(current, now)
		for i, secret := range active {
			if !s.keyring.NeedsRekey(secret.Value) {
				continue
			}
			plain, err := s.keyring.Open(secret.Value, secret.SealContext(id))
			if err != nil {
				return nil, fmt.Errorf("open signing secret %s: %w", secret.ID, err)
			}
			if active[i].Value, err = s.keyring.Seal(plain, secret.SealContext(id)); err != nil {
				return nil, fmt.Errorf("seal signing secret %s: %w", secret.ID, err)
			}
			resealed++
		}
		if resealed == 0 && len(active) == len(current) {
			return nil, model.ErrUnchanged
		}
		return active, nil
	}, nil)
	if errors.Is(err, model.ErrUnchanged) || errors.Is(err, model.ErrNotFound) {
		return 0, nil
	}
	if err == nil {
		s.keys.forgetTenant(id)
	}
	return resealed, err
}
