package api_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

var apiKeyPattern = regexp.MustCompile(`^hw_([a-z2-7]+)_([a-z2-7]+)$`)

func requireUnauthorized(t *testing.T, resp response) {
	t.Helper()
	p := requireProblem(t, resp, http.StatusUnauthorized)
	require.Equal(t, problemTypePrefix+"unauthorized", p.Type)
	require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer"),
		"WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
}

func TestTenantAuthentication(t *testing.T) {
	t.Parallel()
	// Every case fails from one address: room for all of them
	// (TestAuthFailureThrottle tests the throttle).
	h := newHarness(t, func(c *api.Config) { c.AuthFailures.Max = 1000 })
	acme := h.createTenant("acme")
	other := h.createTenant("other")

	m := apiKeyPattern.FindStringSubmatch(acme.APIKey)
	require.NotNil(t, m, "api key %q", acme.APIKey)
	keyID, secret := m[1], m[2]
	otherSecret := apiKeyPattern.FindStringSubmatch(other.APIKey)[2]

	// A well-formed key of another tenant, about to be revoked.
	revoked := h.createTenant("revoked")
	revokedKeyID, ok := tenants.KeyID(revoked.APIKey)
	require.True(t, ok)
	// It works before it is revoked, so the 401 below is the revocation's doing.
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/tasks", revoked.APIKey, nil, nil).Status)
	_, err := h.Tenants.RevokeKey(context.Background(), revoked.ID, revokedKeyID, nil, model.ActorOperator)
	require.NoError(t, err)

	cases := []struct {
		name          string
		authorization string // "" sends no header
	}{
		{"no header", ""},
		{"basic scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+acme.APIKey))},
		{"scheme only", "Bearer"},
		{"empty token", "Bearer   "},
		{"raw key without scheme", acme.APIKey},
		{"not a key", "Bearer not-a-key"},
		{"prefix only", "Bearer hw_"},
		{"no secret", "Bearer hw_" + keyID},
		{"empty secret", "Bearer hw_" + keyID + "_"},
		{"empty key id", "Bearer hw__" + secret},
		{"wrong prefix", "Bearer hx_" + keyID + "_" + secret},
		{"unknown key id", "Bearer hw_aaaaaaaaaaaaa_" + secret},
		{"wrong secret", "Bearer hw_" + keyID + "_" + otherSecret},
		{"secret with a byte changed", "Bearer hw_" + keyID + "_" + flipLast(secret)},
		{"admin token", "Bearer " + adminToken},
		{"revoked key", "Bearer " + revoked.APIKey},
		{"key id not valid UTF-8", "Bearer hw_\xff\xfe_abc"},
	}
	routes := []struct{ method, path string }{
		{http.MethodGet, "/v1/tasks"},
		{http.MethodPost, "/v1/tasks"},
		{http.MethodGet, "/v1/tasks/" + uuid.NewString()},
		{http.MethodDelete, "/v1/tasks/" + uuid.NewString()},
		{http.MethodGet, "/v1/tasks/" + uuid.NewString() + "/attempts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, r := range routes {
				headers := map[string]string{}
				if tc.authorization != "" {
					headers["Authorization"] = tc.authorization
				}
				var body io.Reader
				if r.method == http.MethodPost {
					body = strings.NewReader(`{"url": "https://example.com/hook"}`)
				}
				requireUnauthorized(t, h.do(r.method, r.path, "", body, headers))
			}
		})
	}

	// Nothing above created a task, and the valid keys still work.
	for _, tn := range []tenant{acme, other} {
		list, err := tn.Client.ListTasksWithResponse(context.Background(), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, list.StatusCode())
		require.Empty(t, list.JSON200.Data)
	}
	// The bearer scheme is case-insensitive (RFC 9110 §11.1).
	resp := h.do(http.MethodGet, "/v1/tasks", "", nil, map[string]string{"Authorization": "bearer " + acme.APIKey})
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
}

func flipLast(s string) string {
	last := s[len(s)-1]
	repl := byte('a')
	if last == 'a' {
		repl = 'b'
	}
	return s[:len(s)-1] + string(repl)
}

func TestRevokeAffectsOnlyThatKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.createTenant("a")
	b := h.createTenant("b")
	keyID, ok := tenants.KeyID(a.APIKey)
	require.True(t, ok)

	// Another tenant cannot revoke a's key.
	_, err := h.Tenants.RevokeKey(context.Background(), b.ID, keyID, nil, model.ActorOperator)
	require.ErrorIs(t, err, model.ErrNotFound)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/tasks", a.APIKey, nil, nil).Status)

	_, err = h.Tenants.RevokeKey(context.Background(), a.ID, keyID, nil, model.ActorOperator)
	require.NoError(t, err)
	requireUnauthorized(t, h.do(http.MethodGet, "/v1/tasks", a.APIKey, nil, nil))
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/tasks", b.APIKey, nil, nil).Status)
}

func TestAdminAuthentication(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	disabled := newHarness(t, func(c *api.Config) { c.AdminToken = "" })

	cases := []struct {
		name          string
		h             *harness
		authorization string
		want          int
	}{
		{"no header", h, "", http.StatusUnauthorized},
		{"wrong token", h, "Bearer admin-secreT", http.StatusUnauthorized},
		{"token prefix", h, "Bearer admin-secre", http.StatusUnauthorized},
		{"token with suffix", h, "Bearer admin-secret2", http.StatusUnauthorized},
		{"basic scheme", h, "Basic " + adminToken, http.StatusUnauthorized},
		{"tenant key", h, "Bearer " + tn.APIKey, http.StatusUnauthorized},
		{"disabled, no header", disabled, "", http.StatusForbidden},
		{"disabled, a token", disabled, "Bearer " + adminToken, http.StatusForbidden},
		{"disabled, empty token", disabled, "Bearer ", http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			headers := map[string]string{}
			if tc.authorization != "" {
				headers["Authorization"] = tc.authorization
			}
			resp := tc.h.do(http.MethodPost, "/v1/admin/tenants", "", strings.NewReader(`{"name": "mallory"}`), headers)
			if tc.want == http.StatusUnauthorized {
				requireUnauthorized(t, resp)
				return
			}
			p := requireProblem(t, resp, tc.want)
			require.Equal(t, problemTypePrefix+"forbidden", p.Type)
		})
	}
}

