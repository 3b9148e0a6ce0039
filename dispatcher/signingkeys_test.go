package dispatcher

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestSenderSecretUnreadable: a claim whose signing secret this node's
// keyring cannot open is given back without an attempt, a request or a
// failure of its target.
func TestSenderSecretUnreadable(t *testing.T) {
	t.Parallel()
	sealer, err := keyring.Parse("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	require.NoError(t, err)
	other, err := keyring.Parse("k2:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 32))))
	require.NoError(t, err)
	b := setupSender(t, senderOptions{keyring: other, breaker: BreakerConfig{ConsecutiveFailures: 1}})

	c := b.claim()
	secret := storetest.SigningSecrets()[0]
	secret.Value, err = sealer.Seal(secret.Value, secret.SealContext(c.TenantID))
	require.NoError(t, err)
	c.SigningSecrets = []model.SigningSecret{secret}
	b.claimed <- c
	d := receive(t, b.deferred)
	require.Equal(t, c.ID, d.id)
	require.Equal(t, b.clock.Now().Add(secretUnreadableRetry), d.at)
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.deferrals.WithLabelValues("secret_unreadable")))

	// Nothing was sent or recorded, and the target's breaker is still
	// closed: the next claim to it goes out.
	ok := b.claim()
	b.claimed <- ok
	receive(t, b.requests)
	require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
	require.Empty(t, b.records)
}

// TestSenderRereadsSecretsOfOldClaims: a claim that waited longer than
// secretsFreshFor is signed with its tenant's secrets as they are now, so a
// rotation meanwhile reaches it.
func TestSenderRereadsSecretsOfOldClaims(t *testing.T) {
	t.Parallel()
	rotated := append([]model.SigningSecret{{ID: "ss_new", Value: "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("n", 32)))}},
		storetest.SigningSecrets()...)
	secrets := &testSecrets{secrets: rotated}
	b := setupSender(t, senderOptions{secrets: secrets})

	fresh := b.claim()
	b.claimed <- fresh
	req := receive(t, b.requests)
	receive(t, b.records)
	require.Len(t, strings.Fields(req.header.Get("webhook-signature")), 1, "a fresh claim signs with the secrets it was taken with")

	old := b.claim()
	b.clock.Advance(secretsFreshFor + time.Millisecond)
	b.claimed <- old
	req = receive(t, b.requests)
	receive(t, b.records)
	require.Len(t, strings.Fields(req.header.Get("webhook-signature")), 2, "an old claim signs with the rotated secrets, both")
	token, _, err := jwt.NewParser().ParseUnverified(req.header.Get("Hookwheel-Signature"), jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, "ss_new", token.Header["kid"])
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	require.Equal(t, 1, secrets.reads)
}

// TestSenderSignsWithEd25519Keys: a claim whose tenant rotated from an HMAC
// secret to a sealed Ed25519 key goes out with the key's v1a signature
// first and the secret's v1 beside it, each verifying with what the
// receiver holds, and an EdDSA JWT naming the key.
func TestSenderSignsWithEd25519Keys(t *testing.T) {
	t.Parallel()
	ring, err := keyring.Parse("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	require.NoError(t, err)
	b := setupSender(t, senderOptions{keyring: ring})
	private, public, err := signing.NewKeyPair()
	require.NoError(t, err)

	c := b.claim()
	old := storetest.SigningSecrets()[0]
	graceEnds := b.clock.Now().Add(time.Hour)
	old.ExpiresAt = &graceEnds
	ed := model.SigningSecret{ID: "ss_ed", Algorithm: string(signing.Ed25519), PublicKey: public}
	ed.Value, err = ring.Seal(private, ed.SealContext(c.TenantID))
	require.NoError(t, err)
	c.SigningSecrets = []model.SigningSecret{ed, old}
	b.claimed <- c
	req := receive(t, b.requests)
	require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)

	entries := strings.Fields(req.header.Get("webhook-signature"))
	require.Len(t, entries, 2)
	require.True(t, strings.HasPrefix(entries[0], "v1a,"), "%q", entries)
	require.True(t, strings.HasPrefix(entries[1], "v1,"), "%q", entries)
	body := []byte(req.body)
	require.NoError(t, webhook.Verify([]string{public}, req.header, body, webhook.WithURL(c.URL)))
	require.NoError(t, webhook.Verify([]string{old.Value}, req.header, body))
	token, _, err := jwt.NewParser().ParseUnverified(req.header.Get("Hookwheel-Signature"), jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, "EdDSA", token.Header["alg"])
	require.Equal(t, "ss_ed", token.Header["kid"])
}

// TestSenderSecretNotAKey: a stored secret that opens but is no signing key
// is the node's trouble, as one that does not open: the claim is given
// back, no attempt spent.
func TestSenderSecretNotAKey(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	c := b.claim()
	c.SigningSecrets = []model.SigningSecret{{ID: "ss_bad", Value: "whsk_" + base64.StdEncoding.EncodeToString(make([]byte, 32))}}
	b.claimed <- c
	d := receive(t, b.deferred)
	require.Equal(t, c.ID, d.id)
	require.Equal(t, b.clock.Now().Add(secretUnreadableRetry), d.at)
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.deferrals.WithLabelValues("secret_unreadable")))
	require.Empty(t, b.requests)
	require.Empty(t, b.records)
}
