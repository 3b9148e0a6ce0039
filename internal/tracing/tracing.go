// Package tracing is hookwheel's side of OpenTelemetry tracing: the names of
// its spans and their attributes, and the W3C trace context a task carries
// from the request that created it to the webhooks it sends. It exists so
// that the API, the store and the dispatcher name and carry traces alike.
// Building the tracer provider from the OTEL_* environment is the binary's
// (cmd/hookwheel/internal/app); every part takes the provider it is given,
// and none reads OpenTelemetry's global provider or propagator.
//
// Span names are few and fixed (an API span is named by its route
// template); what varies, a task's id, tenant and target, goes in
// attributes.
package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of hookwheel's tracers.
const Scope = "github.com/hookwheel/hookwheel"

// The names of hookwheel's own spans; the API's are "METHOD /route".
const (
	// SpanStoreInsert is a create's insert, tasks and publishes alike.
	SpanStoreInsert = "hookwheel.store.insert"
	// SpanClaim is one claim statement, for a batch of tasks.
	SpanClaim = "hookwheel.claim"
	// SpanSend is one attempt's webhook request, a child of the context its
	// task was created in.
	SpanSend = "hookwheel.send"
	// SpanRecord is one write of a batch of attempts.
	SpanRecord = "hookwheel.record"
)

// The attributes of hookwheel's spans.
const (
	AttrTaskID    = "hookwheel.task.id"
	AttrTenantID  = "hookwheel.tenant.id"
	AttrTarget    = "hookwheel.target" // model.TargetKey: scheme, host and port, never a path
	AttrAttempt   = "hookwheel.attempt"
	AttrTaskCount = "hookwheel.task.count" // the tasks of a batch, a claim or a record
	AttrTaskDone  = "hookwheel.task.done"  // of a claim's or a record's, those it took or wrote
)

// TaskAttributes are the attributes naming one task: its id, its tenant's
// and its target (a model.TargetKey).
func TaskAttributes(id, tenant uuid.UUID, target string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(AttrTaskID, id.String()),
		attribute.String(AttrTenantID, tenant.String()),
		attribute.String(AttrTarget, target),
	}
}

// Enabled reports whether tp makes spans: nil and the no-op provider do
// not. A part handed a provider that does not skips its spans' work
// altogether.
func Enabled(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return false
	}
	return true
}

// Tracer is tp's tracer for hookwheel's spans; nil tp is the no-op one.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Scope)
}

// MaxTraceState bounds the tracestate a task keeps, the length the W3C
// specification asks every participant to pass on: a longer one is
// dropped, which the specification allows, and the trace goes on without it.
const MaxTraceState = 512

// Extract is ctx with the trace context that header's traceparent and
// tracestate name (W3C Trace Context, the one propagation format hookwheel
// speaks) as its remote parent, or ctx itself when header has no valid
// traceparent: the W3C specification has a receiver of a malformed one
// start a new trace, never refuse the request. found says header has a
// traceparent at all, valid or not.
func Extract(ctx context.Context, header http.Header) (_ context.Context, found bool) {
	if len(header["Traceparent"]) == 0 {
		return ctx, false
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(header)), true
}

// Inject sets header's traceparent and tracestate to the trace context of
// ctx's span; it sets nothing when ctx is in no trace.
func Inject(ctx context.Context, header http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(header))
}

// Carried is the trace context of ctx's span as a task stores it, its
// traceparent and tracestate, or "" and "" when ctx is in no trace.
func Carried(ctx context.Context) (parent, state string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	parent, state = carrier["traceparent"], carrier["tracestate"]
	if len(state) > MaxTraceState {
		state = ""
	}
	return parent, state
}

// Parent is the span context a task's stored trace context names (as
// Carried wrote it), the remote parent of its sends; ok is false when the
// task has none, or one that does not parse.
func Parent(traceparent, tracestate string) (sc trace.SpanContext, ok bool) {
	// version 00: "00-" 32 hex digits "-" 16 hex digits "-" 2 hex digits.
	const length = 55
	if len(traceparent) != length || traceparent[:3] != "00-" || traceparent[35] != '-' || traceparent[52] != '-' {
		return trace.SpanContext{}, false
	}
	traceID, err := trace.TraceIDFromHex(traceparent[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	spanID, err := trace.SpanIDFromHex(traceparent[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	flags, err := strconv.ParseUint(traceparent[53:], 16, 8)
	if err != nil {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.TraceFlags(flags), Remote: true}
	if tracestate != "" {
		// A state that no longer parses is dropped, as on the way in.
		cfg.TraceState, _ = trace.ParseTraceState(tracestate)
	}
	sc = trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// ChildOf is a span context for a span of parent's made without a tracer
// (tracing off): parent's trace, flags and state, and a new random span
// id, so that a webhook continues its task's trace even when this node
// exports nothing.
func ChildOf(parent trace.SpanContext) trace.SpanContext {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return parent.WithSpanID(id).WithRemote(false)
}
