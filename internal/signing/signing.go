// Package signing owns hookwheel's signing secrets and webhook signatures: the
// "whsec_" secret format (made by NewSecret, read by ParseSigningSecret) and
// the Signer that signs every attempt in both forms receivers verify, Standard
// Webhooks and the Hookwheel-Signature JWT.
package signing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// SecretPrefix starts every signing secret, as the Standard Webhooks
	// specification spells them.
	SecretPrefix = "whsec_"
	// newSecretBytes is the size of the secrets NewSecret makes.
	newSecretBytes            = 32
	signingSecretMinBytes     = 24
	signingSecretMaxBytes     = 64
	signatureJWTIssuer        = "hookwheel"
	defaultSignatureJWTExpiry = 5 * time.Minute
)

// NewSecret returns a new signing secret: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() (string, error) {
	b := make([]byte, newSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate signing secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// Message is what one attempt signs.
type Message struct {
	// WebhookID is the task id, sent as webhook-id and as the JWT's jti. It
	// must not be empty: Standard Webhooks receivers reject a missing id.
	WebhookID string

	// URL is the target, bound into the JWT as sub so that a token captured
	// from one receiver cannot be replayed against another.
	URL string

	// Body is the exact request body, byte for byte as it is sent.
	Body []byte

	// KeyID names the first secret, the one that signs the JWT, in the JWT
	// header's kid: during a rotation a receiver that verifies the JWT
	// alone picks the right secret by it instead of trying each. Empty
	// leaves kid out.
	KeyID string
}

// SignerConfig configures a Signer.
type SignerConfig struct {
	// JWTLifetime is how long the Hookwheel-Signature JWT stays valid:
	// exp = iat + JWTLifetime. Zero or negative selects the default,
	// 5 minutes, the same window Standard Webhooks receivers allow for
	// webhook-timestamp. It is truncated to whole seconds, as JWT times are.
	JWTLifetime time.Duration
}

// Signer signs webhook attempts in both forms hookwheel sends: Standard
// Webhooks (webhook-id, webhook-timestamp, webhook-signature) and the
// Hookwheel-Signature JWT. It holds no mutable state and is safe for
// concurrent use.
type Signer struct {
	jwtLifetimeSeconds int64
}

// NewSigner returns a Signer configured by cfg.
func NewSigner(cfg SignerConfig) *Signer {
	lifetime := cfg.JWTLifetime
	if lifetime <= 0 {
		lifetime = defaultSignatureJWTExpiry
	}
	// A sub-second lifetime would otherwise truncate to exp == iat, a token
	// that is already expired when it is sent.
	return &Signer{jwtLifetimeSeconds: max(1, int64(lifetime/time.Second))}
}

// Sign returns the signature headers of one attempt of msg, signed at now:
//
//   - webhook-id: msg.WebhookID;
//   - webhook-timestamp: now in Unix seconds;
//   - webhook-signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>" for
//     each secret, space separated, so that a receiver holding any one of
//     them verifies it (secret rotation);
//   - Hookwheel-Signature: an HS256 JWT keyed by the first secret, with
//     header kid msg.KeyID (when set) and claims iss "hookwheel", sub
//     msg.URL, jti msg.WebhookID, iat, exp, and body, the unpadded base64url
//     SHA-256 of msg.Body.
//
// The secrets are "whsec_" strings as ParseSigningSecret accepts; the first
// is the current one. The lowercase names are stored as given rather than
// canonicalized, so read them by indexing the map (h["webhook-id"]), not with
// Header.Get, and copy them into a request the same way.
func (s *Signer) Sign(secrets []string, msg Message, now time.Time) (http.Header, error) {
	if len(secrets) == 0 {
		return nil, errors.New("sign webhook: no signing secret")
	}
	if msg.WebhookID == "" {
		return nil, errors.New("sign webhook: empty webhook id")
	}

	ts := now.Unix()
	// The signed content is "<id>.<timestamp>.<body>"; hashing the prefix and
	// the body separately avoids copying the body for every secret.
	prefix := make([]byte, 0, len(msg.WebhookID)+22)
	prefix = append(prefix, msg.WebhookID...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, ts, 10)
	prefix = append(prefix, '.')
	timestamp := string(prefix[len(msg.WebhookID)+1 : len(prefix)-1])

	const oneSignatureLen = len("v1,") + (sha256.Size+2)/3*4
	sig := make([]byte, 0, len(secrets)*(oneSignatureLen+1))
	var (
		keyBuf [signingSecretBufLen]byte
		sum    [sha256.Size]byte
		token  string
	)
	for i, secret := range secrets {
		key, err := decodeSigningSecret(keyBuf[:], secret)
		if err != nil {
			// The index, never the secret, identifies which one is wrong.
			return nil, fmt.Errorf("sign webhook: signing secret %d: %w", i, err)
		}
		if i == 0 {
			// Signed here because keyBuf is overwritten by the next secret.
			if token, err = s.signJWT(key, msg, ts); err != nil {
				return nil, fmt.Errorf("sign webhook: %w", err)
			}
		} else {
			sig = append(sig, ' ')
		}
		mac := hmac.New(sha256.New, key)
		mac.Write(prefix)
		mac.Write(msg.Body)
		sig = append(sig, "v1,"...)
		sig = base64.StdEncoding.AppendEncode(sig, mac.Sum(sum[:0]))
	}

	// One backing array for the four values, as net/http does when it reads
	// headers, rather than four one-element slices.
	values := [...]string{msg.WebhookID, timestamp, string(sig), token}
	vs := values[:]
	h := make(http.Header, len(values))
	// Direct assignment keeps the Standard Webhooks names lowercase, as the
	// specification spells them, instead of canonicalizing them.
	h["webhook-id"] = vs[0:1:1]
	h["webhook-timestamp"] = vs[1:2:2]
	h["webhook-signature"] = vs[2:3:3]
	h["Hookwheel-Signature"] = vs[3:4:4]
	return h, nil
}

// IsSignatureHeader reports whether name, in any letter case, is one of the
// headers Sign sets. A task's own headers must not carry these: sent beside
// the lowercase ones under another spelling, they would be a second value
// that receivers may read first (Header.Write sorts "Webhook-Id" before
// "webhook-id"), shadowing or spoofing the signature.
func IsSignatureHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Hookwheel-Signature":
		return true
	}
	return false
}

