package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/openapi"
)

// fakeTargets stands for the local dispatcher: each tenant's targets.
type fakeTargets struct {
	node     uuid.UUID
	byTenant map[uuid.UUID][]api.TargetStatus
}

func (f *fakeTargets) NodeID() uuid.UUID                    { return f.node }
func (f *fakeTargets) BreakerStatuses() []api.BreakerStatus { return nil }
func (f *fakeTargets) TenantTargets(tenant uuid.UUID) []api.TargetStatus {
	return f.byTenant[tenant]
}

// TestListTargets: a tenant reads its own targets as the dispatcher reports
// them, another tenant its own (none), and a key without tasks:read is
// refused.
func TestListTargets(t *testing.T) {
	t.Parallel()
	src := &fakeTargets{node: uuid.New(), byTenant: map[uuid.UUID][]api.TargetStatus{}}
	h := newHarness(t, func(c *api.Config) { c.Breakers = src })
	acme, other := h.createTenant("acme"), h.createTenant("other")
	since := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	probe := since.Add(time.Hour)
	src.byTenant[acme.ID] = []api.TargetStatus{
		{Target: "https://a.example:443", State: "open", NextProbeAt: probe, InFlight: 1, Waiting: 2,
			Attempts: 7, Failures: 5, Since: since, LastUsed: since.Add(time.Minute)},
		{Target: "https://b.example:443", State: "closed", Attempts: 1, Since: since, LastUsed: since},
	}

	resp, err := acme.Client.ListTargetsWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	require.Equal(t, openapi.TargetList{Node: src.node, Data: []openapi.Target{
		{Target: "https://a.example:443", State: openapi.TargetStateOpen, NextProbeAt: &probe, InFlight: 1, Waiting: 2,
			Attempts: 7, Failures: 5, Since: since, LastUsedAt: since.Add(time.Minute)},
		{Target: "https://b.example:443", State: openapi.TargetStateClosed, Attempts: 1, Since: since, LastUsedAt: since},
	}}, *resp.JSON200)

	resp, err = other.Client.ListTargetsWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	require.Equal(t, []openapi.Target{}, resp.JSON200.Data)

	created, err := acme.Client.CreateKeyWithResponse(t.Context(), openapi.APIKeyRequest{Scopes: []openapi.Scope{openapi.ScopeSchedulesRead}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), string(created.Body))
	requireProblem(t, h.do(http.MethodGet, "/v1/targets", created.JSON201.APIKey, nil, nil), http.StatusForbidden)
	requireProblem(t, h.do(http.MethodGet, "/v1/targets", "", nil, nil), http.StatusUnauthorized)
}

// TestListTargetsWithoutDispatcher: an API-only node knows no targets.
func TestListTargetsWithoutDispatcher(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, err := h.createTenant("acme").Client.ListTargetsWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	require.Equal(t, openapi.TargetList{Data: []openapi.Target{}}, *resp.JSON200)
}

// TestMetricsElsewhere: a node serving its metrics on a listener of their
// own answers 404 problem+json for them on the API's port.
func TestMetricsElsewhere(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.MetricsElsewhere = true })
	requireProblem(t, h.do(http.MethodGet, "/metrics", "", nil, nil), http.StatusNotFound)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/healthz", "", nil, nil).Status)
}
