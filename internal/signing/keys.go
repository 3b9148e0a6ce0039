package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Algorithm is how a signing key signs: the Standard Webhooks signature
// version it writes in webhook-signature and the alg of the
// Hookwheel-Signature JWT it signs as the current key.
type Algorithm string

const (
	// HMACSHA256 keys are "whsec_" secrets shared with receivers: "v1,"
	// signatures and HS256 JWTs.
	HMACSHA256 Algorithm = "hmac-sha256"
	// Ed25519 keys are key pairs: the private half ("whsk_") never leaves
	// the server, receivers verify "v1a," signatures and EdDSA JWTs with the
	// public half ("whpk_"), which cannot forge a webhook.
	Ed25519 Algorithm = "ed25519"
)

// Valid reports whether a is HMACSHA256 or Ed25519.
func (a Algorithm) Valid() bool { return a == HMACSHA256 || a == Ed25519 }

const (
	// PrivateKeyPrefix starts the stored form of an Ed25519 private key:
	// the standard base64 of its 64 bytes, the seed then the public key, as
	// crypto/ed25519 lays them out. It is the prefix Standard Webhooks gives
	// secret keys; hookwheel never shows one.
	PrivateKeyPrefix = "whsk_"
	// PublicKeyPrefix starts an Ed25519 public key as receivers are given
	// it: the standard base64 of its 32 bytes.
	PublicKeyPrefix = "whpk_"
)

// NewKeyPair returns a new Ed25519 key pair: the private key in its stored
// form ("whsk_...") and the public key receivers verify with ("whpk_...").
func NewKeyPair() (private, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate Ed25519 key pair: %w", err)
	}
	return PrivateKeyPrefix + base64.StdEncoding.EncodeToString(priv),
		PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub), nil
}

// Key is one signing key, decoded once so that signing does not decode it
// again for every webhook: an HMAC-SHA256 secret or an Ed25519 private key.
// It holds its bytes by value, so a slice of keys is one allocation. The zero
// Key signs nothing; ParseKey makes Keys.
type Key struct {
	algorithm Algorithm
	// size is how many bytes of material the key uses: the HMAC secret's
	// length, or ed25519.PrivateKeySize.
	size     uint8
	material [max(signingSecretMaxBytes, ed25519.PrivateKeySize)]byte
}

// ParseKey decodes a signing key in its stored form: a "whsec_" secret (see
// ParseSigningSecret) or a "whsk_" Ed25519 private key. Its errors never
// include the key.
func ParseKey(s string) (Key, error) {
	var k Key
	var buf [signingSecretBufLen]byte
	switch {
	case strings.HasPrefix(s, SecretPrefix):
		secret, err := decodeSigningSecret(buf[:], s)
		if err != nil {
			return Key{}, err
		}
		k.algorithm, k.size = HMACSHA256, uint8(len(secret))
		copy(k.material[:], secret)
	case strings.HasPrefix(s, PrivateKeyPrefix):
		encoded := s[len(PrivateKeyPrefix):]
		// Checked before decoding so that an oversized value cannot overrun buf.
		if base64.StdEncoding.DecodedLen(len(encoded)) > len(buf) {
			return Key{}, fmt.Errorf("invalid Ed25519 private key: longer than %d bytes", ed25519.PrivateKeySize)
		}
		n, err := base64.StdEncoding.Decode(buf[:], []byte(encoded))
		if err != nil {
			return Key{}, fmt.Errorf("invalid Ed25519 private key: not standard base64 after %q", PrivateKeyPrefix)
		}
		if n != ed25519.PrivateKeySize {
			return Key{}, fmt.Errorf("invalid Ed25519 private key: decodes to %d bytes, want %d", n, ed25519.PrivateKeySize)
		}
		k.algorithm, k.size = Ed25519, ed25519.PrivateKeySize
		copy(k.material[:], buf[:n])
	default:
		return Key{}, fmt.Errorf("invalid signing key: must start with %q or %q", SecretPrefix, PrivateKeyPrefix)
	}
	return k, nil
}

// Algorithm is how k signs; "" for the zero Key.
func (k *Key) Algorithm() Algorithm { return k.algorithm }

// PublicKey is the "whpk_" public key of an Ed25519 key, "" for an HMAC one.
func (k *Key) PublicKey() string {
	if k.algorithm != Ed25519 {
		return ""
	}
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(k.privateKey().Public().(ed25519.PublicKey))
}

func (k *Key) secret() []byte { return k.material[:k.size] }

// privateKey is the Ed25519 key as crypto/ed25519 takes it. Its public half
// is the one stored beside the seed, sealed with it (see internal/keyring),
// so that signing does not derive it again per webhook. It is never the
// tenant's listed public key, stored unsealed: signing one message under
// two public keys with the same seed would reveal the private key.
func (k *Key) privateKey() ed25519.PrivateKey { return k.material[:ed25519.PrivateKeySize] }

// ParsePublicKey decodes a "whpk_" Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	encoded, ok := strings.CutPrefix(s, PublicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("invalid public key: must start with %q", PublicKeyPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("invalid public key: not standard base64 after %q", PublicKeyPrefix)
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("invalid public key: decodes to %d bytes, want %d", len(key), ed25519.PublicKeySize)
	}
	return key, nil
}

// errZeroKey is Sign's refusal of a Key that ParseKey did not make.
var errZeroKey = errors.New("not a parsed key")
