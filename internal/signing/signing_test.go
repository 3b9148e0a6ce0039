//lint:file-ignore SA1008 the signer sets the Standard Webhooks header names lowercase on purpose, as the specification spells them; Header.Get would miss them

package signing

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

const (
	// 32 and 24 bytes: the generated size and the smallest accepted.
	testSecretCurrent = "whsec_LZ5JFED3C0KKJj6S/w21LEq9v+HNpwXFX48OS8S2Mcg="
	testSecretOld     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecretOther   = "whsec_iZ1PXWN5XRPLPuU61MGZAfS7HCZt2LQArhq++ndMasg="
)

// mustKeys parses keys, as the dispatcher does once per claim.
func mustKeys(t testing.TB, keys ...string) []Key {
	t.Helper()
	parsed := make([]Key, len(keys))
	for i, k := range keys {
		var err error
		parsed[i], err = ParseKey(k)
		require.NoError(t, err)
	}
	return parsed
}

// testKeyPair is a fixed Ed25519 key pair, its seed 32 times seed: the
// private key in its stored form and the public key.
func testKeyPair(seed byte) (private, public string) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return PrivateKeyPrefix + base64.StdEncoding.EncodeToString(priv),
		PublicKeyPrefix + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
}

// onTheWire sends h as an HTTP/1.1 request would and reads it back as a
// receiver's server does, returning the raw header block and the header the
// receiver sees (canonicalized names).
func onTheWire(t *testing.T, h http.Header, body []byte) (string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://receiver.test/hook", bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	var wire bytes.Buffer
	require.NoError(t, req.Write(&wire))
	raw := wire.String()

	got, err := http.ReadRequest(bufio.NewReader(&wire))
	require.NoError(t, err)
	return raw[:strings.Index(raw, "\r\n\r\n")], got.Header
}

func TestSignVerifiesWithStandardWebhooks(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		secrets []string
		// verifiers are the secrets a receiver might hold; each alone must
		// verify the webhook.
		verifiers []string
	}{
		{"one secret", []string{testSecretCurrent}, []string{testSecretCurrent}},
		{"rotation", []string{testSecretCurrent, testSecretOld}, []string{testSecretCurrent, testSecretOld}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			body := []byte(`{"order": 42}`)
			msg := Message{WebhookID: "tsk_01JABCDEF", URL: "https://example.com/hooks/order", Body: body}
			h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, tt.secrets...), msg, time.Now())
			require.NoError(t, err)
			require.Len(t, strings.Split(h["webhook-signature"][0], " "), len(tt.secrets))

			raw, received := onTheWire(t, h, body)
			// Sent lowercase, as the specification spells them.
			for _, name := range []string{"webhook-id: ", "webhook-timestamp: ", "webhook-signature: ", "Hookwheel-Signature: "} {
				require.Contains(t, raw, "\r\n"+name)
			}

			for _, secret := range tt.verifiers {
				wh, err := standardwebhooks.NewWebhook(secret)
				require.NoError(t, err)
				require.NoError(t, wh.Verify(body, received))
			}

			other, err := standardwebhooks.NewWebhook(testSecretOther)
			require.NoError(t, err)
			require.ErrorIs(t, other.Verify(body, received), standardwebhooks.ErrNoMatchingSignature)
		})
	}
}

func TestSignRejectsTampering(t *testing.T) {
	t.Parallel()

	now := time.Now()
	body := []byte(`{"order": 42}`)
	msg := Message{WebhookID: "tsk_01JABCDEF", URL: "https://example.com/hook", Body: body}
	h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, testSecretCurrent), msg, now)
	require.NoError(t, err)
	_, received := onTheWire(t, h, body)
	wh, err := standardwebhooks.NewWebhook(testSecretCurrent)
	require.NoError(t, err)

	tests := []struct {
		name   string
		body   []byte
		header func(http.Header)
	}{
		{"body", []byte(`{"order": 43}`), func(http.Header) {}},
		{"body appended", append(append([]byte(nil), body...), ' '), func(http.Header) {}},
		{"webhook-id", body, func(h http.Header) { h.Set("webhook-id", "tsk_other") }},
		{"webhook-timestamp", body, func(h http.Header) {
			h.Set("webhook-timestamp", strconv.FormatInt(now.Unix()-1, 10))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := received.Clone()
			tt.header(header)
			require.ErrorIs(t, wh.Verify(tt.body, header), standardwebhooks.ErrNoMatchingSignature)
		})
	}
}