// signatureClaims are the claims of the Hookwheel-Signature JWT, in the
// order they are encoded.
type signatureClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	ID        string `json:"jti"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
	Body      string `json:"body"`
}

// signatureJWTHeader is the encoded JOSE header {"alg":"HS256","typ":"JWT"},
// byte for byte what golang-jwt writes for HS256. The token is assembled here
// and only its MAC computed by golang-jwt: jwt.Token re-encodes this constant
// header through a map on every call, and its NumericDate encoding follows the
// package-global jwt.TimePrecision, which other code in the process may set.
// Together that more than doubled the cost of Sign.
const signatureJWTHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

func (s *Signer) signJWT(key []byte, msg Message, iat int64) (string, error) {
	enc := base64.RawURLEncoding
	bodySum := sha256.Sum256(msg.Body)
	claims, err := json.Marshal(signatureClaims{
		Issuer:    signatureJWTIssuer,
		Subject:   msg.URL,
		ID:        msg.WebhookID,
		IssuedAt:  iat,
		ExpiresAt: iat + s.jwtLifetimeSeconds,
		Body:      enc.EncodeToString(bodySum[:]),
	})
	if err != nil {
		return "", fmt.Errorf("encode Hookwheel-Signature claims: %w", err)
	}

	header := signatureJWTHeader
	if msg.KeyID != "" {
		kid, err := json.Marshal(msg.KeyID)
		if err != nil {
			return "", fmt.Errorf("encode Hookwheel-Signature kid: %w", err)
		}
		// The members in golang-jwt's (sorted) order, as the constant is.
		header = enc.EncodeToString([]byte(`{"alg":"HS256","kid":` + string(kid) + `,"typ":"JWT"}`))
	}
	token := make([]byte, 0, len(header)+1+enc.EncodedLen(len(claims))+1+enc.EncodedLen(sha256.Size))
	token = append(token, header...)
	token = append(token, '.')
	token = enc.AppendEncode(token, claims)
	mac, err := jwt.SigningMethodHS256.Sign(string(token), key)
	if err != nil {
		return "", fmt.Errorf("sign Hookwheel-Signature JWT: %w", err)
	}
	token = append(token, '.')
	token = enc.AppendEncode(token, mac)
	return string(token), nil
}

// ParseSigningSecret decodes a signing secret: "whsec_" followed by the
// standard (padded) base64 of 24 to 64 bytes, the form Standard Webhooks
// libraries accept. Its errors never include the secret.
func ParseSigningSecret(s string) ([]byte, error) {
	var buf [signingSecretBufLen]byte
	key, err := decodeSigningSecret(buf[:], s)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), key...), nil
}

// signingSecretBufLen is what base64 decoding of the longest valid secret may
// need: DecodedLen rounds up to whole groups of three bytes.
const signingSecretBufLen = (signingSecretMaxBytes + 2) / 3 * 3

// decodeSigningSecret is ParseSigningSecret decoding into buf, which must hold
// signingSecretBufLen bytes, so that Sign need not allocate a key per secret.
func decodeSigningSecret(buf []byte, s string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("invalid signing secret: must start with %q", SecretPrefix)
	}
	// Checked before decoding so that an oversized value cannot overrun buf.
	if base64.StdEncoding.DecodedLen(len(encoded)) > len(buf) {
		return nil, fmt.Errorf("invalid signing secret: longer than %d bytes", signingSecretMaxBytes)
	}
	n, err := base64.StdEncoding.Decode(buf, []byte(encoded))
	if err != nil {
		return nil, fmt.Errorf("invalid signing secret: not standard base64 after %q: %w", SecretPrefix, err)
	}
	if n < signingSecretMinBytes || n > signingSecretMaxBytes {
		return nil, fmt.Errorf("invalid signing secret: decodes to %d bytes, want %d to %d",
			n, signingSecretMinBytes, signingSecretMaxBytes)
	}
	return buf[:n], nil
}
