// Package keyring seals the secrets hookwheel keeps in Postgres (tenants'
// webhook signing secrets) under the operator's HOOKWHEEL_ENCRYPTION_KEY, so
// that a copy of the database or of a backup does not hand out the keys that
// sign every tenant's webhooks.
//
// A keyring is one or more 32-byte keys; the first seals, every one opens, so
// rotating the encryption key is: put the new key first and keep the old one
// after it on every node, re-seal what is stored (hookwheel secrets rekey),
// then drop the old key. Sealing is XChaCha20-Poly1305 with a random 192-bit
// nonce, the construction Svix uses for the same purpose: the nonce is large
// enough to be drawn at random for every value, so no counter has to be kept
// across nodes.
package keyring

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// sealedPrefix starts every sealed value; anything else is stored plaintext.
// The version lets the format change without guessing.
const sealedPrefix = "hwenc1:"

// Key is one encryption key of a keyring.
type Key struct {
	// ID names the key in sealed values, so Open tries the right key first.
	ID  string
	key [chacha20poly1305.KeySize]byte
}

// Keyring seals with its first key and opens with any. The zero Keyring (no
// keys) stores plaintext: Seal returns its input and Open accepts only
// plaintext. A Keyring is immutable and safe for concurrent use.
type Keyring struct {
	keys []Key
}

// Parse reads HOOKWHEEL_ENCRYPTION_KEY: either the base64 of 32 bytes, or a
// comma-separated list "id:base64,..." whose first entry seals. An empty
// string is the empty keyring. A bare key's id is derived from the key
// itself, so the same key keeps the same id when it later moves into a list
// under that id (Fingerprint prints it).
func Parse(s string) (*Keyring, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return &Keyring{}, nil
	}
	var k Keyring
	seen := map[string]bool{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		id, b64, named := strings.Cut(entry, ":")
		if !named {
			if strings.Contains(s, ",") {
				return nil, fmt.Errorf("key %d: a keyring of several keys names each one, id:base64", i+1)
			}
			b64, id = entry, ""
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			if raw, err = base64.RawStdEncoding.DecodeString(b64); err != nil {
				return nil, fmt.Errorf("key %d: not base64", i+1)
			}
		}
		if len(raw) != chacha20poly1305.KeySize {
			return nil, fmt.Errorf("key %d: want 32 bytes, got %d (make one with: openssl rand -base64 32)", i+1, len(raw))
		}
		key := Key{ID: id}
		copy(key.key[:], raw)
		if key.ID == "" {
			key.ID = key.Fingerprint()
		}
		if !validID(key.ID) {
			return nil, fmt.Errorf("key %d: id %q: use 1 to 32 letters, digits, '-' or '_'", i+1, key.ID)
		}
		if seen[key.ID] {
			return nil, fmt.Errorf("key %d: id %q is used twice", i+1, key.ID)
		}
		seen[key.ID] = true
		k.keys = append(k.keys, key)
	}
	return &k, nil
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Fingerprint is a short public name of the key: the first 8 hex digits of
// its SHA-256. It identifies the key without revealing it.
func (k Key) Fingerprint() string {
	sum := sha256.Sum256(k.key[:])
	return hex.EncodeToString(sum[:4])
}

// Enabled reports whether the keyring holds a key: whether Seal encrypts.
func (k *Keyring) Enabled() bool { return k != nil && len(k.keys) > 0 }

// SealingKeyID is the id of the key Seal uses, "" when the keyring is empty.
func (k *Keyring) SealingKeyID() string {
	if !k.Enabled() {
		return ""
	}
	return k.keys[0].ID
}

// IsSealed reports whether a stored value is sealed (else it is plaintext).
func IsSealed(stored string) bool { return strings.HasPrefix(stored, sealedPrefix) }

// Seal encrypts plaintext under the first key, bound to context: the same
// context must be given to Open, so a sealed value copied to another row
// (another tenant's) does not open there. With no key, Seal returns the
// plaintext unchanged.
func (k *Keyring) Seal(plaintext, context string) (string, error) {
	if !k.Enabled() {
		return plaintext, nil
	}
	key := k.keys[0]
	aead, err := chacha20poly1305.NewX(key.key[:])
	if err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	buf := make([]byte, chacha20poly1305.NonceSizeX, chacha20poly1305.NonceSizeX+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("seal: nonce: %w", err)
	}
	buf = aead.Seal(buf, buf[:chacha20poly1305.NonceSizeX], []byte(plaintext), []byte(context))
	return sealedPrefix + key.ID + ":" + base64.RawURLEncoding.EncodeToString(buf), nil
}

// ErrNoKey is returned by Open for a sealed value that no key of the
// keyring opens: the keyring lacks the key that sealed it, or the value was
// altered or moved to another row.
var ErrNoKey = errors.New("no key of HOOKWHEEL_ENCRYPTION_KEY opens this value")

// Open returns the plaintext of a stored value: a plaintext value as it is, a
// sealed one decrypted with the key its id names, or failing that any key of
// the keyring (a key may have been renamed).
func (k *Keyring) Open(stored, context string) (string, error) {
	rest, sealed := strings.CutPrefix(stored, sealedPrefix)
	if !sealed {
		return stored, nil
	}
	id, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return "", errors.New("open: malformed sealed value")
	}
	raw, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+chacha20poly1305.Overhead {
		return "", errors.New("open: malformed sealed value")
	}
	if k == nil {
		return "", fmt.Errorf("open value sealed by key %q: %w", id, ErrNoKey)
	}
	nonce, ciphertext := raw[:chacha20poly1305.NonceSizeX], raw[chacha20poly1305.NonceSizeX:]
	try := func(key Key) (string, bool) {
		aead, err := chacha20poly1305.NewX(key.key[:])
		if err != nil {
			return "", false
		}
		plain, err := aead.Open(nil, nonce, ciphertext, []byte(context))
		return string(plain), err == nil
	}
	for _, key := range k.keys {
		if key.ID == id {
			if plain, ok := try(key); ok {
				return plain, nil
			}
		}
	}
	for _, key := range k.keys {
		if key.ID != id {
			if plain, ok := try(key); ok {
				return plain, nil
			}
		}
	}
	return "", fmt.Errorf("open value sealed by key %q: %w", id, ErrNoKey)
}

// NeedsRekey reports whether a stored value is not sealed by the first key:
// plaintext while the keyring has a key, or sealed by another key. With no
// key there is nothing to seal with, and nothing needs rekeying.
func (k *Keyring) NeedsRekey(stored string) bool {
	if !k.Enabled() {
		return false
	}
	rest, sealed := strings.CutPrefix(stored, sealedPrefix)
	if !sealed {
		return true
	}
	id, _, _ := strings.Cut(rest, ":")
	return id != k.keys[0].ID
}
