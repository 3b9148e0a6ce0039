package api_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/tenants"
)

// withSignup turns sign-up on in mode, limited by limit through the
// harness's Redis, behind a trusted proxy on loopback so that tests choose
// their client address with X-Forwarded-For.
func withSignup(mode tenants.SignupMode, limit api.SignupLimit) func(*api.Config) {
	return func(c *api.Config) {
		db := c.Ready["postgres"].(*store.DB)
		c.Signup = tenants.NewSignup(tenants.SignupConfig{Mode: mode, Store: db, Tenants: c.Tenants, Clock: c.Clock})
		c.SignupLimiter = c.RateLimiter.(*store.Redis)
		c.SignupLimit = limit
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
}

// signUp posts body to /v1/signup from client address ip.
func (h *harness) signUp(ip, body string) response {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/signup", "", strings.NewReader(body), map[string]string{"X-Forwarded-For": ip})
}

// signedUp requires a 201 and returns the answer.
func (h *harness) signedUp(resp response) openapi.SignupCreated {
	h.t.Helper()
	require.Equal(h.t, http.StatusCreated, resp.Status, "sign up: %s", resp.Body)
	require.Equal(h.t, "no-store", resp.Header.Get("Cache-Control"))
	var out openapi.SignupCreated
	require.NoError(h.t, json.Unmarshal(resp.Body, &out))
	require.True(h.t, strings.HasPrefix(out.APIKey, "hw_"), out.APIKey)
	require.True(h.t, strings.HasPrefix(out.SigningSecret, "whsec_"), out.SigningSecret)
	return out
}

// createInvite makes an invite through the admin API.
func (h *harness) createInvite(body string) openapi.InviteCreated {
	h.t.Helper()
	resp := h.do(http.MethodPost, "/v1/admin/invites", adminToken, strings.NewReader(body), nil)
	require.Equal(h.t, http.StatusCreated, resp.Status, "create invite: %s", resp.Body)
	var out openapi.InviteCreated
	require.NoError(h.t, json.Unmarshal(resp.Body, &out))
	return out
}

func requireProblemType(t *testing.T, resp response, status int, slug string) {
	t.Helper()
	require.Equal(t, problemTypePrefix+slug, requireProblem(t, resp, status).Type, "body: %s", resp.Body)
}

func signupMode(t *testing.T, h *harness) openapi.SignupMode {
	t.Helper()
	resp, err := h.Client.GetSignupWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
	return resp.JSON200.Mode
}

// TestSignupOff: without sign-up, or with it off, GET /v1/signup says off
// and every sign-up gets 404 signup-disabled; invites are made all the
// same, to hand out before opening.
func TestSignupOff(t *testing.T) {
	t.Parallel()
	unconfigured := newHarness(t)
	require.Equal(t, openapi.SignupModeOff, signupMode(t, unconfigured))
	requireProblemType(t, unconfigured.signUp("203.0.113.1", `{"name": "acme"}`), http.StatusNotFound, "signup-disabled")
	requireProblem(t, unconfigured.do(http.MethodGet, "/v1/admin/invites", adminToken, nil, nil), http.StatusNotFound)

	h := newHarness(t, withSignup(tenants.SignupOff, api.SignupLimit{}))
	require.Equal(t, openapi.SignupModeOff, signupMode(t, h))
	requireProblemType(t, h.signUp("203.0.113.1", `{"name": "acme"}`), http.StatusNotFound, "signup-disabled")
	inv := h.createInvite(`{}`)
	requireProblemType(t, h.signUp("203.0.113.1", `{"name": "acme", "invite_code": "`+inv.InviteCode+`"}`),
		http.StatusNotFound, "signup-disabled")
}

// TestSignupInvite walks an invite's life: made, refused when missing,
// unknown or malformed, used once, refused when used or expired, listed
// without its code, revoked while unused; each step in the audit log.
func TestSignupInvite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withSignup(tenants.SignupInvite, api.SignupLimit{PerAddress: 50, Total: 50}))
	require.Equal(t, openapi.SignupModeInvite, signupMode(t, h))
	const ip = "203.0.113.7"

	inv := h.createInvite(`{"expires_in": "72h", "note": "for Globex"}`)
	require.True(t, strings.HasPrefix(inv.InviteCode, inv.Prefix), "%s, %s", inv.InviteCode, inv.Prefix)
	require.Equal(t, openapi.InviteStatusUnused, inv.Status)
	require.Equal(t, "for Globex", inv.Note)
	require.WithinDuration(t, h.Clock.Now().Add(72*3600e9), inv.ExpiresAt, 0)
	def := h.createInvite(`{}`)
	require.WithinDuration(t, h.Clock.Now().Add(tenants.DefaultInviteTTL), def.ExpiresAt, 0, "seven days by default")

	requireProblemType(t, h.signUp(ip, `{"name": "globex"}`), http.StatusForbidden, "invite-required")
	requireProblemType(t, h.signUp(ip, `{"name": "globex", "invite_code": ""}`), http.StatusForbidden, "invite-required")
	requireProblemType(t, h.signUp(ip, `{"name": "globex", "invite_code": "not-a-code"}`), http.StatusForbidden, "invite-invalid")
	unknown := "hwinv_" + strings.Repeat("a", 32)
	requireProblemType(t, h.signUp(ip, `{"name": "globex", "invite_code": "`+unknown+`"}`), http.StatusForbidden, "invite-invalid")

	created := h.signedUp(h.signUp(ip, `{"name": "globex", "invite_code": "`+inv.InviteCode+`"}`))
	require.Equal(t, "globex", created.Tenant.Name)
	me := h.do(http.MethodGet, "/v1/me", created.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, me.Status, "the new key works: %s", me.Body)

	requireProblemType(t, h.signUp(ip, `{"name": "again", "invite_code": "`+inv.InviteCode+`"}`), http.StatusForbidden, "invite-used")

	expired := h.createInvite(`{"expires_in": "1m"}`)
	h.exec(`UPDATE invites SET created_at = now() - interval '1 hour', expires_at = now() - interval '10 minutes' WHERE id = $1`, expired.ID)
	requireProblemType(t, h.signUp(ip, `{"name": "late", "invite_code": "`+expired.InviteCode+`"}`), http.StatusForbidden, "invite-expired")

	list := h.do(http.MethodGet, "/v1/admin/invites", adminToken, nil, nil)
	require.Equal(t, http.StatusOK, list.Status, "%s", list.Body)
	require.NotContains(t, string(list.Body), inv.InviteCode, "codes are never shown again")
	var invites openapi.InviteList
	require.NoError(t, json.Unmarshal(list.Body, &invites))
	require.Len(t, invites.Data, 3)
	byID := map[string]openapi.Invite{}
	for _, i := range invites.Data {
		byID[i.ID.String()] = i
	}
	used := byID[inv.ID.String()]
	require.Equal(t, openapi.InviteStatusUsed, used.Status)
	require.NotNil(t, used.UsedBy)
	require.Equal(t, created.Tenant.ID, *used.UsedBy)
	require.NotNil(t, used.UsedAt)
	require.Equal(t, openapi.InviteStatusExpired, byID[expired.ID.String()].Status)
	require.Equal(t, openapi.InviteStatusUnused, byID[def.ID.String()].Status)
	page := h.do(http.MethodGet, "/v1/admin/invites?limit=2", adminToken, nil, nil)
	var first openapi.InviteList
	require.NoError(t, json.Unmarshal(page.Body, &first))
	require.Len(t, first.Data, 2)
	require.NotNil(t, first.NextCursor)
	rest := h.do(http.MethodGet, "/v1/admin/invites?limit=2&cursor="+*first.NextCursor, adminToken, nil, nil)
	var second openapi.InviteList
	require.NoError(t, json.Unmarshal(rest.Body, &second))
	require.Len(t, second.Data, 1)
	require.Nil(t, second.NextCursor)

	requireProblemType(t, h.do(http.MethodDelete, "/v1/admin/invites/"+inv.ID.String(), adminToken, nil, nil), http.StatusConflict, "invite-used")
	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, "/v1/admin/invites/"+def.ID.String(), adminToken, nil, nil).Status)
	requireProblemType(t, h.do(http.MethodDelete, "/v1/admin/invites/"+def.ID.String(), adminToken, nil, nil), http.StatusNotFound, "not-found")
	requireProblemType(t, h.signUp(ip, `{"name": "revoked", "invite_code": "`+def.InviteCode+`"}`), http.StatusForbidden, "invite-invalid")
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/invites", "", nil, nil), http.StatusUnauthorized)

	type entry struct{ Actor, Action string }
	var got []entry
	for _, e := range h.auditOf("/v1/admin/audit", adminToken) {
		got = append(got, entry{e.Actor, e.Action})
		if e.Action == "tenant.signed_up" {
			require.Equal(t, ip, e.Detail["client"])
			require.Equal(t, inv.ID.String(), e.Detail["invite_id"])
			require.Equal(t, created.Tenant.ID, *e.TenantID)
		}
	}
	require.Equal(t, []entry{
		{"operator", "invite.created"}, {"operator", "invite.created"},
		{"signup", "tenant.created"}, {"signup", "tenant.signed_up"},
		{"operator", "invite.created"}, {"operator", "invite.revoked"},
	}, got)
}