func TestSignHeaders(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 22, 10, 0, 0, 999_999_999, time.UTC)
	msg := Message{WebhookID: "tsk_1", URL: "https://example.com/hook", Body: []byte("hello")}
	h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, testSecretOld, testSecretCurrent), msg, now)
	require.NoError(t, err)

	require.Len(t, h, 4)
	require.Equal(t, []string{"tsk_1"}, h["webhook-id"])
	// Seconds, truncated: a receiver must never see a timestamp in its future.
	require.Equal(t, []string{strconv.FormatInt(now.Unix(), 10)}, h["webhook-timestamp"])
	require.Len(t, h["Hookwheel-Signature"], 1)

	// The same signatures the reference implementation computes, in order.
	var want []string
	for _, secret := range []string{testSecretOld, testSecretCurrent} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		sig, err := wh.Sign(msg.WebhookID, now, msg.Body)
		require.NoError(t, err)
		want = append(want, sig)
	}
	require.Equal(t, []string{strings.Join(want, " ")}, h["webhook-signature"])

	// Appending a value must not write into another header's value.
	h["webhook-id"] = append(h["webhook-id"], "x")
	require.Equal(t, []string{strconv.FormatInt(now.Unix(), 10)}, h["webhook-timestamp"])
}

func TestSignJWT(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		cfg      SignerConfig
		lifetime int64
		keyID    string
	}{
		{"default lifetime", SignerConfig{}, 300, ""},
		{"custom lifetime", SignerConfig{JWTLifetime: 90 * time.Second}, 90, ""},
		{"fractional lifetime truncated", SignerConfig{JWTLifetime: 90*time.Second + 900*time.Millisecond}, 90, ""},
		{"sub-second lifetime still valid", SignerConfig{JWTLifetime: time.Millisecond}, 1, ""},
		{"negative lifetime is default", SignerConfig{JWTLifetime: -time.Minute}, 300, ""},
		{"key id in the header", SignerConfig{}, 300, "ss_2x7kq"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			now := time.Now()
			body := []byte(`{"order": 42}`)
			msg := Message{WebhookID: "tsk_01JABCDEF", URL: "https://example.com/hooks/order?x=1", Body: body, KeyID: tt.keyID}
			h, err := NewSigner(tt.cfg).Sign(mustKeys(t, testSecretCurrent, testSecretOld), msg, now)
			require.NoError(t, err)
			_, received := onTheWire(t, h, body)
			tokenString := received.Get("Hookwheel-Signature")

			key, err := ParseSigningSecret(testSecretCurrent)
			require.NoError(t, err)
			claims := jwt.MapClaims{}
			token, err := jwt.ParseWithClaims(tokenString, claims,
				func(*jwt.Token) (any, error) { return key, nil },
				jwt.WithValidMethods([]string{"HS256"}),
				jwt.WithIssuer("hookwheel"),
				jwt.WithSubject(msg.URL),
				jwt.WithIssuedAt(),
				jwt.WithExpirationRequired(),
				jwt.WithStrictDecoding(),
			)
			require.NoError(t, err)
			require.True(t, token.Valid)
			wantHeader := map[string]any{"alg": "HS256", "typ": "JWT"}
			if tt.keyID != "" {
				wantHeader["kid"] = tt.keyID
			}
			require.Equal(t, wantHeader, token.Header)

			sum := sha256.Sum256(body)
			iat := float64(now.Unix())
			require.Equal(t, jwt.MapClaims{
				"iss":  "hookwheel",
				"sub":  msg.URL,
				"jti":  msg.WebhookID,
				"iat":  iat,
				"exp":  iat + float64(tt.lifetime),
				"body": base64.RawURLEncoding.EncodeToString(sum[:]),
			}, claims)

			// Keyed by the first secret only.
			oldKey, err := ParseSigningSecret(testSecretOld)
			require.NoError(t, err)
			_, err = jwt.Parse(tokenString, func(*jwt.Token) (any, error) { return oldKey, nil },
				jwt.WithValidMethods([]string{"HS256"}))
			require.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid)
		})
	}
}

