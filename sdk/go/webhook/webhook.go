// Package webhook verifies, on the receiving side, that a request really is
// a webhook hookwheel sent, for this body, recently: a receiver must not act
// on a forged or replayed request just because it reached its URL.
//
// hookwheel signs every attempt twice: a Standard Webhooks signature
// (webhook-id, webhook-timestamp, webhook-signature), checked here with the
// official Standard Webhooks library, and the Hookwheel-Signature JWT, which
// also binds the target URL. Verify checks the first always and the second
// when the request carries it.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
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

// The reasons Verify refuses a request; its errors wrap one of them.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or
	// webhook-signature is absent or malformed.
	ErrMissingHeaders = errors.New("webhook: missing or malformed signature headers")
	// ErrTimestamp: webhook-timestamp is further than Tolerance from now.
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
	// ErrSignature: no signature in webhook-signature matches the body
	// under any of the secrets.
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
// one of the secrets, naming url (the task's URL, as it was scheduled) as its
// subject, so that a request captured at another receiver of the same tenant
// cannot be replayed at this one. The JWT is signed with the tenant's current
// secret only: during a rotation, the receiver needs the new secret for this
// check.
func WithURL(url string) Option {
	return func(o *options) { o.url = url }
}

// Verify checks that header and body are a webhook hookwheel signed with one
// of secrets ("whsec_..." strings; during a rotation, give both the new and
// the old secret: any one verifies), within Tolerance of now.
//
// When header carries a Hookwheel-Signature JWT signed by one of the secrets
// (HS256), its claims must match too: issuer "hookwheel", jti the webhook-id,
// body the SHA-256 of body, not expired (with a minute of clock skew), and
// subject the URL given WithURL. The JWT is signed with the tenant's current
// secret, whose signature comes first in webhook-signature: when one of
// secrets made that first signature, the JWT must verify too. Otherwise (a
// rotation the receiver has not been given the new secret of) a JWT none of
// the secrets verifies is passed over and the Standard Webhooks signature
// stands alone, unless WithURL asks for the JWT.
//
// body must be the request body exactly as received, before any parsing.
// Header names are matched in any letter case.
func Verify(secrets []string, header http.Header, body []byte, opts ...Option) error {
	if len(secrets) == 0 {
		return errors.New("webhook: no signing secret to verify with")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
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

	keys := make([][]byte, len(secrets))
	verified := false
	for i, secret := range secrets {
		key, err := decodeSecret(secret)
		if err != nil {
			// The index, never the secret, says which one is wrong.
			return fmt.Errorf("webhook: signing secret %d: %w", i, err)
		}
		keys[i] = key
		if verified {
			continue
		}
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			return fmt.Errorf("webhook: signing secret %d: %w", i, err)
		}
		switch err := wh.Verify(body, h); {
		case err == nil:
			verified = true
		case errors.Is(err, standardwebhooks.ErrMessageTooOld), errors.Is(err, standardwebhooks.ErrMessageTooNew):
			return fmt.Errorf("%w: %w", ErrTimestamp, err)
		case errors.Is(err, standardwebhooks.ErrInvalidHeaders), errors.Is(err, standardwebhooks.ErrRequiredHeaders):
			return fmt.Errorf("%w: %w", ErrMissingHeaders, err)
		case !errors.Is(err, standardwebhooks.ErrNoMatchingSignature):
			return fmt.Errorf("webhook: %w", err)
		}
	}
	if !verified {
		return fmt.Errorf("%w under any of the %d secret(s)", ErrSignature, len(secrets))
	}
	token := h.Get(HeaderJWT)
	switch {
	case token != "":
		// The JWT is signed with the tenant's current secret, whose signature
		// comes first: when one of the receiver's secrets made that one, the
		// JWT must verify too.
		strict := o.url != "" || firstSignatureIsOurs(keys, h, body)
		return verifyToken(keys, token, h.Get(HeaderID), body, strict, o)
	case o.url != "":
		// Without the JWT, nothing binds the request to this URL.
		return fmt.Errorf("%w: no %s header to check the URL with", ErrToken, HeaderJWT)
	}
	return nil
}

// decodeSecret returns the key of a "whsec_<base64>" secret, as Standard
// Webhooks libraries read it.
func decodeSecret(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New(`want "whsec_" followed by base64`)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(key) == 0 {
		return nil, errors.New(`want "whsec_" followed by standard base64`)
	}
	return key, nil
}

// tokenClaims are the claims of the Hookwheel-Signature JWT.
type tokenClaims struct {
	jwt.RegisteredClaims
	// Body is the unpadded base64url SHA-256 of the request body.
	Body string `json:"body"`
}

// verifyToken checks the Hookwheel-Signature JWT under each key in turn: it
// is signed with the tenant's current secret only, which may be any of the
// receiver's during a rotation, or none of them.
func verifyToken(keys [][]byte, token, webhookID string, body []byte, strict bool, o options) error {
	parserOpts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
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
	for _, key := range keys {
		var claims tokenClaims
		_, err := parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return key, nil })
		switch {
		case errors.Is(err, jwt.ErrTokenSignatureInvalid):
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
		return fmt.Errorf("%w: not signed by any of the %d secret(s), although the first signature is; "+
			"the current signing secret signs it", ErrToken, len(keys))
	}
	return nil
}

// firstSignatureIsOurs reports whether the first v1 entry of webhook-signature,
// the tenant's current secret's, was made by one of keys.
func firstSignatureIsOurs(keys [][]byte, h http.Header, body []byte) bool {
	first, _, _ := strings.Cut(h.Get(HeaderSignature), " ")
	sig, ok := strings.CutPrefix(first, "v1,")
	if !ok {
		return false
	}
	want, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(h.Get(HeaderID) + "." + h.Get(HeaderTimestamp) + "."))
		mac.Write(body)
		if hmac.Equal(mac.Sum(nil), want) {
			return true
		}
	}
	return false
}