// TestSignupOpen: no code needed; one given is ignored.
func TestSignupOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withSignup(tenants.SignupOpen, api.SignupLimit{}))
	require.Equal(t, openapi.SignupModeOpen, signupMode(t, h))
	a := h.signedUp(h.signUp("203.0.113.8", `{"name": "Initech GmbH – Zürich"}`))
	require.Equal(t, "Initech GmbH – Zürich", a.Tenant.Name)
	b := h.signedUp(h.signUp("203.0.113.8", `{"name": "initech", "invite_code": "whatever"}`))
	require.NotEqual(t, a.Tenant.ID, b.Tenant.ID)
	got, err := h.Tenants.Get(t.Context(), a.Tenant.ID)
	require.NoError(t, err)
	require.Equal(t, a.Tenant.Name, got.Name)
}

// TestSignupLimits: an address gets PerAddress sign-ups, then 429 with
// Retry-After, while another address still signs up; every address
// together gets Total.
func TestSignupLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withSignup(tenants.SignupOpen, api.SignupLimit{PerAddress: 2, Total: 4}))
	h.signedUp(h.signUp("203.0.113.10", `{"name": "a1"}`))
	h.signedUp(h.signUp("203.0.113.10", `{"name": "a2"}`))
	refused := h.signUp("203.0.113.10", `{"name": "a3"}`)
	requireProblemType(t, refused, http.StatusTooManyRequests, "signup-limited")
	require.NotEmpty(t, refused.Header.Get("Retry-After"))
	require.Contains(t, requireProblem(t, refused, http.StatusTooManyRequests).Detail, "one address")

	// An IPv6 client counts by its /64: another address of it is the same client.
	h.signedUp(h.signUp("2001:db8:1:2::10", `{"name": "b1"}`))
	h.signedUp(h.signUp("2001:db8:1:2::11", `{"name": "b2"}`))
	requireProblemType(t, h.signUp("2001:db8:1:2::12", `{"name": "b3"}`), http.StatusTooManyRequests, "signup-limited")

	// Four made in all: a fresh address meets the limit of all.
	all := h.signUp("198.51.100.1", `{"name": "c1"}`)
	requireProblemType(t, all, http.StatusTooManyRequests, "signup-limited")
	require.Contains(t, requireProblem(t, all, http.StatusTooManyRequests).Detail, "all addresses")

	metrics := string(h.do(http.MethodGet, "/metrics", "", nil, nil).Body)
	require.Contains(t, metrics, `hookwheel_signup_refusals_total{limit="address"} 2`)
	require.Contains(t, metrics, `hookwheel_signup_refusals_total{limit="total"} 1`)
}

