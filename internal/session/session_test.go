package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/session"
)

func newManager(t *testing.T, clk clock.Clock, key []byte) *session.Manager {
	t.Helper()
	m, err := session.New(session.Config{Key: key, TTL: time.Hour, MaxAge: 3 * time.Hour, Clock: clk})
	require.NoError(t, err)
	return m
}

func TestOpenAndCheck(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	m := newManager(t, clk, session.RandomKey())
	tenant := uuid.New()

	token, opened, err := m.Open(session.Session{Role: session.RoleTenant, TenantID: tenant, KeyID: "abcdefgh"})
	require.NoError(t, err)
	require.NotEmpty(t, opened.CSRF)
	require.Equal(t, clk.Now().Add(time.Hour), opened.ExpiresAt)

	got, err := m.Check(token)
	require.NoError(t, err)
	require.Equal(t, session.RoleTenant, got.Role)
	require.Equal(t, tenant, got.TenantID)
	require.Equal(t, "abcdefgh", got.KeyID)
	require.True(t, got.CheckCSRF(opened.CSRF))
	require.False(t, got.CheckCSRF(""))
	require.False(t, got.CheckCSRF(opened.CSRF+"x"))

	// Two sessions never share a CSRF token.
	_, other, err := m.Open(session.Session{Role: session.RoleTenant, TenantID: tenant, KeyID: "abcdefgh"})
	require.NoError(t, err)
	require.NotEqual(t, opened.CSRF, other.CSRF)
}

func TestExpiryAndRenewal(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	m := newManager(t, clk, session.RandomKey())
	token, s, err := m.Open(session.Session{Role: session.RoleOperator, AdminDigest: "digest"})
	require.NoError(t, err)

	clk.Advance(59 * time.Minute)
	_, err = m.Check(token)
	require.NoError(t, err)
	renewedToken, renewed, err := m.Renew(s)
	require.NoError(t, err)
	require.Equal(t, s.CSRF, renewed.CSRF, "a renewal keeps the CSRF token of the open pages")

	clk.Advance(2 * time.Minute)
	_, err = m.Check(token)
	require.ErrorIs(t, err, session.ErrInvalid, "the first token expired")
	_, err = m.Check(renewedToken)
	require.NoError(t, err)

	// Renewals stop at MaxAge after signing in.
	clk.Advance(100 * time.Minute) // 2h41m after signing in
	_, last, err := m.Renew(renewed)
	require.NoError(t, err)
	require.Equal(t, s.SignedInAt.Add(3*time.Hour).Truncate(time.Second), last.ExpiresAt)
}

func TestRefusesForgedTokens(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	key := session.RandomKey()
	m := newManager(t, clk, key)
	token, _, err := m.Open(session.Session{Role: session.RoleTenant, TenantID: uuid.New(), KeyID: "abcdefgh"})
	require.NoError(t, err)

	otherKey, _, err := newManager(t, clk, session.RandomKey()).Open(session.Session{Role: session.RoleOperator, AdminDigest: "d"})
	require.NoError(t, err)
	parts := strings.Split(token, ".")
	unsigned := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": "hookwheel-dashboard", "role": "operator", "adm": "d", "csrf": "c", "exp": clk.Now().Add(time.Hour).Unix(), "sia": clk.Now().Unix()})
	none, err := unsigned.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)

	for name, bad := range map[string]string{
		"empty":           "",
		"garbage":         "not a token",
		"another key":     otherKey,
		"alg none":        none,
		"payload swapped": parts[0] + "." + strings.Split(otherKey, ".")[1] + "." + parts[2],
		"signature cut":   parts[0] + "." + parts[1] + ".",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.Check(bad)
			require.ErrorIs(t, err, session.ErrInvalid)
		})
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	_, err := session.New(session.Config{Key: []byte("short")})
	require.Error(t, err)
	require.NotEqual(t, session.RandomKey(), session.RandomKey())

	m := newManager(t, clock.Real(), session.RandomKey())
	other := newManager(t, clock.Real(), session.RandomKey())
	require.Equal(t, m.AdminDigest("a"), m.AdminDigest("a"))
	require.NotEqual(t, m.AdminDigest("a"), m.AdminDigest("b"))
	require.NotEqual(t, m.AdminDigest("a"), other.AdminDigest("a"), "keyed by the session key, not by a constant")
	require.NotContains(t, m.AdminDigest("secret-token"), "secret")
}
