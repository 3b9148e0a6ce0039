package api_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// auditOf reads an audit log (GET /v1/audit with a tenant key, or
// /v1/admin/audit with the admin token), oldest first.
func (h *harness) auditOf(path, token string) []openapi.AuditEntry {
	h.t.Helper()
	var list openapi.AuditList
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	require.NoError(h.t, json.Unmarshal([]byte(h.get(path+sep+"limit=200", token)), &list))
	entries := list.Data
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	return entries
}

// since drops the first n entries, leaving what came after.
func since(entries []openapi.AuditEntry, n int) []openapi.AuditEntry { return entries[n:] }

// TestAuditConfigurationChanges: every change a tenant makes to its
// configuration through the API, and every bulk cancel and replay, is in
// its audit log, in order, naming the key it was made with and what
// changed (a webhook URL by its origin only; no header, no body). A call
// that changes nothing (a pause of a paused schedule, a refused change, a
// dry run, a bulk call matching nothing) records nothing.
func TestAuditConfigurationChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	keyID, ok := tenants.KeyID(tn.APIKey)
	require.True(t, ok)
	actor := "key:" + keyID
	before := len(h.auditOf("/v1/audit", tn.APIKey))
	call := func(method, path, body string, want int) response {
		t.Helper()
		var r *strings.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		var resp response
		if r != nil {
			resp = h.do(method, path, tn.APIKey, r, nil)
		} else {
			resp = h.do(method, path, tn.APIKey, nil, nil)
		}
		require.Equal(t, want, resp.Status, "%s %s: %s", method, path, resp.Body)
		return resp
	}

	h.putTopic(tn, "orders", `{"endpoints": [{"url": "https://hooks.example/T0/secret-path?token=s3cr3t", "name": "ops"}]}`)
	h.putTopic(tn, "orders", `{"endpoints": [{"url": "https://other.example:8443/in"}], "description": "moved"}`)
	call(http.MethodDelete, "/v1/topics/orders", "", http.StatusOK)
	call(http.MethodDelete, "/v1/topics/orders", "", http.StatusNotFound)

	h.putFlowLimit(tn, "customer-1", `{"rate": 10, "period": "1s"}`)
	h.putFlowLimit(tn, "customer-1", `{"parallelism": 2}`)
	call(http.MethodDelete, "/v1/flow-keys/customer-1", "", http.StatusOK)

	sc := h.createSchedule(tn, `{"cron": "@every 1h", "url": "https://cron.example/tick?key=s3cr3t",
		"headers": {"Authorization": "Bearer s3cr3t"}, "body": "s3cr3t"}`)
	scPath := "/v1/schedules/" + sc.ID.String()
	call(http.MethodPatch, scPath, `{"cron": "@every 2h"}`, http.StatusOK)
	call(http.MethodPost, scPath+"/pause", "", http.StatusOK)
	call(http.MethodPost, scPath+"/pause", "", http.StatusOK) // already paused: no change
	call(http.MethodPost, scPath+"/resume", "", http.StatusOK)
	call(http.MethodDelete, scPath, "", http.StatusOK)

	h.createTask(tn, `{"url": "https://example.com/a", "delay": "1h", "labels": {"batch": "7"}}`)
	h.createTask(tn, `{"url": "https://example.com/b", "delay": "1h", "labels": {"batch": "7"}}`)
	call(http.MethodPost, "/v1/tasks/cancel", `{"status": "scheduled"}`, http.StatusOK)
	call(http.MethodPost, "/v1/tasks/cancel", `{"status": "retrying"}`, http.StatusOK) // matches nothing

	dead := h.createTask(tn, `{"url": "https://example.com/dead/path", "delay": "1h"}`)
	finishForReplay(h, dead.ID, "dead", 3, 500, nil)
	call(http.MethodPost, "/v1/tasks/replay", `{"url": "https://example.com/dead", "dry_run": true}`, http.StatusOK)
	call(http.MethodPost, "/v1/tasks/replay", `{"url": "https://example.com/dead"}`, http.StatusOK)

	entries := since(h.auditOf("/v1/audit", tn.APIKey), before)
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
		require.Equal(t, actor, e.Actor, e.Action)
		require.Equal(t, tn.ID, *e.TenantID, e.Action)
		raw, err := json.Marshal(e.Detail)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "s3cr3t", "%s records a secret: %s", e.Action, raw)
		require.NotContains(t, string(raw), "secret-path", "%s records a URL's path: %s", e.Action, raw)
	}
	require.Equal(t, []string{
		"topic.created", "topic.updated", "topic.deleted",
		"flow_limit.created", "flow_limit.updated", "flow_limit.deleted",
		"schedule.created", "schedule.updated", "schedule.paused", "schedule.resumed", "schedule.deleted",
		"tasks.canceled", "tasks.replayed",
	}, actions)

	detail := func(action string) map[string]any {
		for _, e := range entries {
			if e.Action == action {
				return e.Detail
			}
		}
		return nil
	}
	require.Equal(t, map[string]any{"topic": "orders", "endpoints": []any{map[string]any{"target": "https://hooks.example", "name": "ops"}}},
		detail("topic.created"))
	require.Equal(t, []any{map[string]any{"target": "https://other.example:8443"}}, detail("topic.updated")["endpoints"])
	require.Equal(t, map[string]any{"flow_key": "customer-1", "rate": 10.0, "period": "1s", "parallelism": 0.0}, detail("flow_limit.created"))
	require.Equal(t, sc.ID.String(), detail("schedule.created")["schedule_id"])
	require.Equal(t, "https://cron.example", detail("schedule.created")["target"])
	require.Equal(t, "@every 2h", detail("schedule.updated")["cron"])
	require.Equal(t, map[string]any{"canceled": 2.0, "filter": map[string]any{"status": "scheduled"}}, detail("tasks.canceled"))
	require.Equal(t, map[string]any{"matched": 1.0, "replayed": 1.0, "filter": map[string]any{"url_origin": "https://example.com"}},
		detail("tasks.replayed"))

	// The operator reads them too.
	all := h.auditOf("/v1/admin/audit?tenant_id="+tn.ID.String(), adminToken)
	require.Equal(t, entries, since(all, len(all)-len(entries)))
}

