// Package webhook verifies, on the receiving side, that a request really is
// a webhook hookwheel sent, for this body, recently: a receiver must not act
// on a forged or replayed request just because it reached its URL.
//
// hookwheel signs every attempt twice: a Standard Webhooks signature
// (webhook-id, webhook-timestamp, webhook-signature) and the
// Hookwheel-Signature JWT, which also binds the target URL. Verify checks the
// first always and the second when the request carries it.
//
// A tenant signs with an HMAC secret ("whsec_...", "v1" signatures and HS256
// JWTs, checked with the official Standard Webhooks library) or with an
// Ed25519 key pair whose public key ("whpk_...") receivers are given ("v1a"
// signatures and EdDSA JWTs): a public key verifies webhooks but cannot sign
// one, so a receiver that leaks it lets no one forge them.
package webhook

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Tolerance is how far webhook-timestamp may be from the receiver's clock,
// either way, as the Standard Webhooks libraries allow: an older request is
// refused as a possible replay.
const Tolerance = 5 * time.Minute

// clockSkew is how far the JWT's iat and exp may be off the receiver's
// clock: the server and the receiver never agree to the second.
const clockSkew = time.Minute

// Headers hookwheel signs with.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderJWT       = "Hookwheel-Signature"
)

// The prefixes of what Verify is given: an HMAC signing secret, or an
// Ed25519 public key.
const (
	SecretPrefix    = "whsec_"
	PublicKeyPrefix = "whpk_"
)

// The reasons Verify refuses a request; its errors wrap one of them.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or
	// webhook-signature is absent or malformed.
	ErrMissingHeaders = errors.New("webhook: missing or malformed signature headers")
	// ErrTimestamp: webhook-timestamp is further than Tolerance from now.
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
	// ErrSignature: no signature in webhook-signature matches the body
	// under any of the secrets or public keys.
	ErrSignature = errors.New("webhook: no valid signature")
	// ErrToken: the Hookwheel-Signature JWT does not verify, or names
	// another webhook, body or URL.
	ErrToken = errors.New("webhook: invalid Hookwheel-Signature")
)

// Option adds a check to Verify.
type Option func(*options)

type options struct {
	url string
}

// WithURL requires the request to carry a Hookwheel-Signature JWT, signed by
// one of the keys, naming url (the task's URL, as it was scheduled) as its
// subject, so that a request captured at another receiver of the same tenant
// cannot be replayed at this one. The JWT is signed with the tenant's current
// key only: during a rotation, the receiver needs the new secret or public
// key for this check.
func WithURL(url string) Option {
	return func(o *options) { o.url = url }
}

// keys are what a receiver verifies with, decoded.
type keys struct {
	secrets [][]byte
	public  []ed25519.PublicKey
}

