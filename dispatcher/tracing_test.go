package dispatcher

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

const storedParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// A webhook continues the trace its task was created in, with a span id of
// its own, whether or not this node makes spans; a task created outside any
// trace gets a traceparent only when it does (its send span's, a new trace).
func TestSendTraceContext(t *testing.T) {
	t.Parallel()
	stored, _ := tracing.Parent(storedParent, "")
	for _, tc := range []struct {
		name           string
		tracing, trace bool
	}{
		{"off, created in a trace", false, true},
		{"off, created outside", false, false},
		{"on, created in a trace", true, true},
		{"on, created outside", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exported := tracetest.NewInMemoryExporter()
			var tp trace.TracerProvider
			if tc.tracing {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exported))
				t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			b := setupSender(t, senderOptions{tracer: tp})
			c := b.claim()
			if tc.trace {
				c.TraceParent, c.TraceState = storedParent, "rojo=00f067aa0ba902b7"
			}
			b.claimed <- c
			got := receive(t, b.requests).header
			require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)

			header := got.Get("traceparent")
			if !tc.tracing && !tc.trace {
				require.Empty(t, header, "no trace, no traceparent")
				return
			}
			sent, ok := tracing.Parent(header, got.Get("tracestate"))
			require.True(t, ok, "traceparent %q", header)
			if tc.trace {
				require.Equal(t, stored.TraceID(), sent.TraceID(), "the task's trace")
				require.NotEqual(t, stored.SpanID(), sent.SpanID(), "a span of its own")
				require.Equal(t, "rojo=00f067aa0ba902b7", got.Get("tracestate"))
				require.True(t, sent.IsSampled())
			}
			if !tc.tracing {
				require.Empty(t, exported.GetSpans())
				return
			}
			spans := exported.GetSpans()
			require.Len(t, spans, 1)
			span := spans[0]
			require.Equal(t, tracing.SpanSend, span.Name)
			require.Equal(t, trace.SpanKindClient, span.SpanKind)
			require.Equal(t, sent.SpanID(), span.SpanContext.SpanID(), "the webhook names the send span")
			require.Equal(t, sent.TraceID(), span.SpanContext.TraceID())
			if tc.trace {
				require.Equal(t, stored.SpanID(), span.Parent.SpanID())
				require.True(t, span.Parent.IsRemote())
			} else {
				require.False(t, span.Parent.IsValid(), "a new trace")
			}
			attrs := map[string]string{}
			for _, kv := range span.Attributes {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			require.Equal(t, c.ID.String(), attrs[tracing.AttrTaskID])
			require.Equal(t, c.TenantID.String(), attrs[tracing.AttrTenantID])
			require.Equal(t, model.TargetKey(c.URL), attrs[tracing.AttrTarget])
			require.Equal(t, "1", attrs[tracing.AttrAttempt])
			require.Equal(t, "POST", attrs["http.request.method"])
			require.Equal(t, "127.0.0.1", attrs["server.address"])
			require.Equal(t, "200", attrs["http.response.status_code"])
		})
	}
}

// BenchmarkSendTracing is BenchmarkSenderFire with tracing off (the no-op
// provider) and on (an SDK provider batching to an exporter that drops
// what it gets), for tasks created outside a trace and in one: what a span
// per send and the webhook's traceparent cost, and that tracing off costs
// nothing for a task without a trace context.
func BenchmarkSendTracing(b *testing.B) {
	for _, tc := range []struct {
		name   string
		on     bool
		traced bool
	}{
		{"off", false, false},
		{"off/traced_task", false, true},
		{"on", true, false},
		{"on/traced_task", true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var tp trace.TracerProvider
			if tc.on {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			s := setupSender(b, senderOptions{senders: 64, maxPerTarget: 64, tracer: tp})
			tenant := uuid.New()
			done := make(chan struct{})
			go func() {
				for range s.requests {
				}
			}()
			go func() {
				for range s.settled {
				}
			}()
			go func() {
				for range s.records {
					done <- struct{}{}
				}
			}()
			b.ReportAllocs()
			for b.Loop() {
				c := s.claim()
				c.TenantID = tenant
				if tc.traced {
					c.TraceParent = storedParent
				}
				s.claimed <- c
				<-done
			}
		})
	}
}

// The claim's and the record's spans hold how many tasks they took, never
// which.
func TestBatchSpans(t *testing.T) {
	t.Parallel()
	exported := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exported))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := newSpans(tp)
	endBatch(s.claim(context.Background(), 5), 3, nil)
	endBatch(s.record(2), 2, nil)
	require.Nil(t, newSpans(nil).claim(context.Background(), 5), "no span with tracing off")
	require.Nil(t, newSpans(nil).record(5))

	spans := exported.GetSpans()
	require.Len(t, spans, 2)
	for i, want := range []struct {
		name        string
		count, done int
	}{{tracing.SpanClaim, 5, 3}, {tracing.SpanRecord, 2, 2}} {
		require.Equal(t, want.name, spans[i].Name)
		require.False(t, spans[i].Parent.IsValid(), "a root")
		attrs := map[string]string{}
		for _, kv := range spans[i].Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		require.Equal(t, strconv.Itoa(want.count), attrs[tracing.AttrTaskCount])
		require.Equal(t, strconv.Itoa(want.done), attrs[tracing.AttrTaskDone])
		require.Len(t, attrs, 2, "nothing per task")
	}
}
