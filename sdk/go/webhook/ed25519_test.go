package webhook_test

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// newKeyPair returns an Ed25519 private key and its public key as hookwheel
// shows it, "whpk_<base64>".
func newKeyPair(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return priv, "whpk_" + base64.StdEncoding.EncodeToString(pub)
}

// signMixed returns the headers hookwheel sends with msg signed by keys in
// order, each a "whsec_" secret (a v1 entry) or an Ed25519 private key (a
// v1a entry), and the JWT with claims signed by jwtKey: a secret's bytes
// (HS256) or a private key (EdDSA).
func signMixed(t *testing.T, msg message, keys []any, jwtKey any, claims jwt.MapClaims) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", msg.id)
	ts := strconv.FormatInt(msg.at.Unix(), 10)
	h.Set("webhook-timestamp", ts)
	content := []byte(msg.id + "." + ts + "." + string(msg.body))
	var entries []string
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(k, "whsec_"))
			require.NoError(t, err)
			mac := hmac.New(sha256.New, key)
			mac.Write(content)
			entries = append(entries, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		case ed25519.PrivateKey:
			entries = append(entries, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(k, content)))
		}
	}
	h.Set("webhook-signature", strings.Join(entries, " "))
	var method jwt.SigningMethod = jwt.SigningMethodHS256
	if _, ok := jwtKey.(ed25519.PrivateKey); ok {
		method = jwt.SigningMethodEdDSA
	}
	token, err := jwt.NewWithClaims(method, claims).SignedString(jwtKey)
	require.NoError(t, err)
	h.Set("Hookwheel-Signature", token)
	return h
}

func TestVerifyEd25519(t *testing.T) {
	t.Parallel()
	private, public := newKeyPair(t)
	otherPrivate, otherPublic := newKeyPair(t)
	secret, secretKey := newSecret(t)
	msg := message{id: "0190f3a2-7b1c-7d2e-9f00-0123456789ab", url: "https://example.com/hooks/x", at: time.Now(),
		body: []byte(`{"order":42}`)}
	at := func(d time.Duration) message {
		m := msg
		m.at = m.at.Add(d)
		return m
	}
	current := signMixed(t, msg, []any{private}, private, claimsOf(msg))
	badTimestamp := current.Clone()
	badTimestamp.Set("webhook-timestamp", "noon")
	toEd25519 := signMixed(t, msg, []any{private, secret}, private, claimsOf(msg))
	toHMAC := signMixed(t, msg, []any{secret, private}, secretKey, claimsOf(msg))
	rawPublic, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(public, "whpk_"))
	require.NoError(t, err)

	tests := []struct {
		name    string
		header  http.Header
		body    []byte
		keys    []string
		opts    []webhook.Option
		wantErr error
	}{
		{name: "public key, JWT and URL", header: current, keys: []string{public}, opts: []webhook.Option{webhook.WithURL(msg.url)}},
		{name: "another public key", header: current, keys: []string{otherPublic}, wantErr: webhook.ErrSignature},
		{name: "body changed", header: current, body: []byte(`{"order":43}`), keys: []string{public}, wantErr: webhook.ErrSignature},
		{name: "a secret only", header: current, keys: []string{secret}, wantErr: webhook.ErrSignature},
		{name: "too old", header: signMixed(t, at(-6*time.Minute), []any{private}, private, claimsOf(at(-6*time.Minute))),
			keys: []string{public}, wantErr: webhook.ErrTimestamp},
		{name: "too new", header: signMixed(t, at(6*time.Minute), []any{private}, private, claimsOf(at(6*time.Minute))),
			keys: []string{public}, wantErr: webhook.ErrTimestamp},
		{name: "timestamp not a number", header: badTimestamp, keys: []string{public}, wantErr: webhook.ErrMissingHeaders},
		{name: "to Ed25519: the new public key", header: toEd25519, keys: []string{public}, opts: []webhook.Option{webhook.WithURL(msg.url)}},
		{name: "to Ed25519: the old secret", header: toEd25519, keys: []string{secret}},
		{name: "to Ed25519: the old secret cannot check the URL", header: toEd25519, keys: []string{secret},
			opts: []webhook.Option{webhook.WithURL(msg.url)}, wantErr: webhook.ErrToken},
		{name: "to Ed25519: both", header: toEd25519, keys: []string{secret, public}, opts: []webhook.Option{webhook.WithURL(msg.url)}},
		{name: "to HMAC: the new secret", header: toHMAC, keys: []string{secret}, opts: []webhook.Option{webhook.WithURL(msg.url)}},
		{name: "to HMAC: the old public key", header: toHMAC, keys: []string{public}},
		{name: "to HMAC: the old public key cannot check the URL", header: toHMAC, keys: []string{public},
			opts: []webhook.Option{webhook.WithURL(msg.url)}, wantErr: webhook.ErrToken},
		// The first entry is the receiver's key's, which signs the JWT too.
		{name: "JWT by another key pair", header: signMixed(t, msg, []any{private}, otherPrivate, claimsOf(msg)),
			keys: []string{public}, wantErr: webhook.ErrToken},
		// Whoever knows the public key could MAC a token with its bytes.
		{name: "HS256 JWT keyed by the public key", header: signMixed(t, msg, []any{private}, rawPublic, claimsOf(msg)),
			keys: []string{public}, wantErr: webhook.ErrToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := tc.body
			if body == nil {
				body = msg.body
			}
			err := webhook.Verify(tc.keys, tc.header, body, tc.opts...)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
		})
	}
}

func TestVerifyRefusesBadPublicKeys(t *testing.T) {
	t.Parallel()
	private, _ := newKeyPair(t)
	msg := message{id: "id-1", at: time.Now(), body: []byte("x")}
	h := signMixed(t, msg, []any{private}, private, claimsOf(msg))
	for _, key := range []string{"whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31)), "whpk_not base64!", "whpk_",
		"whsk_" + base64.StdEncoding.EncodeToString(private)} {
		err := webhook.Verify([]string{key}, h, msg.body)
		require.Error(t, err, key)
		if len(key) > len("whpk_") {
			require.NotContains(t, err.Error(), key[5:], "errors never show a key")
		}
	}
}