// TestSignupBadInput: malformed or invalid sign-ups get 4xx problems, and
// do not count against the address.
func TestSignupBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withSignup(tenants.SignupOpen, api.SignupLimit{PerAddress: 1}))
	const ip = "203.0.113.20"
	for _, name := range []string{"", " acme", "acme ", "ac\x01me", "ac\u202eme", strings.Repeat("n", tenants.MaxSignupName+1)} {
		body, err := json.Marshal(map[string]string{"name": name})
		require.NoError(t, err)
		requireFieldProblem(t, h.signUp(ip, string(body)), "name")
	}
	requireFieldProblem(t, h.signUp(ip, `{"name": "acme", "invite_code": "`+strings.Repeat("x", 101)+`"}`), "invite_code")
	requireProblem(t, h.signUp(ip, `{"name": 42}`), http.StatusUnprocessableEntity)
	requireProblem(t, h.signUp(ip, `{"name": "acme", "plan": "gold"}`), http.StatusUnprocessableEntity)
	requireProblem(t, h.signUp(ip, `{"name": "acme"`), http.StatusBadRequest)
	requireProblemType(t, h.do(http.MethodPost, "/v1/signup", "", strings.NewReader(`{"name": "acme"}`),
		map[string]string{"Content-Type": "text/plain", "X-Forwarded-For": ip}), http.StatusUnsupportedMediaType, "unsupported-media-type")
	h.signedUp(h.signUp(ip, `{"name": "acme"}`))
	requireProblemType(t, h.signUp(ip, `{"name": "acme"}`), http.StatusTooManyRequests, "signup-limited")

	for _, body := range []string{`{"expires_in": "soon"}`, `{"expires_in": "1s"}`, `{"expires_in": "2161h"}`,
		`{"expires_in": "-1h"}`, `{"expires_in": "0s"}`} {
		requireFieldProblem(t, h.do(http.MethodPost, "/v1/admin/invites", adminToken, strings.NewReader(body), nil), "expires_in")
	}
	requireFieldProblem(t, h.do(http.MethodPost, "/v1/admin/invites", adminToken,
		strings.NewReader(`{"note": "`+strings.Repeat("n", tenants.MaxInviteNote+1)+`"}`), nil), "note")
	requireProblem(t, h.do(http.MethodDelete, "/v1/admin/invites/not-a-uuid", adminToken, nil, nil), http.StatusBadRequest)
}

// TestSignupWithoutLimiter: when the limits cannot be decided, sign-ups are
// refused with 503, never taken uncounted.
func TestSignupWithoutLimiter(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	unreachable, err := store.OpenRedis(store.RedisConfig{URL: "redis://" + addr + "/0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = unreachable.Close() })
	h := newHarness(t, withSignup(tenants.SignupOpen, api.SignupLimit{}), func(c *api.Config) { c.SignupLimiter = unreachable })
	resp := h.signUp("203.0.113.30", `{"name": "acme"}`)
	requireProblemType(t, resp, http.StatusServiceUnavailable, "signup-unavailable")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	list, err := h.Tenants.List(t.Context(), nil, 10)
	require.NoError(t, err)
	require.Empty(t, list)
}
