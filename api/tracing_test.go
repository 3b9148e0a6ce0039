package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/tracing"
	"github.com/hookwheel/hookwheel/openapi"
)

const clientSpan = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A create's trace context headers are kept with its task as W3C Trace
// Context reads them; none of them, however malformed or repeated, makes
// the call fail.
func TestCreateKeepsTraceContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	for _, tc := range []struct {
		name                  string
		traceparent           []string
		tracestate            []string
		wantParent, wantState string
	}{
		{name: "none"},
		{name: "one", traceparent: []string{clientSpan}, wantParent: clientSpan},
		{name: "with state", traceparent: []string{clientSpan}, tracestate: []string{"congo=t61rcWkgMzE"},
			wantParent: clientSpan, wantState: "congo=t61rcWkgMzE"},
		{name: "state over two lines", traceparent: []string{clientSpan}, tracestate: []string{"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7"},
			wantParent: clientSpan, wantState: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{name: "malformed", traceparent: []string{"00-nope-01"}},
		{name: "twice", traceparent: []string{clientSpan, clientSpan}},
		{name: "state alone", tracestate: []string{"congo=t61rcWkgMzE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/tasks", strings.NewReader(`{"url": "https://example.com/hook"}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tn.APIKey)
			req.Header.Set("Content-Type", "application/json")
			for _, v := range tc.traceparent {
				req.Header.Add("traceparent", v)
			}
			for _, v := range tc.tracestate {
				req.Header.Add("tracestate", v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
			var task openapi.Task
			require.NoError(t, json.Unmarshal(body, &task))

			conn, err := pgx.Connect(t.Context(), h.dbURL)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			var parent, state *string
			require.NoError(t, conn.QueryRow(t.Context(), `SELECT trace_parent, trace_state FROM tasks WHERE id = $1`, task.ID).
				Scan(&parent, &state))
			got := [2]string{}
			if parent != nil {
				got[0] = *parent
			}
			if state != nil {
				got[1] = *state
			}
			require.Equal(t, [2]string{tc.wantParent, tc.wantState}, got)
		})
	}
}

// With a tracer provider, each request is a server span named by its
// route, a child of the request's traceparent, naming the tenant and the
// task created; the task keeps that span's context, not the caller's.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	exported := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exported))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, func(c *api.Config) { c.TracerProvider = tp })
	tn := h.createTenant("acme")
	exported.Reset()

	resp := h.do(http.MethodPost, "/v1/tasks", tn.APIKey, strings.NewReader(`{"url": "https://example.com/hook"}`),
		map[string]string{"traceparent": clientSpan})
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	var task openapi.Task
	require.NoError(t, json.Unmarshal(resp.Body, &task))
	missing := h.do(http.MethodGet, "/v1/tasks/0192d7a0-0000-7000-8000-000000000001", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusNotFound, missing.Status)

	var spans []tracetest.SpanStub
	for _, s := range exported.GetSpans() {
		if s.SpanKind == trace.SpanKindServer {
			spans = append(spans, s)
		}
	}
	require.Len(t, spans, 2)
	create, get := spans[0], spans[1]
	client, _ := tracing.Parent(clientSpan, "")
	require.Equal(t, "POST /v1/tasks", create.Name)
	require.Equal(t, client.TraceID(), create.SpanContext.TraceID())
	require.Equal(t, client.SpanID(), create.Parent.SpanID())
	attrs := map[string]string{}
	for _, kv := range create.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, map[string]string{
		"http.request.method": "POST", "http.route": "/v1/tasks", "http.response.status_code": "201",
		tracing.AttrTenantID: tn.ID.String(), tracing.AttrTaskID: task.ID.String(), tracing.AttrTarget: "https://example.com:443",
	}, attrs)
	require.Equal(t, "GET /v1/tasks/:id", get.Name, "the route template, never the id")
	require.False(t, get.Parent.IsValid(), "a request without traceparent starts a trace")

	conn, err := pgx.Connect(t.Context(), h.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var stored string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT trace_parent FROM tasks WHERE id = $1`, task.ID).Scan(&stored))
	kept, ok := tracing.Parent(stored, "")
	require.True(t, ok)
	require.Equal(t, create.SpanContext.SpanID(), kept.SpanID(), "the task keeps the API span's context")
}
