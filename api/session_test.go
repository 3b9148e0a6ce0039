package api_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/openapi"
)

// signedIn is a browser's view of a session: its cookie and CSRF token.
type signedIn struct {
	cookie *http.Cookie
	csrf   string
	body   openapi.Session
}

func (h *harness) signIn(body string) (signedIn, response) {
	h.t.Helper()
	resp := h.do(http.MethodPost, "/v1/session", "", strings.NewReader(body), nil)
	if resp.Status != http.StatusOK {
		return signedIn{}, resp
	}
	var s signedIn
	require.NoError(h.t, json.Unmarshal(resp.Body, &s.body))
	s.csrf = s.body.CsrfToken
	for _, c := range (&http.Response{Header: resp.Header}).Cookies() {
		if c.Name == session.CookieName {
			s.cookie = c
		}
	}
	require.NotNil(h.t, s.cookie, "no session cookie in %v", resp.Header)
	return s, resp
}

// as sends a request with the session's cookie, and its CSRF token when
// csrf is true.
func (h *harness) as(s signedIn, csrf bool, method, path, body string) response {
	h.t.Helper()
	headers := map[string]string{"Cookie": session.CookieName + "=" + s.cookie.Value}
	if csrf {
		headers[session.CSRFHeader] = s.csrf
	}
	var r *strings.Reader
	if body != "" {
		r = strings.NewReader(body)
		return h.do(method, path, "", r, headers)
	}
	return h.do(method, path, "", nil, headers)
}

func TestSignInWithAnAPIKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	task := h.createTask(tn, `{"url":"https://example.com/hook","delay":"1h"}`)

	s, _ := h.signIn(`{"api_key":"` + tn.APIKey + `"}`)
	require.True(t, s.cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, s.cookie.SameSite)
	require.Equal(t, "/", s.cookie.Path)
	require.False(t, s.cookie.Secure, "plain HTTP")
	require.NotContains(t, s.cookie.Value, strings.Split(tn.APIKey, "_")[2], "the key's secret is not in the cookie")
	require.Equal(t, openapi.SessionRole("tenant"), s.body.Role)
	require.Equal(t, tn.ID, s.body.Tenant.ID)
	require.Equal(t, "acme", s.body.Tenant.Name)
	require.NotEmpty(t, s.csrf)
	require.Equal(t, h.Clock.Now().Add(time.Hour), s.body.ExpiresAt)

	got := h.as(s, true, http.MethodGet, "/v1/tasks/"+task.ID.String(), "")
	require.Equal(t, http.StatusOK, got.Status, string(got.Body))

	// Without the CSRF token, or with a wrong one, nothing is read or changed.
	for _, headers := range []map[string]string{{}, {session.CSRFHeader: "wrong"}} {
		headers["Cookie"] = session.CookieName + "=" + s.cookie.Value
		resp := h.do(http.MethodDelete, "/v1/tasks/"+task.ID.String(), "", nil, headers)
		require.Equal(t, "csrf-token-mismatch", requireProblem(t, resp, http.StatusForbidden).slug())
	}
	still := h.do(http.MethodGet, "/v1/tasks/"+task.ID.String(), tn.APIKey, nil, nil)
	require.Contains(t, string(still.Body), `"status":"scheduled"`)

	// The session has the key's scopes and the tenant's data only.
	other := h.createTenant("globex")
	theirs := h.createTask(other, `{"url":"https://example.com/hook","delay":"1h"}`)
	requireProblem(t, h.as(s, true, http.MethodGet, "/v1/tasks/"+theirs.ID.String(), ""), http.StatusNotFound)
	requireProblem(t, h.as(s, true, http.MethodGet, "/v1/admin/tenants", ""), http.StatusUnauthorized)

	canceled := h.as(s, true, http.MethodDelete, "/v1/tasks/"+task.ID.String(), "")
	require.Equal(t, http.StatusOK, canceled.Status, string(canceled.Body))
}

func TestSessionOfAScopedKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	created := h.do(http.MethodPost, "/v1/keys", tn.APIKey, strings.NewReader(`{"name":"reader","scopes":["tasks:read"]}`), nil)
	require.Equal(t, http.StatusCreated, created.Status, string(created.Body))
	var key openapi.APIKeyCreated
	require.NoError(t, json.Unmarshal(created.Body, &key))

	s, _ := h.signIn(`{"api_key":"` + key.APIKey + `"}`)
	require.Equal(t, []openapi.Scope{"tasks:read"}, s.body.Key.Scopes)
	require.Equal(t, http.StatusOK, h.as(s, true, http.MethodGet, "/v1/tasks", "").Status)
	resp := h.as(s, true, http.MethodPost, "/v1/tasks", `{"url":"https://example.com/hook"}`)
	require.Equal(t, "insufficient-scope", requireProblem(t, resp, http.StatusForbidden).slug())

	// Revoking the key ends its sessions.
	revoked := h.do(http.MethodDelete, "/v1/keys/"+key.ID, tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, revoked.Status, string(revoked.Body))
	requireProblem(t, h.as(s, true, http.MethodGet, "/v1/tasks", ""), http.StatusUnauthorized)
	requireProblem(t, h.as(s, false, http.MethodGet, "/v1/session", ""), http.StatusUnauthorized)
}

func TestOperatorSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")

	s, _ := h.signIn(`{"admin_token":"` + adminToken + `"}`)
	require.Equal(t, openapi.SessionRole("operator"), s.body.Role)
	require.Nil(t, s.body.Tenant)
	got := h.as(s, true, http.MethodGet, "/v1/admin/tenants/"+tn.ID.String(), "")
	require.Equal(t, http.StatusOK, got.Status, string(got.Body))
	requireProblem(t, h.as(s, false, http.MethodGet, "/v1/admin/tenants/"+tn.ID.String(), ""), http.StatusForbidden)
	// The operator's session is not a tenant's.
	requireProblem(t, h.as(s, true, http.MethodGet, "/v1/tasks", ""), http.StatusForbidden)

	resp := h.do(http.MethodPost, "/v1/session", "", strings.NewReader(`{"admin_token":"wrong"}`), nil)
	requireProblem(t, resp, http.StatusUnauthorized)
}

func TestOperatorSessionsEndWithTheToken(t *testing.T) {
	t.Parallel()
	key := session.RandomKey()
	first := newHarness(t, func(c *api.Config) { c.Sessions = mustSessions(t, key) })
	s, _ := first.signIn(`{"admin_token":"` + adminToken + `"}`)
	// Another node with the same session key but a new admin token.
	second := newHarness(t, func(c *api.Config) {
		c.Sessions = mustSessions(t, key)
		c.AdminToken = "a-new-token"
	})
	requireProblem(t, second.as(s, true, http.MethodGet, "/v1/admin/breakers", ""), http.StatusUnauthorized)
	requireProblem(t, second.as(s, false, http.MethodGet, "/v1/session", ""), http.StatusUnauthorized)
}

func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	cases := []struct {
		name   string
		body   string
		header map[string]string
		status int
		slug   string
	}{
		{"neither credential", `{}`, nil, http.StatusUnprocessableEntity, "validation"},
		{"both credentials", `{"api_key":"` + tn.APIKey + `","admin_token":"` + adminToken + `"}`, nil, http.StatusUnprocessableEntity, "validation"},
		{"unknown field", `{"api_key":"` + tn.APIKey + `","remember":true}`, nil, http.StatusUnprocessableEntity, "validation"},
		{"not json", `api_key=x`, nil, http.StatusBadRequest, "malformed-json"},
		{"a form's content type", `{"api_key":"` + tn.APIKey + `"}`, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"wrong key", `{"api_key":"hw_aaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}`, nil, http.StatusUnauthorized, "unauthorized"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := h.do(http.MethodPost, "/v1/session", "", strings.NewReader(c.body), c.header)
			p := requireProblem(t, resp, c.status)
			require.Equal(t, c.slug, p.slug())
			require.Empty(t, resp.Header.Values("Set-Cookie"))
		})
	}
}

func TestFailedSignInsAreThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	for range 20 {
		requireProblem(t, h.do(http.MethodPost, "/v1/session", "", strings.NewReader(`{"admin_token":"guess"}`), nil), http.StatusUnauthorized)
	}
	resp := h.do(http.MethodPost, "/v1/session", "", strings.NewReader(`{"api_key":"`+tn.APIKey+`"}`), nil)
	require.Equal(t, "too-many-auth-failures", requireProblem(t, resp, http.StatusTooManyRequests).slug())
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}

func TestSessionRenewalAndExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	s, _ := h.signIn(`{"api_key":"` + tn.APIKey + `"}`)

	h.Clock.Advance(50 * time.Minute)
	renewedResp := h.as(s, false, http.MethodGet, "/v1/session", "")
	require.Equal(t, http.StatusOK, renewedResp.Status, string(renewedResp.Body))
	var renewed openapi.Session
	require.NoError(t, json.Unmarshal(renewedResp.Body, &renewed))
	require.Equal(t, s.csrf, renewed.CsrfToken)
	require.Equal(t, h.Clock.Now().Add(time.Hour), renewed.ExpiresAt)
	cookies := (&http.Response{Header: renewedResp.Header}).Cookies()
	require.Len(t, cookies, 1)

	h.Clock.Advance(11 * time.Minute)
	requireProblem(t, h.as(s, true, http.MethodGet, "/v1/tasks", ""), http.StatusUnauthorized)
	s.cookie = cookies[0]
	require.Equal(t, http.StatusOK, h.as(s, true, http.MethodGet, "/v1/tasks", "").Status)
}

func TestSignOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	s, _ := h.signIn(`{"api_key":"` + tn.APIKey + `"}`)

	requireProblem(t, h.as(s, false, http.MethodDelete, "/v1/session", ""), http.StatusForbidden)
	out := h.as(s, true, http.MethodDelete, "/v1/session", "")
	require.Equal(t, http.StatusNoContent, out.Status)
	cookies := (&http.Response{Header: out.Header}).Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, session.CookieName, cookies[0].Name)
	require.Less(t, cookies[0].MaxAge, 0, "the cookie is deleted")

	// Without a session there is nothing to protect: the cookie is deleted.
	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, "/v1/session", "", nil, nil).Status)
	requireProblem(t, h.do(http.MethodGet, "/v1/session", "", nil, nil), http.StatusUnauthorized)
}

func TestBearerKeyTakesPrecedenceOverTheCookie(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	globex := h.createTenant("globex")
	task := h.createTask(globex, `{"url":"https://example.com/hook","delay":"1h"}`)
	s, _ := h.signIn(`{"api_key":"` + acme.APIKey + `"}`)
	resp := h.do(http.MethodGet, "/v1/tasks/"+task.ID.String(), globex.APIKey, nil, map[string]string{"Cookie": session.CookieName + "=" + s.cookie.Value})
	require.Equal(t, http.StatusOK, resp.Status, "the bearer key decides, and needs no CSRF token")
}

func mustSessions(t *testing.T, key []byte) *session.Manager {
	t.Helper()
	m, err := session.New(session.Config{Key: key})
	require.NoError(t, err)
	return m
}

func (p problem) slug() string { return strings.TrimPrefix(p.Type, problemTypePrefix) }

// TestSessionsOfRevokedKeysAreThrottled: a session whose key was revoked
// fails like a wrong key, in the same throttle, so replaying its cookie
// cannot cost a query per call for the rest of its hour.
func TestSessionsOfRevokedKeysAreThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	created := h.do(http.MethodPost, "/v1/keys", tn.APIKey, strings.NewReader(`{"name":"doomed","scopes":["tasks:read"]}`), nil)
	require.Equal(t, http.StatusCreated, created.Status, string(created.Body))
	var key openapi.APIKeyCreated
	require.NoError(t, json.Unmarshal(created.Body, &key))
	s, _ := h.signIn(`{"api_key":"` + key.APIKey + `"}`)
	require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/keys/"+key.ID, tn.APIKey, nil, nil).Status)

	for range 20 {
		requireProblem(t, h.as(s, true, http.MethodGet, "/v1/tasks", ""), http.StatusUnauthorized)
	}
	resp := h.as(s, true, http.MethodGet, "/v1/tasks", "")
	require.Equal(t, "too-many-auth-failures", requireProblem(t, resp, http.StatusTooManyRequests).slug())
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}

// TestSessionCookieSecureFromTrustedProxyOnly: X-Forwarded-Proto marks the
// session cookie Secure only when the connection comes from a trusted
// proxy; from anyone else it is ignored, and the cookie follows the
// connection itself (plain HTTP here). Sign-in, renewal and sign-out alike.
func TestSessionCookieSecureFromTrustedProxyOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		proxies []netip.Prefix
		secure  bool
	}{
		// The harness's client connects from loopback.
		{"trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, true},
		{"untrusted peer", []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, false},
		{"no proxies", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *api.Config) { c.TrustedProxies = tc.proxies })
			tn := h.createTenant("acme")
			https := map[string]string{"X-Forwarded-Proto": "https"}
			resp := h.do(http.MethodPost, "/v1/session", "", strings.NewReader(`{"api_key":"`+tn.APIKey+`"}`), https)
			require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
			cookie := sessionCookie(t, resp)
			require.Equal(t, tc.secure, cookie.Secure, "sign-in")
			var s openapi.Session
			require.NoError(t, json.Unmarshal(resp.Body, &s))

			headers := map[string]string{"X-Forwarded-Proto": "https", "Cookie": session.CookieName + "=" + cookie.Value}
			renewed := h.do(http.MethodGet, "/v1/session", "", nil, headers)
			require.Equal(t, http.StatusOK, renewed.Status, string(renewed.Body))
			require.Equal(t, tc.secure, sessionCookie(t, renewed).Secure, "renewal")

			headers[session.CSRFHeader] = s.CsrfToken
			out := h.do(http.MethodDelete, "/v1/session", "", nil, headers)
			require.Equal(t, http.StatusNoContent, out.Status, string(out.Body))
			require.Equal(t, tc.secure, sessionCookie(t, out).Secure, "sign-out")
		})
	}
}

func sessionCookie(t *testing.T, resp response) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: resp.Header}).Cookies() {
		if c.Name == session.CookieName {
			return c
		}
	}
	require.FailNow(t, "no session cookie", "%v", resp.Header)
	return nil
}
