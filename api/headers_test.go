package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// wantSecurityHeaders are the headers every answer of the API carries
// (docs/security.md says why each).
var wantSecurityHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
	"Cache-Control":           "no-store",
}

func requireSecurityHeaders(t *testing.T, header http.Header) {
	t.Helper()
	for name, want := range wantSecurityHeaders {
		require.Equal(t, []string{want}, header.Values(name), "header %s", name)
	}
}

// TestSecurityHeaders: successes, refusals of every kind, unknown routes and
// the unauthenticated operations endpoints all carry the security headers,
// and so above all do the answers that hold a secret.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	body := func(s string) *strings.Reader { return strings.NewReader(s) }

	cases := []struct {
		name         string
		method, path string
		token        string
		body         *strings.Reader
		want         int
	}{
		// Answers that carry a secret.
		{"tenant created, with its key and signing secret", http.MethodPost, "/v1/admin/tenants", adminToken, body(`{"name": "other"}`), http.StatusCreated},
		{"key created by the tenant", http.MethodPost, "/v1/keys", tn.APIKey, body(`{"name": "ci"}`), http.StatusCreated},
		{"key created by the operator", http.MethodPost, "/v1/admin/tenants/" + tn.ID.String() + "/keys", adminToken, body(`{}`), http.StatusCreated},
		{"signing secret rotated", http.MethodPost, "/v1/signing-secrets/rotate", tn.APIKey, body(`{"grace": "1h"}`), http.StatusCreated},
		// Other authenticated answers.
		{"task list", http.MethodGet, "/v1/tasks", tn.APIKey, nil, http.StatusOK},
		{"task created", http.MethodPost, "/v1/tasks", tn.APIKey, body(`{"url": "https://example.com/hook", "delay": "1h"}`), http.StatusCreated},
		{"limits", http.MethodGet, "/v1/limits", tn.APIKey, nil, http.StatusOK},
		{"tenant read by the operator", http.MethodGet, "/v1/admin/tenants/" + tn.ID.String(), adminToken, nil, http.StatusOK},
		// Refusals, as problem+json.
		{"invalid task", http.MethodPost, "/v1/tasks", tn.APIKey, body(`{"url": "ftp://example.com"}`), http.StatusUnprocessableEntity},
		{"malformed JSON", http.MethodPost, "/v1/tasks", tn.APIKey, body(`{"url":`), http.StatusBadRequest},
		{"no such task", http.MethodGet, "/v1/tasks/" + uuid.NewString(), tn.APIKey, nil, http.StatusNotFound},
		{"no key", http.MethodGet, "/v1/tasks", "", nil, http.StatusUnauthorized},
		{"wrong admin token", http.MethodGet, "/v1/admin/breakers", "not-the-token", nil, http.StatusUnauthorized},
		{"body too large", http.MethodPost, "/v1/tasks", tn.APIKey, body(`{"body": "` + strings.Repeat("a", 5<<20) + `"}`), http.StatusRequestEntityTooLarge},
		{"unknown route", http.MethodGet, "/no/such/route", "", nil, http.StatusNotFound},
		{"unknown route under /v1", http.MethodGet, "/v1/nope", tn.APIKey, nil, http.StatusNotFound},
		{"wrong method", http.MethodPut, "/v1/tasks", tn.APIKey, nil, http.StatusMethodNotAllowed},
		// Operations endpoints, unauthenticated.
		{"healthz", http.MethodGet, "/healthz", "", nil, http.StatusOK},
		{"readyz", http.MethodGet, "/readyz", "", nil, http.StatusOK},
		{"metrics", http.MethodGet, "/metrics", "", nil, http.StatusOK},
		{"openapi document", http.MethodGet, "/openapi.yaml", "", nil, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var resp response
			if tc.body != nil {
				resp = h.do(tc.method, tc.path, tc.token, tc.body, nil)
			} else {
				resp = h.do(tc.method, tc.path, tc.token, nil, nil)
			}
			require.Equal(t, tc.want, resp.Status, "body: %s", resp.Body)
			requireSecurityHeaders(t, resp.Header)
		})
	}
}
