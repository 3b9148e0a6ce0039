//lint:file-ignore SA1008 the signer sets the Standard Webhooks header names lowercase on purpose, as the specification spells them; Header.Get would miss them

package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// TestSignEd25519: an Ed25519 key signs a "v1a," entry that crypto/ed25519
// and the Go SDK verify with the public key alone, and that no other key
// verifies.
func TestSignEd25519(t *testing.T) {
	t.Parallel()
	private, public := testKeyPair(1)
	_, otherPublic := testKeyPair(2)
	now := time.Now()
	body := []byte(`{"order": 42}`)
	msg := Message{WebhookID: "tsk_01JABCDEF", URL: "https://example.com/hooks/order", Body: body, KeyID: "ss_ed"}
	h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, private), msg, now)
	require.NoError(t, err)
	_, received := onTheWire(t, h, body)

	entry, ok := strings.CutPrefix(received.Get("webhook-signature"), "v1a,")
	require.True(t, ok, "webhook-signature %q", received.Get("webhook-signature"))
	sig, err := base64.StdEncoding.DecodeString(entry)
	require.NoError(t, err)
	pub, err := ParsePublicKey(public)
	require.NoError(t, err)
	signed := []byte(msg.WebhookID + "." + received.Get("webhook-timestamp") + "." + string(body))
	require.True(t, ed25519.Verify(pub, signed, sig), "the Ed25519 signature of id.timestamp.body")

	require.NoError(t, webhook.Verify([]string{public}, received, body, webhook.WithURL(msg.URL)))
	require.ErrorIs(t, webhook.Verify([]string{otherPublic}, received, body), webhook.ErrSignature)
	require.ErrorIs(t, webhook.Verify([]string{public}, received, []byte(`{"order": 43}`)), webhook.ErrSignature)
	// A Standard Webhooks library holding only HMAC secrets skips v1a.
	wh, err := standardwebhooks.NewWebhook(testSecretCurrent)
	require.NoError(t, err)
	require.ErrorIs(t, wh.Verify(body, received), standardwebhooks.ErrNoMatchingSignature)
}

