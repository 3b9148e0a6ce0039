package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/internal/keyring"
)

// TestNodesShareDashboardSessions: with nothing configured, a session opened
// on one node is accepted by another of the same installation, since the
// session key is made once and kept in Postgres, sealed when an encryption
// key is set.
func TestNodesShareDashboardSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ring, err := keyring.Parse("k1:" + strings.Repeat("A", 43) + "=")
	require.NoError(t, err)
	first := e.startNode(func(c *app.Config) { c.Keyring = ring })
	second := e.startNode(func(c *app.Config) { c.Keyring = ring })
	tn := e.createTenant(first, "acme")

	res, err := http.Post(first.base+"/v1/session", "application/json", strings.NewReader(`{"api_key":"`+tn.apiKey+`"}`))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var s struct {
		CSRF string `json:"csrf_token"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&s))
	cookies := res.Cookies()
	require.Len(t, cookies, 1)

	req, err := http.NewRequest(http.MethodGet, second.base+"/v1/tasks", nil)
	require.NoError(t, err)
	req.AddCookie(cookies[0])
	req.Header.Set("X-CSRF-Token", s.CSRF)
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got.Body.Close()
	require.Equal(t, http.StatusOK, got.StatusCode, "the other node accepts the session")

	conn, err := pgx.Connect(t.Context(), e.databaseURL)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var stored string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT value FROM shared_secrets WHERE name = 'dashboard-session-key'`).Scan(&stored))
	require.True(t, keyring.IsSealed(stored), "sealed at rest: %.12s…", stored)
}