func TestSignJWTExpires(t *testing.T) {
	t.Parallel()

	signedAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	msg := Message{WebhookID: "tsk_1", URL: "https://example.com/hook", Body: []byte("x")}
	h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, testSecretCurrent), msg, signedAt)
	require.NoError(t, err)
	key, err := ParseSigningSecret(testSecretCurrent)
	require.NoError(t, err)

	parseAt := func(at time.Time) error {
		_, err := jwt.Parse(h["Hookwheel-Signature"][0], func(*jwt.Token) (any, error) { return key, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(func() time.Time { return at }))
		return err
	}
	require.NoError(t, parseAt(signedAt.Add(5*time.Minute-time.Second)))
	require.ErrorIs(t, parseAt(signedAt.Add(5*time.Minute+time.Second)), jwt.ErrTokenExpired)
}

func TestSignErrors(t *testing.T) {
	t.Parallel()

	msg := Message{WebhookID: "tsk_1", URL: "https://example.com/hook", Body: []byte("x")}
	tests := []struct {
		name    string
		keys    []Key
		msg     Message
		wantErr string
	}{
		{"no key", nil, msg, "no signing key"},
		{"empty id", mustKeys(t, testSecretCurrent), Message{URL: msg.URL}, "empty webhook id"},
		{"zero first key", []Key{{}, mustKeys(t, testSecretCurrent)[0]}, msg, "signing key 0: not a parsed key"},
		{"zero rotated key", []Key{mustKeys(t, testSecretCurrent)[0], {}}, msg, "signing key 1: not a parsed key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := NewSigner(SignerConfig{}).Sign(tt.keys, tt.msg, time.Now())
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, h)
		})
	}
}

func TestParseSigningSecret(t *testing.T) {
	t.Parallel()

	secretOf := func(n int) string {
		return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n))
	}
	tests := []struct {
		name    string
		secret  string
		wantLen int
		wantErr string
	}{
		{"24 bytes", secretOf(24), 24, ""},
		{"32 bytes", secretOf(32), 32, ""},
		{"64 bytes", secretOf(64), 64, ""},
		{"23 bytes", secretOf(23), 0, "decodes to 23 bytes, want 24 to 64"},
		{"65 bytes", secretOf(65), 0, "decodes to 65 bytes, want 24 to 64"},
		{"far too long", secretOf(4096), 0, "longer than 64 bytes"},
		{"empty", "", 0, `must start with "whsec_"`},
		{"prefix only", "whsec_", 0, "decodes to 0 bytes"},
		{"no prefix", strings.TrimPrefix(secretOf(32), "whsec_"), 0, `must start with "whsec_"`},
		{"wrong prefix case", "WHSEC_" + strings.TrimPrefix(secretOf(32), "whsec_"), 0, `must start with "whsec_"`},
		{"unpadded", strings.TrimRight(secretOf(32), "="), 0, "not standard base64"},
		{"url alphabet", "whsec_" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)), 0, "not standard base64"},
		{"not base64", "whsec_not base64 at all, not even close", 0, "not standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := ParseSigningSecret(tt.secret)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, key)
				if len(tt.secret) > len("whsec_")+8 {
					require.NotContains(t, err.Error(), tt.secret[len("whsec_"):], "error leaks the secret")
				}
				return
			}
			require.NoError(t, err)
			require.Len(t, key, tt.wantLen)
			require.Equal(t, bytes.Repeat([]byte{0xa5}, tt.wantLen), key)
		})
	}
}

