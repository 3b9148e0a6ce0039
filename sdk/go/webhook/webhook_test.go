package webhook_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

func newSecret(t *testing.T) (string, []byte) {
	t.Helper()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(key), key
}

// message is one webhook attempt to sign.
type message struct {
	id, url string
	at      time.Time
	body    []byte
}

// sign returns the headers hookwheel sends with msg: the Standard Webhooks
// signature of each secret (made by the official library) and, keyed by
// jwtKey when it is not nil, the Hookwheel-Signature JWT with claims.
func sign(t *testing.T, msg message, secrets []string, jwtKey []byte, claims jwt.MapClaims) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", msg.id)
	h.Set("webhook-timestamp", strconv.FormatInt(msg.at.Unix(), 10))
	var sigs string
	for i, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		sig, err := wh.Sign(msg.id, msg.at, msg.body)
		require.NoError(t, err)
		if i > 0 {
			sigs += " "
		}
		sigs += sig
	}
	h.Set("webhook-signature", sigs)
	if jwtKey != nil {
		token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(jwtKey)
		require.NoError(t, err)
		h.Set("Hookwheel-Signature", token)
	}
	return h
}

// claimsOf are the JWT claims hookwheel signs msg with.
func claimsOf(msg message) jwt.MapClaims {
	sum := sha256.Sum256(msg.body)
	return jwt.MapClaims{
		"iss": "hookwheel", "sub": msg.url, "jti": msg.id, "iat": msg.at.Unix(),
		"exp": msg.at.Add(5 * time.Minute).Unix(), "body": base64.RawURLEncoding.EncodeToString(sum[:]),
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	current, currentKey := newSecret(t)
	previous, _ := newSecret(t)
	other, otherKey := newSecret(t)
	msg := message{id: "0190f3a2-7b1c-7d2e-9f00-0123456789ab", url: "https://example.com/hooks/x", at: time.Now(),
		body: []byte(`{"order":42}`)}

	// signedAt signs msg as if sent at another time.
	signedAt := func(at time.Time) http.Header {
		m := msg
		m.at = at
		return sign(t, m, []string{current}, nil, nil)
	}
	// withClaims signs msg with its JWT claims changed.
	withClaims := func(change func(jwt.MapClaims)) http.Header {
		c := claimsOf(msg)
		change(c)
		return sign(t, msg, []string{current}, currentKey, c)
	}
	badTimestamp := sign(t, msg, []string{current}, nil, nil)
	badTimestamp.Set("webhook-timestamp", "noon")

	tests := []struct {
		name string
		// header is what the request carries; body defaults to msg.body.
		header  http.Header
		body    []byte
		secrets []string
		opts    []webhook.Option
		wantErr error
	}{
		{name: "one secret", header: sign(t, msg, []string{current}, nil, nil), secrets: []string{current}},
		{name: "one secret and the JWT", header: sign(t, msg, []string{current}, currentKey, claimsOf(msg)),
			secrets: []string{current}, opts: []webhook.Option{webhook.WithURL(msg.url)}},
		{name: "rotation: the receiver has the new secret", header: sign(t, msg, []string{current, previous}, currentKey, claimsOf(msg)),
			secrets: []string{current}},
		{name: "rotation: the receiver still has the old secret only", header: sign(t, msg, []string{current, previous}, currentKey, claimsOf(msg)),
			secrets: []string{previous}},
		{name: "rotation: the old secret only cannot check the URL", header: sign(t, msg, []string{current, previous}, currentKey, claimsOf(msg)),
			secrets: []string{previous}, opts: []webhook.Option{webhook.WithURL(msg.url)}, wantErr: webhook.ErrToken},
		{name: "rotation: the receiver has both, old first", header: sign(t, msg, []string{current, previous}, currentKey, claimsOf(msg)),
			secrets: []string{previous, current}},
		{name: "wrong secret", header: sign(t, msg, []string{current}, nil, nil), secrets: []string{other},
			wantErr: webhook.ErrSignature},
		{name: "body changed", header: sign(t, msg, []string{current}, nil, nil), body: []byte(`{"order":43}`),
			secrets: []string{current}, wantErr: webhook.ErrSignature},
		{name: "too old", header: signedAt(msg.at.Add(-6 * time.Minute)),
			secrets: []string{current}, wantErr: webhook.ErrTimestamp},
		{name: "too new", header: signedAt(msg.at.Add(6 * time.Minute)),
			secrets: []string{current}, wantErr: webhook.ErrTimestamp},
		{name: "no signature headers", header: http.Header{"Content-Type": {"application/json"}}, secrets: []string{current},
			wantErr: webhook.ErrMissingHeaders},
		{name: "timestamp not a number", header: badTimestamp,
			secrets: []string{current}, wantErr: webhook.ErrMissingHeaders},
		{name: "JWT signed by another secret, URL asked", header: sign(t, msg, []string{current}, otherKey, claimsOf(msg)),
			secrets: []string{current}, opts: []webhook.Option{webhook.WithURL(msg.url)}, wantErr: webhook.ErrToken},
		{name: "no JWT, URL asked", header: sign(t, msg, []string{current}, nil, nil),
			secrets: []string{current}, opts: []webhook.Option{webhook.WithURL(msg.url)}, wantErr: webhook.ErrToken},
		// The first signature is the current secret's, which also signs the
		// JWT: a JWT it does not verify was not made by hookwheel.
		{name: "JWT forged beside the current secret's signature", header: sign(t, msg, []string{current}, otherKey, claimsOf(msg)),
			secrets: []string{current}, wantErr: webhook.ErrToken},
		{name: "JWT for another URL", header: sign(t, msg, []string{current}, currentKey, claimsOf(msg)),
			secrets: []string{current}, opts: []webhook.Option{webhook.WithURL("https://attacker.example/")}, wantErr: webhook.ErrToken},
		{name: "JWT for another webhook", header: withClaims(func(c jwt.MapClaims) { c["jti"] = "another" }),
			secrets: []string{current}, wantErr: webhook.ErrToken},
		{name: "JWT for another body", header: withClaims(func(c jwt.MapClaims) { c["body"] = "AAAA" }),
			secrets: []string{current}, wantErr: webhook.ErrToken},
		{name: "JWT from another issuer", header: withClaims(func(c jwt.MapClaims) { c["iss"] = "someone" }),
			secrets: []string{current}, wantErr: webhook.ErrToken},
		{name: "JWT expired", header: withClaims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }),
			secrets: []string{current}, wantErr: webhook.ErrToken},
		{name: "JWT without expiry", header: withClaims(func(c jwt.MapClaims) { delete(c, "exp") }),
			secrets: []string{current}, wantErr: webhook.ErrToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := tc.body
			if body == nil {
				body = msg.body
			}
			err := webhook.Verify(tc.secrets, tc.header, body, tc.opts...)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
		})
	}
}

