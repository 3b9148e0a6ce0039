package dispatcher

import (
	"context"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
)

// secretsFreshFor is how old a claim's copy of its tenant's signing secrets
// may be when it is signed. A claim usually goes out within milliseconds of
// being taken, with the secrets it was taken with; one that waited (for its
// target, its tenant's share, a rate limit) reads them again, so a rotation
// reaches its webhooks within this time rather than after the wait.
const secretsFreshFor = time.Second

// secretUnreadableRetry is when a claim whose secret this node cannot open
// is due again: long enough not to spin, short enough that a node whose
// keyring is fixed (or another node that has the key) soon sends it.
const secretUnreadableRetry = 30 * time.Second

// signingKey is one of a tenant's signing secrets, opened and parsed: an
// HMAC secret or an Ed25519 private key, decoded once for the claim rather
// than by the signer on every send.
type signingKey struct {
	id        string
	key       signing.Key
	expiresAt *time.Time
}

// signingKeys are a claim's signing keys, current first.
type signingKeys []signingKey

// at returns the keys that sign at now, current first, and the current
// one's id: during a rotation's grace period every webhook carries a
// signature by each.
func (k signingKeys) at(now time.Time) (keys []signing.Key, keyID string) {
	keys = make([]signing.Key, 0, len(k))
	for _, key := range k {
		if key.expiresAt == nil || now.Before(*key.expiresAt) {
			keys = append(keys, key.key)
		}
	}
	if len(k) > 0 {
		keyID = k[0].id
	}
	return keys, keyID
}

// signingKeys opens the signing secrets c is to be signed with, read again
// when the claim is older than secretsFreshFor. A secret this node cannot
// open (its HOOKWHEEL_ENCRYPTION_KEY lacks the key that sealed it) or read
// is the node's fault, not the task's nor the target's: the claim is given
// back without spending an attempt, and said loudly.
func (s *sender) signingKeys(c *model.ClaimedTask) (signingKeys, bool) {
	now := s.cfg.Clock.Now()
	if now.Sub(c.ClaimedAt) > secretsFreshFor {
		ctx, cancel := context.WithTimeout(s.cfg.Sends, bodyReadTimeout)
		defer cancel()
		fresh, err := s.cfg.Secrets.SigningSecrets(ctx, c.TenantID)
		if err != nil {
			s.cfg.Metrics.storeErrors.WithLabelValues("secrets").Inc()
			s.cfg.Logger.Error("reading a tenant's signing secrets failed; giving the claim back", "task", c.ID, "err", err)
			s.deferOne(c, now.Add(time.Second))
			return nil, false
		}
		c.SigningSecrets = fresh
	}
	active := model.ActiveSigningSecrets(c.SigningSecrets, now)
	keys := make(signingKeys, 0, len(active))
	for _, secret := range active {
		plain, err := s.cfg.Keyring.Open(secret.Value, secret.SealContext(c.TenantID))
		if err != nil {
			s.unreadableSecret(c, now, "secret", secret.ID, "err", err)
			return nil, false
		}
		key, err := signing.ParseKey(plain)
		if err != nil {
			s.unreadableSecret(c, now, "secret", secret.ID, "err", err)
			return nil, false
		}
		keys = append(keys, signingKey{id: secret.ID, key: key, expiresAt: secret.ExpiresAt})
	}
	if len(keys) == 0 {
		s.unreadableSecret(c, now, "err", "the tenant has no signing secret")
		return nil, false
	}
	return keys, true
}

func (s *sender) unreadableSecret(c *model.ClaimedTask, now time.Time, args ...any) {
	s.cfg.Metrics.deferrals.WithLabelValues("secret_unreadable").Inc()
	s.cfg.Logger.Error("cannot sign a webhook: a signing secret of its tenant does not open with this node's "+
		"HOOKWHEEL_ENCRYPTION_KEY, or is not a signing key; the claim is given back without spending an attempt",
		append([]any{"task", c.ID, "tenant", c.TenantID}, args...)...)
	s.deferOne(c, now.Add(secretUnreadableRetry))
}
