package e2e_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/internal/tracing"
	"github.com/hookwheel/hookwheel/openapi"
)

// incoming is the traceparent of the creating client's span.
const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// spanContextOf is the span context a webhook's traceparent names.
func spanContextOf(t *testing.T, d delivery) trace.SpanContext {
	t.Helper()
	sc, ok := tracing.Parent(d.header.Get("traceparent"), d.header.Get("tracestate"))
	require.True(t, ok, "the webhook's traceparent %q", d.header.Get("traceparent"))
	return sc
}

func attributesOf(s tracetest.SpanStub) map[attribute.Key]string {
	attrs := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	return attrs
}

// With tracing on, a create's traceparent is continued by its API span, its
// insert's span and its webhook's send span, one trace from the client's
// call to the receiver, each span naming the task; the webhook's
// traceparent names the send span.
func TestTracingSpansFromCreateToWebhook(t *testing.T) {
	t.Parallel()
	exported := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exported))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.TracerProvider = tp })
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)

	resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey,
		mustJSON(t, map[string]string{"url": recv.URL + "/hooks/order"}), map[string]string{"traceparent": incoming})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	ds := recv.waitFor(t, 10*time.Second, "the webhook", func(ds []delivery) bool { return len(ds) == 1 })
	webhook := spanContextOf(t, ds[0])
	client, _ := tracing.Parent(incoming, "")
	require.Equal(t, client.TraceID(), webhook.TraceID(), "the webhook continues the client's trace")
	require.NotEqual(t, client.SpanID(), webhook.SpanID())

	// The send span ends once the answer is read, after the webhook
	// arrived: the exporter, which has no signal, is polled.
	byName := map[string]tracetest.SpanStub{}
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		for _, s := range exported.GetSpans() {
			if s.SpanContext.TraceID() == client.TraceID() {
				byName[s.Name] = s
			}
		}
		if _, ok := byName[tracing.SpanSend]; ok || time.Now().After(deadline) {
			break
		}
		<-poll.C
	}
	api, insert, send := byName["POST /v1/tasks"], byName[tracing.SpanStoreInsert], byName[tracing.SpanSend]
	require.Equal(t, trace.SpanKindServer, api.SpanKind, "the API span, in %v", byName)
	require.Equal(t, client.SpanID(), api.Parent.SpanID())
	require.Equal(t, api.SpanContext.SpanID(), insert.Parent.SpanID(), "the insert, in %v", byName)
	require.Equal(t, api.SpanContext.SpanID(), send.Parent.SpanID(), "the send, a child of the create")
	require.Equal(t, webhook.SpanID(), send.SpanContext.SpanID(), "the webhook names the send span")

	taskID := ds[0].webhookID()
	apiAttrs, insertAttrs, sendAttrs := attributesOf(api), attributesOf(insert), attributesOf(send)
	for _, attrs := range []map[attribute.Key]string{apiAttrs, insertAttrs, sendAttrs} {
		require.Equal(t, taskID, attrs[tracing.AttrTaskID])
		require.Equal(t, acme.id.String(), attrs[tracing.AttrTenantID])
		require.Equal(t, "http://"+recv.Listener.Addr().String(), attrs[tracing.AttrTarget])
	}
	require.Equal(t, "201", apiAttrs["http.response.status_code"])
	require.Equal(t, "/v1/tasks", apiAttrs["http.route"])
	require.Equal(t, "1", sendAttrs[tracing.AttrAttempt])
	require.Equal(t, "200", sendAttrs["http.response.status_code"])

	// A malformed traceparent is ignored, as W3C Trace Context asks: the
	// create succeeds and starts a trace of its own.
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey,
		mustJSON(t, map[string]string{"url": recv.URL + "/hooks/other"}), map[string]string{"traceparent": "00-not-a-trace-01"})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	ds = recv.waitFor(t, 10*time.Second, "the second webhook", func(ds []delivery) bool { return len(ds) == 2 })
	require.NotEqual(t, client.TraceID(), spanContextOf(t, ds[1]).TraceID())
}