// TestSignMixedRotation: during a rotation from an HMAC secret to an
// Ed25519 key, and back, every webhook carries one entry of each kind, the
// current key's first, and a receiver holding either verifies it.
func TestSignMixedRotation(t *testing.T) {
	t.Parallel()
	private, public := testKeyPair(1)
	tests := []struct {
		name        string
		keys        []string
		wantEntries []string
		// current is what verifies the JWT too.
		current, previous string
	}{
		{"hmac to ed25519", []string{private, testSecretOld}, []string{"v1a", "v1"}, public, testSecretOld},
		{"ed25519 to hmac", []string{testSecretCurrent, private}, []string{"v1", "v1a"}, testSecretCurrent, public},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"order": 42}`)
			msg := Message{WebhookID: "tsk_01JABCDEF", URL: "https://example.com/hooks/order", Body: body}
			h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, tt.keys...), msg, time.Now())
			require.NoError(t, err)
			_, received := onTheWire(t, h, body)
			entries := strings.Fields(received.Get("webhook-signature"))
			require.Len(t, entries, len(tt.wantEntries))
			for i, version := range tt.wantEntries {
				require.True(t, strings.HasPrefix(entries[i], version+","), "entry %d is %q, want %s", i, entries[i], version)
			}

			require.NoError(t, webhook.Verify([]string{tt.current}, received, body, webhook.WithURL(msg.URL)))
			require.NoError(t, webhook.Verify([]string{tt.previous}, received, body), "the previous key verifies during the grace")
			require.ErrorIs(t, webhook.Verify([]string{tt.previous}, received, body, webhook.WithURL(msg.URL)), webhook.ErrToken,
				"the JWT is the current key's")
			require.NoError(t, webhook.Verify([]string{tt.previous, tt.current}, received, body, webhook.WithURL(msg.URL)))

			// The HMAC entry is the one the Standard Webhooks library checks.
			secret := tt.current
			if !strings.HasPrefix(secret, SecretPrefix) {
				secret = tt.previous
			}
			wh, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			require.NoError(t, wh.Verify(body, received))
		})
	}
}

// TestSignJWTEdDSA: with an Ed25519 key first, the Hookwheel-Signature JWT
// is EdDSA, verified by golang-jwt with the public key, with kid and the
// claims of HS256 tokens; the HMAC secret after it does not verify it.
func TestSignJWTEdDSA(t *testing.T) {
	t.Parallel()
	private, public := testKeyPair(1)
	now := time.Now()
	body := []byte(`{"order": 42}`)
	for _, keyID := range []string{"", "ss_ed25519"} {
		msg := Message{WebhookID: "tsk_01JABCDEF", URL: "https://example.com/hooks/order?x=1", Body: body, KeyID: keyID}
		h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, private, testSecretOld), msg, now)
		require.NoError(t, err)
		_, received := onTheWire(t, h, body)
		tokenString := received.Get("Hookwheel-Signature")

		pub, err := ParsePublicKey(public)
		require.NoError(t, err)
		claims := jwt.MapClaims{}
		token, err := jwt.ParseWithClaims(tokenString, claims,
			func(*jwt.Token) (any, error) { return pub, nil },
			jwt.WithValidMethods([]string{"EdDSA"}),
			jwt.WithIssuer("hookwheel"),
			jwt.WithSubject(msg.URL),
			jwt.WithIssuedAt(),
			jwt.WithExpirationRequired(),
			jwt.WithStrictDecoding(),
		)
		require.NoError(t, err)
		require.True(t, token.Valid)
		wantHeader := map[string]any{"alg": "EdDSA", "typ": "JWT"}
		if keyID != "" {
			wantHeader["kid"] = keyID
		}
		require.Equal(t, wantHeader, token.Header)
		sum := sha256.Sum256(body)
		iat := float64(now.Unix())
		require.Equal(t, jwt.MapClaims{
			"iss": "hookwheel", "sub": msg.URL, "jti": msg.WebhookID, "iat": iat, "exp": iat + 300,
			"body": base64.RawURLEncoding.EncodeToString(sum[:]),
		}, claims)

		oldKey, err := ParseSigningSecret(testSecretOld)
		require.NoError(t, err)
		_, err = jwt.Parse(tokenString, func(*jwt.Token) (any, error) { return oldKey, nil },
			jwt.WithValidMethods([]string{"HS256"}))
		require.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid)
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	private, public := testKeyPair(7)
	encodedOf := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n)) }

	hmacKey, err := ParseKey(testSecretCurrent)
	require.NoError(t, err)
	require.Equal(t, HMACSHA256, hmacKey.Algorithm())
	require.Empty(t, hmacKey.PublicKey())
	secret, err := ParseSigningSecret(testSecretCurrent)
	require.NoError(t, err)
	require.Equal(t, secret, hmacKey.secret())

	edKey, err := ParseKey(private)
	require.NoError(t, err)
	require.Equal(t, Ed25519, edKey.Algorithm())
	require.Equal(t, public, edKey.PublicKey())

	for _, tt := range []struct{ name, key, wantErr string }{
		{"empty", "", `must start with "whsec_" or "whsk_"`},
		{"a public key", public, `must start with "whsec_" or "whsk_"`},
		{"bare base64", encodedOf(64), `must start with "whsec_" or "whsk_"`},
		{"a short secret", "whsec_" + encodedOf(16), "decodes to 16 bytes"},
		{"a seed alone", "whsk_" + encodedOf(32), "decodes to 32 bytes, want 64"},
		{"one byte too long", "whsk_" + encodedOf(65), "decodes to 65 bytes, want 64"},
		{"far too long", "whsk_" + encodedOf(4096), "longer than 64 bytes"},
		{"not base64", "whsk_" + strings.Repeat("!", 88), "not standard base64"},
		{"unpadded", strings.TrimRight("whsk_"+encodedOf(64), "="), "not standard base64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseKey(tt.key)
			require.ErrorContains(t, err, tt.wantErr)
			if len(tt.key) > 14 {
				require.NotContains(t, err.Error(), tt.key[6:], "error leaks the key")
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	t.Parallel()
	_, public := testKeyPair(3)
	key, err := ParsePublicKey(public)
	require.NoError(t, err)
	require.Len(t, key, ed25519.PublicKeySize)
	for _, bad := range []string{"", testSecretCurrent, strings.TrimPrefix(public, "whpk_"), "whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31)), "whpk_!!"} {
		_, err := ParsePublicKey(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestNewKeyPair(t *testing.T) {
	t.Parallel()
	private, public, err := NewKeyPair()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(private, PrivateKeyPrefix))
	require.True(t, strings.HasPrefix(public, PublicKeyPrefix))
	key, err := ParseKey(private)
	require.NoError(t, err)
	require.Equal(t, public, key.PublicKey(), "the public key is the private key's")
	other, _, err := NewKeyPair()
	require.NoError(t, err)
	require.NotEqual(t, private, other)
}

var updateFixtures = flag.Bool("update", false, "rewrite the TypeScript SDK's fixture of Go-signed Ed25519 headers")

// TestGoSignedEd25519Fixture: sdk/typescript/test/fixtures/go-signed-ed25519.json
// holds what Sign writes, byte for byte, during a rotation from an HMAC
// secret to an Ed25519 key (Ed25519 signatures are deterministic), so that
// the TypeScript SDK's tests verify the server's own encoding. -update
// rewrites it.
func TestGoSignedEd25519Fixture(t *testing.T) {
	t.Parallel()
	const signedAt = 1795000000
	private, public := testKeyPair(9)
	msg := Message{
		WebhookID: "01a2021f-503b-7651-aff3-c59e9afa4a43", URL: "https://example.com/hooks/order?x=1",
		Body: []byte(`{"order":42}`), KeyID: "ss_ed25519",
	}
	h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, private, testSecretOld), msg, time.Unix(signedAt, 0))
	require.NoError(t, err)
	headers := map[string]string{}
	for name, values := range h {
		headers[strings.ToLower(name)] = values[0]
	}
	want, err := json.MarshalIndent(map[string]any{
		"comment": "Headers made by internal/signing's Signer.Sign (TestGoSignedEd25519Fixture) at Unix time 1795000000 " +
			"for a rotation from the HMAC secret keys[1] to the Ed25519 key pair whose public key is keys[0], current.",
		"url": msg.URL, "signedAt": signedAt, "keys": []string{public, testSecretOld}, "body": string(msg.Body), "headers": headers,
	}, "", "  ")
	require.NoError(t, err)
	want = append(want, '\n')
	path := filepath.Join("..", "..", "sdk", "typescript", "test", "fixtures", "go-signed-ed25519.json")
	if *updateFixtures {
		require.NoError(t, os.WriteFile(path, want, 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "run go test -run TestGoSignedEd25519Fixture -update ./internal/signing")
}