// TestVerifyUnsignedJWT: a JWT with alg "none" proves nothing; it cannot
// stand for the URL check, and without that check it is ignored like any JWT
// that none of the secrets signed (the Standard Webhooks signature still
// authenticates the request).
func TestVerifyUnsignedJWT(t *testing.T) {
	t.Parallel()
	secret, _ := newSecret(t)
	msg := message{id: "id-1", url: "https://example.com/", at: time.Now(), body: []byte("x")}
	h := sign(t, msg, []string{secret}, nil, nil)
	token, err := jwt.NewWithClaims(jwt.SigningMethodNone, claimsOf(msg)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	h.Set("Hookwheel-Signature", token)
	require.ErrorIs(t, webhook.Verify([]string{secret}, h, msg.body, webhook.WithURL(msg.url)), webhook.ErrToken)
	require.ErrorIs(t, webhook.Verify([]string{secret}, h, msg.body), webhook.ErrToken,
		"the secret that made the first signature signs every JWT: an unsigned one is forged")
}

// TestVerifyLowercaseHeaders verifies headers stored under their lowercase
// names, as a program that builds them by assignment has them.
func TestVerifyLowercaseHeaders(t *testing.T) {
	t.Parallel()
	secret, _ := newSecret(t)
	msg := message{id: "id-1", at: time.Now(), body: []byte("x")}
	canonical := sign(t, msg, []string{secret}, nil, nil)
	lower := http.Header{}
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		lower[name] = canonical.Values(name)
	}
	require.NoError(t, webhook.Verify([]string{secret}, lower, msg.body))
}

func TestVerifyRefusesBadSecrets(t *testing.T) {
	t.Parallel()
	good, _ := newSecret(t)
	msg := message{id: "id-1", at: time.Now(), body: []byte("x")}
	h := sign(t, msg, []string{good}, nil, nil)
	for _, secrets := range [][]string{nil, {"not-a-secret"}, {"whsec_%%%"}} {
		err := webhook.Verify(secrets, h, msg.body)
		require.Error(t, err, "%q", secrets)
		for _, s := range secrets {
			require.NotContains(t, err.Error(), s, "errors never show a secret")
		}
	}
}
