// Package session issues and checks the dashboard's sign-in sessions: a
// short-lived JWT (HS256, golang-jwt) held in an HttpOnly, SameSite=Strict
// cookie, so that the API key or admin token a person signs in with is sent
// once and never kept by the browser.
//
// A session names who signed in (a tenant's key by its id, or the operator)
// and carries a random CSRF token. The API admits a call made with the
// cookie only when it also carries that token in the X-CSRF-Token header:
// a page of another origin can make a browser send the cookie (SameSite
// aside), but cannot read the token nor set a custom header without CORS,
// which the API never grants.
//
// The key is not looked up here: the API re-checks the key a tenant session
// names on every call (revoked or expired keys end their sessions), and an
// operator session carries a digest of the admin token it was opened with,
// so that changing the token ends every operator session.
package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
)

const (
	// CookieName is the cookie that holds the session token.
	CookieName = "hookwheel_session"
	// CSRFHeader carries the session's CSRF token on every call made with
	// the cookie.
	CSRFHeader = "X-CSRF-Token"
	// KeyBytes is the length of a session key.
	KeyBytes = 32
)

// Role is who a session speaks for.
type Role string

const (
	RoleTenant   Role = "tenant"
	RoleOperator Role = "operator"
)

// ErrInvalid is any session token that does not admit its bearer: absent,
// malformed, forged, expired or past its absolute age.
var ErrInvalid = errors.New("invalid or expired session")

// Session is a signed-in person.
type Session struct {
	Role Role
	// TenantID and KeyID name the API key a tenant signed in with.
	TenantID uuid.UUID
	KeyID    string
	// AdminDigest is Manager.AdminDigest of the admin token an operator
	// signed in with.
	AdminDigest string
	// CSRF is the token every cookie-authenticated call must echo in
	// CSRFHeader.
	CSRF string
	// SignedInAt is when the credential was presented; renewals keep it, and
	// no renewal reaches past SignedInAt + MaxAge.
	SignedInAt time.Time
	// ExpiresAt is when this token stops admitting calls.
	ExpiresAt time.Time
}

// Config configures a Manager. Zero fields take the documented defaults.
type Config struct {
	// Key signs and checks tokens: KeyBytes random bytes, never derived
	// from a credential (a tenant can read its own session token and would
	// test guesses of that credential against it). Required. Every node
	// behind one address must share it, or a session opened on one is
	// refused by the others.
	Key []byte
	// TTL is how long a token admits calls once issued or renewed. Default
	// 1h.
	TTL time.Duration
	// MaxAge bounds renewals: a person signs in again this long after they
	// last did. Default 12h.
	MaxAge time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Manager issues and checks session tokens.
type Manager struct {
	cfg Config
}

// New checks cfg and builds a Manager.
func New(cfg Config) (*Manager, error) {
	if len(cfg.Key) < KeyBytes {
		return nil, fmt.Errorf("session key: want at least %d bytes, got %d", KeyBytes, len(cfg.Key))
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 12 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Manager{cfg: cfg}, nil
}

// RandomKey makes a session key of this process alone.
func RandomKey() []byte {
	k := make([]byte, KeyBytes)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Sprintf("session: read random key: %v", err)) // crypto/rand never fails on Linux
	}
	return k
}

// AdminDigest is what an operator session remembers of the admin token:
// an HMAC under the session key, so that the token itself is not in the
// cookie, and the cookie, which its holder can read, offers nothing to test
// guesses of the token against without the key.
func (m *Manager) AdminDigest(token string) string {
	mac := hmac.New(sha256.New, m.cfg.Key)
	mac.Write([]byte("admin token\x00"))
	mac.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// claims is the token's payload. Registered claims carry the times; the
// rest are ours, short because the cookie travels with every call.
type claims struct {
	jwt.RegisteredClaims
	Role        Role   `json:"role"`
	KeyID       string `json:"kid,omitempty"`
	AdminDigest string `json:"adm,omitempty"`
	CSRF        string `json:"csrf"`
	SignedInAt  int64  `json:"sia"`
}

const issuer = "hookwheel-dashboard"

// Open starts a session for who signed in now, with a fresh CSRF token.
func (m *Manager) Open(s Session) (token string, opened Session, err error) {
	csrf := make([]byte, 24)
	if _, err := rand.Read(csrf); err != nil {
		return "", Session{}, fmt.Errorf("session csrf token: %w", err)
	}
	s.CSRF = base64.RawURLEncoding.EncodeToString(csrf)
	s.SignedInAt = m.cfg.Clock.Now()
	return m.issue(s)
}

// Renew reissues a session for another TTL, up to its MaxAge, keeping its
// CSRF token so that pages already open keep working.
func (m *Manager) Renew(s Session) (string, Session, error) { return m.issue(s) }

func (m *Manager) issue(s Session) (string, Session, error) {
	now := m.cfg.Clock.Now()
	s.ExpiresAt = now.Add(m.cfg.TTL)
	if last := s.SignedInAt.Add(m.cfg.MaxAge); s.ExpiresAt.After(last) {
		s.ExpiresAt = last
	}
	// Whole seconds, as JWT times are: the session must not claim to last
	// longer than its token does.
	s.ExpiresAt = s.ExpiresAt.Truncate(time.Second)
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(s.ExpiresAt),
		},
		Role:        s.Role,
		KeyID:       s.KeyID,
		AdminDigest: s.AdminDigest,
		CSRF:        s.CSRF,
		SignedInAt:  s.SignedInAt.Unix(),
	}
	if s.Role == RoleTenant {
		c.Subject = s.TenantID.String()
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(m.cfg.Key)
	if err != nil {
		return "", Session{}, fmt.Errorf("sign session: %w", err)
	}
	return token, s, nil
}

// Check returns the session a token holds, or ErrInvalid.
func (m *Manager) Check(token string) (*Session, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return m.cfg.Key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(m.cfg.Clock.Now),
	)
	if err != nil {
		return nil, ErrInvalid
	}
	s := &Session{
		Role:        c.Role,
		KeyID:       c.KeyID,
		AdminDigest: c.AdminDigest,
		CSRF:        c.CSRF,
		SignedInAt:  time.Unix(c.SignedInAt, 0),
		ExpiresAt:   c.ExpiresAt.Time,
	}
	switch c.Role {
	case RoleTenant:
		if s.TenantID, err = uuid.Parse(c.Subject); err != nil || s.KeyID == "" {
			return nil, ErrInvalid
		}
	case RoleOperator:
		if s.AdminDigest == "" {
			return nil, ErrInvalid
		}
	default:
		return nil, ErrInvalid
	}
	if s.CSRF == "" || m.cfg.Clock.Now().After(s.SignedInAt.Add(m.cfg.MaxAge)) {
		return nil, ErrInvalid
	}
	return s, nil
}

// CheckCSRF reports whether got is the session's CSRF token, in constant
// time.
func (s *Session) CheckCSRF(got string) bool {
	return got != "" && hmac.Equal([]byte(got), []byte(s.CSRF))
}

// Cookie is the cookie that holds a session's token until it expires.
// secure marks it Secure: the dashboard was reached over TLS.
func (m *Manager) Cookie(token string, s Session, secure bool) *http.Cookie {
	return &http.Cookie{
		Name:     CookieName,
		Value:    token,
		Path:     "/",
		Expires:  s.ExpiresAt,
		MaxAge:   max(1, int(s.ExpiresAt.Sub(m.cfg.Clock.Now()).Seconds())),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteStrictMode,
	}
}

// ClearCookie deletes the session cookie.
func ClearCookie(secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}
