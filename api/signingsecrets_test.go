package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/signing"
)

var publicKeyPattern = regexp.MustCompile(`^whpk_[A-Za-z0-9+/]{43}=$`)

// TestSigningSecretsEd25519: a tenant rotates to an Ed25519 key pair and
// back; the rotation and the listing show its public key and algorithm,
// never its private key; a rotation naming no algorithm keeps the current
// one's; an unknown algorithm is a 422 on "algorithm" that rotates nothing.
func TestSigningSecretsEd25519(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	// Every answer is kept, to be searched for the private keys stored.
	var answers []string
	rotate := func(body string) response {
		t.Helper()
		resp := h.do(http.MethodPost, "/v1/signing-secrets/rotate", tn.APIKey, strings.NewReader(body), nil)
		answers = append(answers, string(resp.Body))
		return resp
	}
	type listed struct {
		ID        string  `json:"id"`
		Algorithm string  `json:"algorithm"`
		PublicKey *string `json:"public_key"`
		Current   bool    `json:"current"`
	}
	list := func() (string, []listed) {
		t.Helper()
		raw := h.get("/v1/signing-secrets", tn.APIKey)
		var out struct{ Data []listed }
		require.NoError(t, json.Unmarshal([]byte(raw), &out))
		return raw, out.Data
	}
	privateKeys := func() []string {
		t.Helper()
		stored, err := h.DB.SigningSecrets(context.Background(), tn.ID)
		require.NoError(t, err)
		var keys []string
		for _, s := range stored {
			if s.Algorithm == string(signing.Ed25519) {
				keys = append(keys, strings.TrimPrefix(s.Value, signing.PrivateKeyPrefix))
			}
		}
		return keys
	}

	raw, secrets := list()
	answers = append(answers, raw)
	require.Len(t, secrets, 1)
	require.Equal(t, "hmac-sha256", secrets[0].Algorithm, "a tenant starts with an HMAC secret")
	require.Nil(t, secrets[0].PublicKey)
	require.NotContains(t, raw, "public_key")
	hmacID := secrets[0].ID

	resp := rotate(`{"algorithm": "ed25519", "grace": "1h"}`)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	created := rawKeys(t, resp.Body)
	require.NotContains(t, created, "signing_secret", "an Ed25519 key has no secret to show")
	require.JSONEq(t, `"ed25519"`, string(created["algorithm"]))
	var publicKey, edID string
	require.NoError(t, json.Unmarshal(created["public_key"], &publicKey))
	require.NoError(t, json.Unmarshal(created["id"], &edID))
	require.Regexp(t, publicKeyPattern, publicKey)

	// The key stored signs what the public key shown verifies.
	stored, err := h.DB.SigningSecrets(context.Background(), tn.ID)
	require.NoError(t, err)
	require.Equal(t, edID, stored[0].ID)
	key, err := signing.ParseKey(stored[0].Value)
	require.NoError(t, err)
	require.Equal(t, signing.Ed25519, key.Algorithm())
	require.Equal(t, publicKey, key.PublicKey())

	raw, secrets = list()
	answers = append(answers, raw)
	require.Equal(t, []listed{
		{ID: edID, Algorithm: "ed25519", PublicKey: &publicKey, Current: true},
		{ID: hmacID, Algorithm: "hmac-sha256"},
	}, secrets)

	// No algorithm keeps the current one's: Ed25519.
	resp = rotate(" ")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	created = rawKeys(t, resp.Body)
	require.JSONEq(t, `"ed25519"`, string(created["algorithm"]))
	require.NotContains(t, created, "signing_secret")
	require.Contains(t, created, "public_key")

	private := privateKeys()
	require.Len(t, private, 2)

	// Back to HMAC, on request.
	resp = rotate(`{"algorithm": "hmac-sha256", "grace": "0s"}`)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	created = rawKeys(t, resp.Body)
	require.JSONEq(t, `"hmac-sha256"`, string(created["algorithm"]))
	require.NotContains(t, created, "public_key")
	var secret string
	require.NoError(t, json.Unmarshal(created["signing_secret"], &secret))
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)

	for _, answer := range answers {
		require.NotContains(t, answer, signing.PrivateKeyPrefix)
		require.NotContains(t, answer, `"value"`)
	}

	_, before := list()
	for _, body := range []string{`{"algorithm": "rsa"}`, `{"algorithm": "ED25519"}`, `{"algorithm": ""}`,
		`{"algorithm": 42}`, `{"algorithm": ["ed25519"]}`, `{"algorithm": "ed25519", "grace": "1h", "kind": "ed25519"}`} {
		field := "algorithm"
		if strings.Contains(body, "kind") {
			field = "kind"
		}
		requireFieldProblem(t, rotate(body), field)
	}
	_, after := list()
	require.Equal(t, before, after, "a refused rotation rotates nothing")

	// Every private key is in none of the answers, the refusals included.
	for _, key := range private {
		for _, answer := range answers {
			require.NotContains(t, answer, key)
		}
	}

	entries := h.auditOf("/v1/audit", tn.APIKey)
	var algorithms []any
	for _, e := range entries {
		if e.Action == "signing_secret.rotated" {
			algorithms = append(algorithms, e.Detail["algorithm"])
		}
	}
	require.Equal(t, []any{"ed25519", "ed25519", "hmac-sha256"}, algorithms)
}
