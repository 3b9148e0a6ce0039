package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// tenantCall sends an admin call about tenant id and decodes the tenant it
// answers with, when it answers with one.
func (h *harness) tenantCall(method, path string) (response, openapi.Tenant) {
	h.t.Helper()
	resp := h.do(method, path, adminToken, nil, nil)
	var got openapi.Tenant
	if resp.Status < 300 {
		require.NoError(h.t, json.Unmarshal(resp.Body, &got), "%s", resp.Body)
	}
	return resp, got
}

func TestSuspendAndResumeTenant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme, other := h.createTenant("acme"), h.createTenant("other")
	task := h.createTask(acme, `{"url": "https://example.com/hook", "delay": "1h"}`)
	base := "/v1/admin/tenants/" + acme.ID.String()

	for range 2 { // the second time changes nothing
		resp, got := h.tenantCall(http.MethodPost, base+"/suspend")
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.Equal(t, openapi.TenantStatusSuspended, got.Status)
		require.Nil(t, got.Deletion)
	}

	// Every call of the tenant's keys is refused, and says why; the other
	// tenant's are not.
	for _, path := range []string{"/v1/tasks", "/v1/tasks/" + task.ID.String(), "/v1/limits"} {
		p := requireProblem(t, h.do(http.MethodGet, path, acme.APIKey, nil, nil), http.StatusForbidden)
		require.Equal(t, problemTypePrefix+"tenant-suspended", p.Type, path)
	}
	resp := h.postTask(acme, `{"url": "https://example.com/hook"}`, "")
	require.Equal(t, http.StatusForbidden, resp.Status, "%s", resp.Body)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/tasks", other.APIKey, nil, nil).Status)
	// A wrong secret for the suspended tenant's key id is still no key.
	wrong := acme.APIKey[:strings.LastIndex(acme.APIKey, "_")+1] + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	require.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, "/v1/tasks", wrong, nil, nil).Status)
	// Nor can it open a dashboard session.
	signIn := h.do(http.MethodPost, "/v1/session", "", strings.NewReader(`{"api_key": "`+acme.APIKey+`"}`), nil)
	require.Equal(t, http.StatusForbidden, signIn.Status, "%s", signIn.Body)

	// The operator's list shows it.
	list := h.do(http.MethodGet, "/v1/admin/tenants", adminToken, nil, nil)
	require.Equal(t, http.StatusOK, list.Status)
	var page openapi.TenantList
	require.NoError(t, json.Unmarshal(list.Body, &page))
	statuses := map[uuid.UUID]openapi.TenantSummaryStatus{}
	for _, s := range page.Data {
		statuses[s.ID] = s.Status
	}
	require.Equal(t, openapi.TenantSummaryStatusSuspended, statuses[acme.ID])
	require.Equal(t, openapi.TenantSummaryStatusActive, statuses[other.ID])

	for range 2 {
		resp, got := h.tenantCall(http.MethodPost, base+"/resume")
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.Equal(t, openapi.TenantStatusActive, got.Status)
	}
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/tasks/"+task.ID.String(), acme.APIKey, nil, nil).Status)

	// Each change is audited once, as the operator's.
	entries, err := h.Tenants.ListAudit(context.Background(), model.AuditFilter{TenantID: &acme.ID, Limit: 100})
	require.NoError(t, err)
	var actions []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "tenant.s") || strings.HasPrefix(e.Action, "tenant.r") {
			actions = append(actions, e.Action)
			require.Equal(t, model.ActorOperator, e.Actor)
		}
	}
	require.Equal(t, []string{tenants.AuditResumed, tenants.AuditSuspended}, actions)

	for _, op := range []string{"/suspend", "/resume"} {
		resp := h.do(http.MethodPost, "/v1/admin/tenants/"+uuid.NewString()+op, adminToken, nil, nil)
		require.Equal(t, http.StatusNotFound, resp.Status)
	}
	require.Equal(t, http.StatusNotFound, h.do(http.MethodDelete, "/v1/admin/tenants/"+uuid.NewString(), adminToken, nil, nil).Status)
	require.Equal(t, http.StatusUnauthorized, h.do(http.MethodPost, base+"/suspend", acme.APIKey, nil, nil).Status)
}