// With tracing off (no exporter), a create's traceparent still reaches its
// webhooks: a single create's, each task of a batch, each endpoint's of a
// publish and each occurrence of a schedule, all in the client's trace, each
// with a span id of its own; a task created without one sends none.
func TestTraceparentCarriedWithoutExporter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv, untraced := newReceiver(t), newReceiver(t)
	put, err := acme.client.PutTopicWithResponse(ctx, "orders", openapi.TopicRequest{Endpoints: []openapi.TopicEndpoint{
		{URL: recv.URL + "/billing"}, {URL: recv.URL + "/shipping"},
	}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, put.StatusCode(), string(put.Body))
	header := map[string]string{"traceparent": incoming, "tracestate": "vendor=opaque"}

	resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey,
		mustJSON(t, map[string]string{"url": recv.URL + "/single"}), header)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks/batch", acme.apiKey,
		mustJSON(t, map[string]any{"tasks": []map[string]string{{"url": recv.URL + "/batch/1"}, {"url": recv.URL + "/batch/2"}}}), header)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey,
		mustJSON(t, map[string]string{"topic": "orders"}), header)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey,
		mustJSON(t, map[string]string{"url": untraced.URL + "/none"}), nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))

	ds := recv.waitFor(t, 15*time.Second, "five webhooks", func(ds []delivery) bool { return len(ds) == 5 })
	client, _ := tracing.Parent(incoming, "")
	paths, spanIDs := map[string]bool{}, map[trace.SpanID]bool{client.SpanID(): true}
	for _, d := range ds {
		sc := spanContextOf(t, d)
		require.Equal(t, client.TraceID(), sc.TraceID(), d.path)
		require.True(t, sc.IsSampled(), "the client's sampling decision stands")
		require.False(t, spanIDs[sc.SpanID()], "%s: a span id of its own", d.path)
		spanIDs[sc.SpanID()] = true
		require.Equal(t, "vendor=opaque", d.header.Get("tracestate"))
		paths[d.path] = true
	}
	require.Equal(t, map[string]bool{"/single": true, "/batch/1": true, "/batch/2": true, "/billing": true, "/shipping": true}, paths)
	none := untraced.waitFor(t, 10*time.Second, "the untraced webhook", func(ds []delivery) bool { return len(ds) == 1 })
	require.Empty(t, none[0].header.Get("traceparent"), "no trace, no traceparent")

	// A schedule's occurrences continue the trace of its create, each with
	// a span id of its own.
	ticks := newReceiver(t)
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/schedules", acme.apiKey,
		mustJSON(t, map[string]string{"url": ticks.URL + "/tick", "cron": "@every 1s"}), header)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	ds = ticks.waitFor(t, 15*time.Second, "two occurrences", func(ds []delivery) bool { return len(ds) >= 2 })
	for _, d := range ds[:2] {
		sc := spanContextOf(t, d)
		require.Equal(t, client.TraceID(), sc.TraceID())
		require.False(t, spanIDs[sc.SpanID()], "an occurrence's span id of its own")
		spanIDs[sc.SpanID()] = true
	}
}

// otlpCollector is an OTLP/HTTP endpoint that keeps the trace exports it
// receives.
type otlpCollector struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
	types    []string
	received chan struct{}
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{received: make(chan struct{}, 1)}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if err != nil || len(body) == 0 {
			http.Error(w, "unreadable export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.requests = append(c.requests, req)
		c.types = append(c.types, r.Header.Get("Content-Type"))
		c.mu.Unlock()
		select {
		case c.received <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// spans are the names of the spans received, and the service names of
// their resources.
func (c *otlpCollector) spans() (names, services map[string]bool, types []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names, services = map[string]bool{}, map[string]bool{}
	for _, req := range c.requests {
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services[kv.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names[s.GetName()] = true
				}
			}
		}
	}
	return names, services, append([]string(nil), c.types...)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a node built from the environment
// exports its spans over OTLP/HTTP (protobuf) under OTEL_SERVICE_NAME, and
// flushes those still buffered as it stops. Not parallel: it sets the
// process's environment, which the exporter reads.
func TestTracingExportsOverOTLP(t *testing.T) {
	for _, tc := range []struct {
		name string
		// delay is OTEL_BSP_SCHEDULE_DELAY, in milliseconds: an hour
		// exports nothing before the node stops.
		delay string
		stop  bool
	}{
		{"exported as they end", "50", false},
		{"flushed at the stop", "3600000", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collector := newOTLPCollector(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
			t.Setenv("OTEL_SERVICE_NAME", "hookwheel-e2e")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", tc.delay)
			e := newEnv(t)
			n := e.startNode()
			acme := e.createTenant(n, "acme")
			recv := newReceiver(t)

			resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey,
				mustJSON(t, map[string]string{"url": recv.URL + "/hook"}), map[string]string{"traceparent": incoming})
			require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
			recv.waitFor(t, 10*time.Second, "the webhook", func(ds []delivery) bool { return len(ds) == 1 })
			if tc.stop {
				_ = acme.waitStatus(t, uuidOf(t, recv.snapshot()[0].webhookID()), openapi.TaskStatusDelivered, 10*time.Second)
				names, _, _ := collector.spans()
				require.Empty(t, names, "nothing exported before the stop")
				n.stop(t)
			}

			deadline := time.NewTimer(15 * time.Second)
			defer deadline.Stop()
			for {
				names, services, types := collector.spans()
				if names["POST /v1/tasks"] && names[tracing.SpanStoreInsert] && names[tracing.SpanSend] {
					require.Equal(t, map[string]bool{"hookwheel-e2e": true}, services)
					for _, ct := range types {
						require.Equal(t, "application/x-protobuf", ct)
					}
					return
				}
				select {
				case <-collector.received:
				case <-deadline.C:
					t.Fatalf("the collector has spans %v, want the create's, its insert's and its send's", names)
				}
			}
		})
	}
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}