func TestIsSignatureHeader(t *testing.T) {
	t.Parallel()

	h, err := NewSigner(SignerConfig{}).Sign(mustKeys(t, testSecretCurrent),
		Message{WebhookID: "tsk_1", URL: "https://example.com/hook"}, time.Now())
	require.NoError(t, err)
	for name := range h {
		require.True(t, IsSignatureHeader(name), name)
		require.True(t, IsSignatureHeader(strings.ToUpper(name)), name)
		require.True(t, IsSignatureHeader(http.CanonicalHeaderKey(name)), name)
	}
	for _, name := range []string{"Content-Type", "Idempotency-Key", "Hookwheel-Attempt", "Webhook", "webhook-id2", ""} {
		require.False(t, IsSignatureHeader(name), name)
	}
}

func TestSignConcurrent(t *testing.T) {
	t.Parallel()

	// One Signer is shared by every dispatcher worker; run under -race.
	s := NewSigner(SignerConfig{})
	keys := mustKeys(t, testSecretCurrent, testSecretOld)
	wh, err := standardwebhooks.NewWebhook(testSecretCurrent)
	require.NoError(t, err)
	done := make(chan error)
	for i := range 8 {
		go func() {
			msg := Message{WebhookID: "tsk_" + strconv.Itoa(i), URL: "https://example.com/hook", Body: []byte(strconv.Itoa(i))}
			h, err := s.Sign(keys, msg, time.Now())
			if err == nil {
				wire := http.Header{}
				for k, v := range h {
					wire[http.CanonicalHeaderKey(k)] = v
				}
				err = wh.Verify(msg.Body, wire)
			}
			done <- err
		}()
	}
	for range 8 {
		require.NoError(t, <-done)
	}
}

func BenchmarkSign(b *testing.B) {
	body := bytes.Repeat([]byte(`{"k":"v"},`), 103)[:1024]
	msg := Message{WebhookID: "tsk_01JABCDEFGHJKMNPQRSTVWXYZ0", URL: "https://example.com/hooks/order-timeout", Body: body}
	now := time.Now()
	s := NewSigner(SignerConfig{})
	edCurrent, _ := testKeyPair(1)
	edOld, _ := testKeyPair(2)

	for _, bm := range []struct {
		name string
		keys []string
	}{
		{"1KiB/one_secret", []string{testSecretCurrent}},
		{"1KiB/rotation", []string{testSecretCurrent, testSecretOld}},
		{"1KiB/ed25519", []string{edCurrent}},
		{"1KiB/ed25519_rotation", []string{edCurrent, edOld}},
		{"1KiB/hmac_to_ed25519", []string{edCurrent, testSecretOld}},
		{"1KiB/ed25519_to_hmac", []string{testSecretCurrent, edOld}},
	} {
		keys := mustKeys(b, bm.keys...)
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := s.Sign(keys, msg, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseKey is what opening a claim's keys adds per webhook beside
// Sign (the dispatcher parses them once per claim).
func BenchmarkParseKey(b *testing.B) {
	edKey, _ := testKeyPair(1)
	for name, key := range map[string]string{"hmac": testSecretCurrent, "ed25519": edKey} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseKey(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	require.NoError(t, err)
	b, err := NewSecret()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "whsec_"))
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	require.NoError(t, err)
	require.Len(t, key, 32)

	// A Standard Webhooks library takes it as it is.
	wh, err := standardwebhooks.NewWebhook(a)
	require.NoError(t, err)
	_, err = wh.Sign("msg_1", time.Now(), []byte("x"))
	require.NoError(t, err)
}
