package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestTenantSettings: a tenant reads its settings with any key and sets its
// operations_url with a secrets:manage key, checked as the operator's
// PATCH /v1/admin/tenants/{id} checks it; the change is the operator's view
// too, and is audited under the key, naming the URL's origin only. A
// refused change changes and records nothing.
func TestTenantSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn, other := h.createTenant("acme"), h.createTenant("other")
	keyID, ok := tenants.KeyID(tn.APIKey)
	require.True(t, ok)
	// The operator's view of the tenant leaves out an operations_url unset.
	adminView := func() string {
		raw, ok := rawKeys(t, []byte(h.get("/v1/admin/tenants/"+tn.ID.String(), adminToken)))["operations_url"]
		if !ok {
			return "null"
		}
		return string(raw)
	}

	require.JSONEq(t, `{"operations_url": null}`, h.get("/v1/settings", tn.APIKey))
	auditBefore := len(h.auditOf("/v1/audit", tn.APIKey))

	const secretURL = `"https://ops.acme.example/hooks?token=s3cret"`
	// The steps change one tenant, in this order; want "" is a refusal
	// naming field, which leaves the settings as the step before left them.
	current := "null"
	for _, step := range []struct{ name, body, want, field string }{
		{name: "valid", body: `{"operations_url": ` + secretURL + `}`, want: secretURL},
		{name: "absent keeps", body: `{}`, want: secretURL},
		{name: "private address", body: `{"operations_url": "http://10.20.3.4:8080/ops"}`, field: "operations_url"},
		{name: "loopback", body: `{"operations_url": "http://127.0.0.1/ops"}`, field: "operations_url"},
		{name: "not a URL", body: `{"operations_url": "ops.acme.example"}`, field: "operations_url"},
		{name: "not http", body: `{"operations_url": "ftp://ops.acme.example"}`, field: "operations_url"},
		{name: "empty", body: `{"operations_url": ""}`, field: "operations_url"},
		{name: "not a string", body: `{"operations_url": 42}`, field: "operations_url"},
		{name: "credentials", body: `{"operations_url": "https://user:pw@ops.acme.example"}`, field: "operations_url"},
		{name: "unknown field", body: `{"operations_url": null, "retention": "1h"}`, field: "retention"},
		{name: "null clears", body: `{"operations_url": null}`, want: `null`},
	} {
		resp := h.do(http.MethodPatch, "/v1/settings", tn.APIKey, strings.NewReader(step.body), nil)
		if step.want == "" {
			requireFieldProblem(t, resp, step.field)
		} else {
			require.Equal(t, http.StatusOK, resp.Status, "%s: %s", step.name, resp.Body)
			require.JSONEq(t, `{"operations_url": `+step.want+`}`, string(resp.Body), step.name)
			current = step.want
		}
		require.JSONEq(t, `{"operations_url": `+current+`}`, h.get("/v1/settings", tn.APIKey), step.name)
		require.JSONEq(t, current, adminView(), "%s: the operator sees the tenant's setting", step.name)
	}
	require.JSONEq(t, `{"operations_url": null}`, h.get("/v1/settings", other.APIKey), "another tenant's is its own")

	// Audited under the key, the URL by its origin: its query may be a credential.
	entries := since(h.auditOf("/v1/audit", tn.APIKey), auditBefore)
	require.Len(t, entries, 2, "the set and the clear; an empty change and refusals record nothing")
	for i, origin := range []any{"https://ops.acme.example:443", nil} {
		require.Equal(t, "tenant.operations_url_changed", entries[i].Action)
		require.Equal(t, "key:"+keyID, entries[i].Actor)
		require.Equal(t, origin, entries[i].Detail["operations_url"])
	}
	raw, err := json.Marshal(entries)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "s3cret")

	// A private range the operator granted the tenant is one it may use.
	grant := h.do(http.MethodPatch, "/v1/admin/tenants/"+tn.ID.String(), adminToken,
		strings.NewReader(`{"target_allow_cidrs": ["10.20.0.0/16"]}`), nil)
	require.Equal(t, http.StatusOK, grant.Status, string(grant.Body))
	resp := h.do(http.MethodPatch, "/v1/settings", tn.APIKey, strings.NewReader(`{"operations_url": "http://10.20.3.4:8080/ops"}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `"http://10.20.3.4:8080/ops"`, adminView())
}

// TestTenantSettingsScope: reading the settings takes any key; changing
// them takes secrets:manage, as the signing secrets do, and a key without
// it changes nothing.
func TestTenantSettingsScope(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	reader := h.createKey(tn, `{"name": "reader", "scopes": ["tasks:read", "tasks:write", "keys:manage"]}`)
	manager := h.createKey(tn, `{"name": "settings", "scopes": ["secrets:manage"]}`)
	body := `{"operations_url": "https://ops.acme.example/hooks"}`

	require.JSONEq(t, `{"operations_url": null}`, h.get("/v1/settings", reader.APIKey))
	resp := h.do(http.MethodPatch, "/v1/settings", reader.APIKey, strings.NewReader(body), nil)
	p := requireProblem(t, resp, http.StatusForbidden)
	require.Equal(t, problemTypePrefix+"insufficient-scope", p.Type)
	require.Contains(t, p.Detail, "secrets:manage")
	require.JSONEq(t, `{"operations_url": null}`, h.get("/v1/settings", tn.APIKey))

	resp = h.do(http.MethodPatch, "/v1/settings", manager.APIKey, strings.NewReader(body), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var got openapi.TenantSettings
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/settings", reader.APIKey)), &got))
	require.NotNil(t, got.OperationsURL)
	require.Equal(t, "https://ops.acme.example/hooks", *got.OperationsURL)

	requireProblem(t, h.do(http.MethodGet, "/v1/settings", "", nil, nil), http.StatusUnauthorized)
}