// Verify checks that header and body are a webhook hookwheel signed with one
// of keys, within Tolerance of now. Each key is a signing secret
// ("whsec_...", which verifies "v1" entries of webhook-signature) or an
// Ed25519 public key ("whpk_...", which verifies "v1a" entries), as
// GET /v1/signing-secrets shows the tenant's; during a rotation, give both
// the new and the old one: any one verifies.
//
// When header carries a Hookwheel-Signature JWT signed by one of the keys
// (HS256 by a secret, EdDSA by a public key), its claims must match too:
// issuer "hookwheel", jti the webhook-id, body the SHA-256 of body, not
// expired (with a minute of clock skew), and subject the URL given WithURL.
// The JWT is signed with the tenant's current key, whose signature comes
// first in webhook-signature: when one of keys made that first signature,
// the JWT must verify too. Otherwise (a rotation the receiver has not been
// given the new key of) a JWT none of the keys verifies is passed over and
// the Standard Webhooks signature stands alone, unless WithURL asks for the
// JWT.
//
// body must be the request body exactly as received, before any parsing.
// Header names are matched in any letter case.
func Verify(keys []string, header http.Header, body []byte, opts ...Option) error {
	if len(keys) == 0 {
		return errors.New("webhook: no signing secret or public key to verify with")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	decoded, err := decodeKeys(keys)
	if err != nil {
		return err
	}
	// The library reads headers with Get, which misses names stored in
	// lowercase by direct assignment (as hookwheel's own signer does).
	// The canonical name's values go first, whatever the map's order, so
	// that Get reads the same value every time.
	h := make(http.Header, len(header))
	for k, v := range header {
		ck := http.CanonicalHeaderKey(k)
		if k == ck {
			h[ck] = append(append([]string(nil), v...), h[ck]...)
		} else {
			h[ck] = append(h[ck], v...)
		}
	}
	if h.Get(HeaderID) == "" || h.Get(HeaderTimestamp) == "" || h.Get(HeaderSignature) == "" {
		return fmt.Errorf("%w: want %s, %s and %s", ErrMissingHeaders, HeaderID, HeaderTimestamp, HeaderSignature)
	}

	verified := false
	if len(decoded.secrets) > 0 {
		if verified, err = verifyV1(decoded.secrets, h, body); err != nil {
			return err
		}
	}
	if !verified && len(decoded.public) > 0 {
		if verified, err = verifyV1a(decoded.public, h, body, time.Now()); err != nil {
			return err
		}
	}
	if !verified {
		return fmt.Errorf("%w under any of the %d key(s)", ErrSignature, len(keys))
	}
	token := h.Get(HeaderJWT)
	switch {
	case token != "":
		// The JWT is signed with the tenant's current key, whose signature
		// comes first: when one of the receiver's keys made that one, the
		// JWT must verify too.
		strict := o.url != "" || firstSignatureIsOurs(decoded, h, body)
		return verifyToken(decoded, token, h.Get(HeaderID), body, strict, o)
	case o.url != "":
		// Without the JWT, nothing binds the request to this URL.
		return fmt.Errorf("%w: no %s header to check the URL with", ErrToken, HeaderJWT)
	}
	return nil
}

// verifyV1 checks the "v1" entries with the official Standard Webhooks
// library, which also checks the timestamp.
func verifyV1(secrets [][]byte, h http.Header, body []byte) (bool, error) {
	for i, secret := range secrets {
		wh, err := standardwebhooks.NewWebhookRaw(secret)
		if err != nil {
			return false, fmt.Errorf("webhook: signing secret %d: %w", i, err)
		}
		switch err := wh.Verify(body, h); {
		case err == nil:
			return true, nil
		case errors.Is(err, standardwebhooks.ErrMessageTooOld), errors.Is(err, standardwebhooks.ErrMessageTooNew):
			return false, fmt.Errorf("%w: %w", ErrTimestamp, err)
		case errors.Is(err, standardwebhooks.ErrInvalidHeaders), errors.Is(err, standardwebhooks.ErrRequiredHeaders):
			return false, fmt.Errorf("%w: %w", ErrMissingHeaders, err)
		case !errors.Is(err, standardwebhooks.ErrNoMatchingSignature):
			return false, fmt.Errorf("webhook: %w", err)
		}
	}
	return false, nil
}

// verifyV1a checks the timestamp as the Standard Webhooks library does, then
// the "v1a" entries: the Ed25519 signature of "<id>.<timestamp>.<body>".
func verifyV1a(public []ed25519.PublicKey, h http.Header, body []byte, now time.Time) (bool, error) {
	unix, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return false, fmt.Errorf("%w: %s is not Unix seconds", ErrMissingHeaders, HeaderTimestamp)
	}
	switch at := time.Unix(unix, 0); {
	case now.Sub(at) > Tolerance:
		return false, fmt.Errorf("%w: signed %s ago", ErrTimestamp, now.Sub(at).Round(time.Second))
	case at.After(now.Add(Tolerance)):
		return false, fmt.Errorf("%w: signed %s ahead of now", ErrTimestamp, at.Sub(now).Round(time.Second))
	}
	content := signedContent(h, body)
	for _, entry := range strings.Fields(h.Get(HeaderSignature)) {
		sig, ok := decodeEntry(entry, "v1a,", ed25519.SignatureSize)
		if !ok {
			continue
		}
		for _, key := range public {
			if ed25519.Verify(key, content, sig) {
				return true, nil
			}
		}
	}
	return false, nil
}

// signedContent is what a Standard Webhooks signature signs.
func signedContent(h http.Header, body []byte) []byte {
	prefix := h.Get(HeaderID) + "." + h.Get(HeaderTimestamp) + "."
	return append(append(make([]byte, 0, len(prefix)+len(body)), prefix...), body...)
}

// decodeEntry returns the signature of a webhook-signature entry of version
// ("v1," or "v1a,") when it is one, of size bytes.
func decodeEntry(entry, version string, size int) ([]byte, bool) {
	encoded, ok := strings.CutPrefix(entry, version)
	if !ok {
		return nil, false
	}
	sig, err := base64.StdEncoding.DecodeString(encoded)
	return sig, err == nil && len(sig) == size
}