// TestDeleteTenant: a deleted tenant's keys are refused at once, on this
// node and on another whose tenants service caches keys for an hour: only
// the change announced in the deletion's transaction can make that one
// drop its cached key. The deleter then removes the tenant, and reading it
// answers 404, while the audit entries of its deletion stay.
func TestDeleteTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	acme, other := h.createTenant("acme"), h.createTenant("other")
	h.createTask(acme, `{"url": "https://example.com/hook", "delay": "1h"}`)

	// The other node: its own tenants service and cache, and its own
	// listener on the same database.
	elsewhere := tenants.New(tenants.Config{Store: h.DB, KeyCacheTTL: time.Hour})
	listenCtx, stopListening := context.WithCancel(ctx)
	listening, listened := make(chan struct{}), make(chan error, 1)
	go func() {
		listened <- h.DB.Listen(listenCtx, func() { close(listening) }, model.Listeners{Tenant: elsewhere.TenantChanged})
	}()
	t.Cleanup(func() { stopListening(); <-listened })
	<-listening
	_, err := elsewhere.Authenticate(ctx, acme.APIKey) // cached for an hour
	require.NoError(t, err)

	base := "/v1/admin/tenants/" + acme.ID.String()
	asked := time.Now()
	resp, got := h.tenantCall(http.MethodDelete, base)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	require.Equal(t, openapi.TenantStatusDeleting, got.Status)
	require.NotNil(t, got.Deletion)
	require.WithinDuration(t, time.Now(), got.Deletion.RequestedAt, time.Minute)

	require.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, "/v1/tasks", acme.APIKey, nil, nil).Status)
	for {
		_, err := elsewhere.Authenticate(ctx, acme.APIKey)
		if err != nil {
			require.ErrorIs(t, err, tenants.ErrUnauthenticated)
			break
		}
		require.Less(t, time.Since(asked), 5*time.Second, "the other node still takes the deleted tenant's key")
		time.Sleep(time.Millisecond) // polling
	}
	t.Logf("the other node refused the deleted tenant's key %s after the DELETE was sent", time.Since(asked))
	_, err = elsewhere.Authenticate(ctx, other.APIKey)
	require.NoError(t, err)

	// A tenant being deleted can be neither suspended nor resumed; asking
	// again changes nothing.
	for _, op := range []string{"/suspend", "/resume"} {
		requireProblem(t, h.do(http.MethodPost, base+op, adminToken, nil, nil), http.StatusConflict)
	}
	resp, got = h.tenantCall(http.MethodDelete, base)
	require.Equal(t, http.StatusAccepted, resp.Status)
	require.Equal(t, openapi.TenantStatusDeleting, got.Status)
	resp, got = h.tenantCall(http.MethodGet, base)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, openapi.TenantStatusDeleting, got.Status)

	deleter := tenants.NewDeleter(tenants.DeleterConfig{Store: h.DB, Interval: 10 * time.Millisecond, Pause: time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- deleter.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := h.do(http.MethodGet, base, adminToken, nil, nil)
		if resp.Status == http.StatusNotFound {
			break
		}
		require.Equal(t, http.StatusOK, resp.Status)
		require.True(t, time.Now().Before(deadline), "the tenant is still there: %s", resp.Body)
		time.Sleep(10 * time.Millisecond) // polling
	}
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/admin/tenants/"+other.ID.String(), adminToken, nil, nil).Status)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/tasks", other.APIKey, nil, nil).Status)

	entries, err := h.Tenants.ListAudit(ctx, model.AuditFilter{TenantID: &acme.ID, Limit: 100})
	require.NoError(t, err)
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	require.Contains(t, actions, tenants.AuditDeletionAsked)
	require.Contains(t, actions, tenants.AuditDeletionFinished)
	require.Equal(t, tenants.AuditDeletionFinished, entries[0].Action)
	require.Equal(t, map[string]any{"tasks": float64(1), "api_keys": float64(1)}, entries[0].Detail["deleted"])
}
