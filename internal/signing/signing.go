// Package signing owns hookwheel's signing keys and webhook signatures: the
// key formats ("whsec_" HMAC secrets made by NewSecret, Ed25519 key pairs
// made by NewKeyPair, both read by ParseKey) and the Signer that signs every
// attempt in both forms receivers verify, Standard Webhooks and the
// Hookwheel-Signature JWT.
package signing

import (
	"crypto/ed25519"
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

	// KeyID names the first key, the one that signs the JWT, in the JWT
	// header's kid: during a rotation a receiver that verifies the JWT
	// alone picks the right secret or public key by it instead of trying
	// each. Empty leaves kid out.
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
//   - webhook-signature: one entry per key, space separated, so that a
//     receiver holding any one of them verifies it (key rotation): for an
//     HMAC-SHA256 key "v1,<base64 HMAC-SHA256 of id.timestamp.body>", for
//     an Ed25519 key "v1a,<base64 Ed25519 signature of id.timestamp.body>",
//     as Standard Webhooks defines them;
//   - Hookwheel-Signature: a JWT signed by the first key, HS256 for an HMAC
//     key and EdDSA (RFC 8037) for an Ed25519 one, with header kid
//     msg.KeyID (when set) and claims iss "hookwheel", sub msg.URL, jti
//     msg.WebhookID, iat, exp, and body, the unpadded base64url SHA-256 of
//     msg.Body.
//
// The keys are ParseKey's; the first is the current one. The lowercase
// names are stored as given rather than canonicalized, so read them by
// indexing the map (h["webhook-id"]), not with Header.Get, and copy them into
// a request the same way.
func (s *Signer) Sign(keys []Key, msg Message, now time.Time) (http.Header, error) {
	if len(keys) == 0 {
		return nil, errors.New("sign webhook: no signing key")
	}
	if msg.WebhookID == "" {
		return nil, errors.New("sign webhook: empty webhook id")
	}

	ts := now.Unix()
	// The signed content is "<id>.<timestamp>.<body>"; HMAC hashes the
	// prefix and the body separately, which avoids copying the body for
	// every secret.
	prefix := make([]byte, 0, len(msg.WebhookID)+22)
	prefix = append(prefix, msg.WebhookID...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, ts, 10)
	prefix = append(prefix, '.')
	timestamp := string(prefix[len(msg.WebhookID)+1 : len(prefix)-1])

	const (
		hmacSignatureLen    = len("v1,") + (sha256.Size+2)/3*4
		ed25519SignatureLen = len("v1a,") + (ed25519.SignatureSize+2)/3*4
	)
	size := 0
	for i := range keys {
		size += 1 + hmacSignatureLen
		if keys[i].algorithm == Ed25519 {
			size += ed25519SignatureLen - hmacSignatureLen
		}
	}
	sig := make([]byte, 0, size)
	var (
		sum [sha256.Size]byte
		// content is the signed content in one piece, as Ed25519 takes
		// it: made once, and only when an Ed25519 key signs.
		content []byte
	)
	for i := range keys {
		key := &keys[i]
		if i > 0 {
			sig = append(sig, ' ')
		}
		switch key.algorithm {
		case HMACSHA256:
			mac := hmac.New(sha256.New, key.secret())
			mac.Write(prefix)
			mac.Write(msg.Body)
			sig = append(sig, "v1,"...)
			sig = base64.StdEncoding.AppendEncode(sig, mac.Sum(sum[:0]))
		case Ed25519:
			if content == nil {
				content = make([]byte, 0, len(prefix)+len(msg.Body))
				content = append(append(content, prefix...), msg.Body...)
			}
			sig = append(sig, "v1a,"...)
			sig = base64.StdEncoding.AppendEncode(sig, ed25519.Sign(key.privateKey(), content))
		default:
			// The index, never the key, identifies which one is wrong.
			return nil, fmt.Errorf("sign webhook: signing key %d: %w", i, errZeroKey)
		}
	}
	token, err := s.signJWT(&keys[0], msg, ts)
	if err != nil {
		return nil, fmt.Errorf("sign webhook: %w", err)
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

// The encoded JOSE headers without kid, {"alg":"HS256","typ":"JWT"} and
// {"alg":"EdDSA","typ":"JWT"}, byte for byte what golang-jwt writes. The
// token is assembled here and only its signature computed: jwt.Token
// re-encodes this constant header through a map on every call, and its
// NumericDate encoding follows the package-global jwt.TimePrecision, which
// other code in the process may set. Together that more than doubled the
// cost of Sign.
const (
	signatureJWTHeaderHS256 = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
	signatureJWTHeaderEdDSA = "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9"
)

func (s *Signer) signJWT(key *Key, msg Message, iat int64) (string, error) {
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

	alg, header := jwt.SigningMethodHS256.Alg(), signatureJWTHeaderHS256
	if key.algorithm == Ed25519 {
		alg, header = jwt.SigningMethodEdDSA.Alg(), signatureJWTHeaderEdDSA
	}
	if msg.KeyID != "" {
		kid, err := json.Marshal(msg.KeyID)
		if err != nil {
			return "", fmt.Errorf("encode Hookwheel-Signature kid: %w", err)
		}
		// The members in golang-jwt's (sorted) order, as the constants are.
		header = enc.EncodeToString([]byte(`{"alg":"` + alg + `","kid":` + string(kid) + `,"typ":"JWT"}`))
	}
	token := make([]byte, 0, len(header)+1+enc.EncodedLen(len(claims))+1+enc.EncodedLen(ed25519.SignatureSize))
	token = append(token, header...)
	token = append(token, '.')
	token = enc.AppendEncode(token, claims)
	var signature []byte
	if key.algorithm == Ed25519 {
		// EdDSA over the signing input as it is, what golang-jwt's
		// SigningMethodEdDSA verifies, without its copy of the input.
		signature = ed25519.Sign(key.privateKey(), token)
	} else if signature, err = jwt.SigningMethodHS256.Sign(string(token), key.secret()); err != nil {
		return "", fmt.Errorf("sign Hookwheel-Signature JWT: %w", err)
	}
	token = append(token, '.')
	token = enc.AppendEncode(token, signature)
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
// signingSecretBufLen bytes, so that ParseKey need not allocate.
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