// TestAuditSessions: dashboard sign-ins and sign-outs are in the audit log
// with the client's address (behind a trusted proxy, the one it names): a
// tenant's in its own log under the key it signed in with, a refused one
// of an existing key with why, the operator's in the installation's. A
// key id that names no key is recorded nowhere.
func TestAuditSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	tn := h.createTenant("acme")
	keyID, _ := tenants.KeyID(tn.APIKey)
	revoked := h.createKey(tn, `{"name": "old", "scopes": ["*"]}`)
	resp := h.do(http.MethodDelete, "/v1/keys/"+revoked.ID, tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	before := len(h.auditOf("/v1/audit", tn.APIKey))
	from := map[string]string{"X-Forwarded-For": "203.0.113.9"}
	signIn := func(body string) response {
		t.Helper()
		return h.do(http.MethodPost, "/v1/session", "", strings.NewReader(body), from)
	}

	ok := signIn(`{"api_key": "` + tn.APIKey + `"}`)
	require.Equal(t, http.StatusOK, ok.Status, string(ok.Body))
	wrong := tn.APIKey[:len(tn.APIKey)-4] + "aaaa"
	requireProblem(t, signIn(`{"api_key": "`+wrong+`"}`), http.StatusUnauthorized)
	requireProblem(t, signIn(`{"api_key": "`+revoked.APIKey+`"}`), http.StatusUnauthorized)
	requireProblem(t, signIn(`{"api_key": "hw_aaaaaaaaaaaaa_`+strings.Repeat("b", 32)+`"}`), http.StatusUnauthorized)
	var s openapi.Session
	require.NoError(t, json.Unmarshal(ok.Body, &s))
	out := h.do(http.MethodDelete, "/v1/session", "", nil, map[string]string{
		"Cookie": session.CookieName + "=" + sessionCookie(t, ok).Value, session.CSRFHeader: s.CsrfToken, "X-Forwarded-For": "203.0.113.9",
	})
	require.Equal(t, http.StatusNoContent, out.Status, string(out.Body))

	type got struct{ Actor, Action, IP, Reason string }
	var entries []got
	for _, e := range since(h.auditOf("/v1/audit", tn.APIKey), before) {
		g := got{Actor: e.Actor, Action: e.Action, IP: e.Detail["ip"].(string)}
		if r, ok := e.Detail["reason"].(string); ok {
			g.Reason = r
		}
		entries = append(entries, g)
	}
	require.Equal(t, []got{
		{"key:" + keyID, "session.signed_in", "203.0.113.9", ""},
		{"key:" + keyID, "session.sign_in_failed", "203.0.113.9", "wrong secret"},
		{"key:" + revoked.ID, "session.sign_in_failed", "203.0.113.9", "revoked"},
		{"key:" + keyID, "session.signed_out", "203.0.113.9", ""},
	}, entries)

	operator := signIn(`{"admin_token": "` + adminToken + `"}`)
	require.Equal(t, http.StatusOK, operator.Status, string(operator.Body))
	all := h.auditOf("/v1/admin/audit", adminToken)
	last := all[len(all)-1]
	require.Nil(t, last.TenantID)
	require.Equal(t, "operator", last.Actor)
	require.Equal(t, "session.signed_in", last.Action)
	require.Equal(t, "203.0.113.9", last.Detail["ip"])
}