// decodeKeys sorts the receiver's keys by kind and decodes them.
func decodeKeys(given []string) (keys, error) {
	var k keys
	for i, s := range given {
		switch {
		case strings.HasPrefix(s, PublicKeyPrefix):
			key, err := base64.StdEncoding.DecodeString(s[len(PublicKeyPrefix):])
			if err != nil || len(key) != ed25519.PublicKeySize {
				// The index, never the key, says which one is wrong.
				return keys{}, fmt.Errorf(`webhook: key %d: want %q followed by the standard base64 of 32 bytes`, i, PublicKeyPrefix)
			}
			k.public = append(k.public, key)
		case strings.HasPrefix(s, SecretPrefix):
			key, err := base64.StdEncoding.DecodeString(s[len(SecretPrefix):])
			if err != nil || len(key) == 0 {
				return keys{}, fmt.Errorf(`webhook: key %d: want %q followed by standard base64`, i, SecretPrefix)
			}
			k.secrets = append(k.secrets, key)
		default:
			return keys{}, fmt.Errorf(`webhook: key %d: want a signing secret ("whsec_...") or a public key ("whpk_...")`, i)
		}
	}
	return k, nil
}

// tokenClaims are the claims of the Hookwheel-Signature JWT.
type tokenClaims struct {
	jwt.RegisteredClaims
	// Body is the unpadded base64url SHA-256 of the request body.
	Body string `json:"body"`
}

// errOtherKind is a key func's refusal of a key of the other kind than the
// token's alg: a secret is never tried as an EdDSA key, nor a public key as
// an HS256 secret.
var errOtherKind = errors.New("the key is not of the token's algorithm")

// verifyToken checks the Hookwheel-Signature JWT under each key in turn: it
// is signed with the tenant's current key only, which may be any of the
// receiver's during a rotation, or none of them.
func verifyToken(k keys, token, webhookID string, body []byte, strict bool, o options) error {
	parserOpts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg(), jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer("hookwheel"),
		jwt.WithIssuedAt(),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(clockSkew),
	}
	if o.url != "" {
		parserOpts = append(parserOpts, jwt.WithSubject(o.url))
	}
	parser := jwt.NewParser(parserOpts...)
	sum := sha256.Sum256(body)
	wantBody := base64.RawURLEncoding.EncodeToString(sum[:])
	candidates := make([]any, 0, len(k.secrets)+len(k.public))
	for _, s := range k.secrets {
		candidates = append(candidates, s)
	}
	for _, p := range k.public {
		candidates = append(candidates, p)
	}
	for _, key := range candidates {
		var claims tokenClaims
		_, err := parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
			_, secret := key.([]byte)
			if secret != (t.Method == jwt.SigningMethodHS256) {
				return nil, errOtherKind
			}
			return key, nil
		})
		switch {
		case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, errOtherKind):
			continue
		case err != nil:
			return fmt.Errorf("%w: %w", ErrToken, err)
		case claims.ID != webhookID:
			return fmt.Errorf("%w: it names webhook %q, not %q", ErrToken, claims.ID, webhookID)
		case claims.Body != wantBody:
			return fmt.Errorf("%w: it was signed for another body", ErrToken)
		}
		return nil
	}
	if strict {
		return fmt.Errorf("%w: not signed by any of the %d key(s), although the first signature is; "+
			"the current signing key signs it", ErrToken, len(candidates))
	}
	return nil
}

// firstSignatureIsOurs reports whether the first entry of webhook-signature,
// the tenant's current key's, was made by one of keys.
func firstSignatureIsOurs(k keys, h http.Header, body []byte) bool {
	first, _, _ := strings.Cut(h.Get(HeaderSignature), " ")
	if sig, ok := decodeEntry(first, "v1,", sha256.Size); ok {
		for _, key := range k.secrets {
			mac := hmac.New(sha256.New, key)
			mac.Write([]byte(h.Get(HeaderID) + "." + h.Get(HeaderTimestamp) + "."))
			mac.Write(body)
			if hmac.Equal(mac.Sum(nil), sig) {
				return true
			}
		}
	}
	if sig, ok := decodeEntry(first, "v1a,", ed25519.SignatureSize); ok {
		content := signedContent(h, body)
		for _, key := range k.public {
			if ed25519.Verify(key, content, sig) {
				return true
			}
		}
	}
	return false
}