func TestCreateTenant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.client(adminToken)
	ctx := context.Background()

	resp, err := admin.CreateTenantWithResponse(ctx, openapi.TenantCreateRequest{Name: "acme"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	require.True(t, strings.HasPrefix(resp.HTTPResponse.Header.Get("Content-Type"), "application/json"))
	for _, key := range []string{"id", "name", "api_key", "signing_secret", "created_at"} {
		require.Contains(t, rawKeys(t, resp.Body), key)
	}
	created := resp.JSON201
	require.NotEqual(t, uuid.Nil, created.ID)
	require.Equal(t, "acme", created.Name)
	require.False(t, created.CreatedAt.IsZero())

	m := apiKeyPattern.FindStringSubmatch(created.APIKey)
	require.NotNil(t, m, "api key %q is not hw_<id>_<secret>", created.APIKey)
	require.GreaterOrEqual(t, len(m[2]), 26, "the secret holds at least 128 bits")

	secret, ok := strings.CutPrefix(created.SigningSecret, "whsec_")
	require.True(t, ok, "signing secret %q", created.SigningSecret)
	raw, err := base64.StdEncoding.DecodeString(secret)
	require.NoError(t, err)
	require.Len(t, raw, 32)

	// The key works, for that tenant.
	list, err := h.client(created.APIKey).ListTasksWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode())

	// Every tenant gets credentials of its own.
	second, err := admin.CreateTenantWithResponse(ctx, openapi.TenantCreateRequest{Name: "acme"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, second.StatusCode())
	require.NotEqual(t, created.ID, second.JSON201.ID)
	require.NotEqual(t, created.APIKey, second.JSON201.APIKey)
	require.NotEqual(t, created.SigningSecret, second.JSON201.SigningSecret)

	// The name limit counts characters, not bytes.
	long, err := admin.CreateTenantWithResponse(ctx, openapi.TenantCreateRequest{Name: strings.Repeat("é", 200)})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, long.StatusCode(), "body: %s", long.Body)
}

func TestCreateTenantInvalid(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cases := []struct {
		name  string
		body  string
		want  int
		field string
	}{
		{"empty name", `{"name": ""}`, http.StatusUnprocessableEntity, "name"},
		{"missing name", `{}`, http.StatusUnprocessableEntity, "name"},
		{"name too long", `{"name": "` + strings.Repeat("a", 201) + `"}`, http.StatusUnprocessableEntity, "name"},
		{"name not a string", `{"name": 42}`, http.StatusUnprocessableEntity, "name"},
		{"name with NUL", `{"name": "a\u0000b"}`, http.StatusUnprocessableEntity, "name"},
		{"unknown field", `{"name": "a", "nmae": "b"}`, http.StatusUnprocessableEntity, "nmae"},
		{"malformed JSON", `{"name": `, http.StatusBadRequest, ""},
		{"empty body", ``, http.StatusBadRequest, ""},
		{"not an object", `["acme"]`, http.StatusBadRequest, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.do(http.MethodPost, "/v1/admin/tenants", adminToken, strings.NewReader(tc.body), nil)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				return
			}
			requireProblem(t, resp, tc.want)
		})
	}
}

// TestAuthFailureThrottle: a client address that presents Max invalid keys
// within the window is refused with 429 and Retry-After for the rest of
// it, before any key is looked up, even with a valid key; other addresses
// are not; the window over, it is let through again. Failures are counted
// by reason.
func TestAuthFailureThrottle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) {
		c.AuthFailures = api.AuthFailureLimit{Max: 3, Window: 10 * time.Second}
		// The harness's client connects from loopback, standing for a proxy
		// that names the client.
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	acme := h.createTenant("acme")
	from := func(ip, key string) response {
		return h.do(http.MethodGet, "/v1/limits", key, nil, map[string]string{"X-Forwarded-For": ip})
	}
	bad := "hw_aaaaaaaaaaaaa_" + strings.Repeat("b", 32)

	for range 3 {
		requireProblem(t, from("203.0.113.5", bad), http.StatusUnauthorized)
	}
	resp := from("203.0.113.5", acme.APIKey)
	p := requireProblem(t, resp, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"too-many-auth-failures", p.Type)
	require.Equal(t, "10", resp.Header.Get("Retry-After"))
	require.Equal(t, http.StatusOK, from("203.0.113.6", acme.APIKey).Status, "another address is not held back")

	h.Clock.Advance(4 * time.Second)
	require.Equal(t, "6", from("203.0.113.5", bad).Header.Get("Retry-After"))
	h.Clock.Advance(6 * time.Second)
	require.Equal(t, http.StatusOK, from("203.0.113.5", acme.APIKey).Status, "the window over, it is let through")
	requireProblem(t, from("203.0.113.5", ""), http.StatusUnauthorized)

	metrics := string(h.do(http.MethodGet, "/metrics", "", nil, nil).Body)
	require.Contains(t, metrics, `hookwheel_api_auth_failures_total{reason="invalid"} 3`)
	require.Contains(t, metrics, `hookwheel_api_auth_failures_total{reason="throttled"} 2`)
	require.Contains(t, metrics, `hookwheel_api_auth_failures_total{reason="missing"} 1`)
}
