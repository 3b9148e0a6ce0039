package dispatcher

import (
	"context"
	"net"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// spans makes the dispatcher's spans, when its tracer provider makes any:
// one per claim statement and one per write of attempts, each with the
// number of tasks it holds (a link or attribute per task would grow with
// the batch), and one per attempt's send, which names its task. With
// tracing off nothing is started, and a send costs nothing more unless its
// task was created in a trace: its webhook then still continues it.
type spans struct {
	on     bool
	tracer trace.Tracer
}

func newSpans(tp trace.TracerProvider) spans {
	return spans{on: tracing.Enabled(tp), tracer: tracing.Tracer(tp)}
}

// claim starts the span of one claim statement for n fired tasks; nil when
// tracing is off. A claim serves tasks of many traces, so it is a trace's
// root of its own.
func (s spans) claim(ctx context.Context, n int) trace.Span {
	if !s.on {
		return nil
	}
	_, span := s.tracer.Start(ctx, tracing.SpanClaim, trace.WithNewRoot(),
		trace.WithAttributes(attribute.Int(tracing.AttrTaskCount, n)))
	return span
}

// record starts the span of one write of n attempts; nil when tracing is
// off. A root, as claim's.
func (s spans) record(n int) trace.Span {
	if !s.on {
		return nil
	}
	_, span := s.tracer.Start(context.Background(), tracing.SpanRecord, trace.WithNewRoot(),
		trace.WithAttributes(attribute.Int(tracing.AttrTaskCount, n)))
	return span
}

// endBatch ends a claim or record span with the tasks it took or wrote and
// its error.
func endBatch(span trace.Span, done int, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Int(tracing.AttrTaskDone, done))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "statement failed")
	}
	span.End()
}

// send starts the span of c's attempt to target (a model.TargetKey), a
// child of the trace context c's task was created in, or a new trace's
// root when it has none. ctx is returned with the context the webhook's
// traceparent names (see send); span is nil when tracing is off, and then
// a task created in a trace is given a span id of its own under that
// trace, so that its receiver still continues it.
func (s spans) send(ctx context.Context, c *model.ClaimedTask, target string) (context.Context, trace.Span) {
	parent, traced := tracing.Parent(c.TraceParent, c.TraceState)
	if !s.on {
		if !traced {
			return ctx, nil
		}
		return trace.ContextWithSpanContext(ctx, tracing.ChildOf(parent)), nil
	}
	if traced {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	host, port := hostPortOf(target)
	attrs := append(tracing.TaskAttributes(c.ID, c.TenantID, target),
		attribute.Int(tracing.AttrAttempt, c.Attempt),
		attribute.String("http.request.method", c.Method),
		attribute.String("server.address", host),
		attribute.Int("server.port", port),
	)
	return s.tracer.Start(ctx, tracing.SpanSend, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSend ends a send's span with its answer's status, or the error that
// kept it from one.
func endSend(span trace.Span, statusCode int, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, "no answer")
	default:
		span.SetAttributes(attribute.Int("http.response.status_code", statusCode))
		if statusCode >= 400 {
			span.SetStatus(codes.Error, "error status")
		}
	}
	span.End()
}

// hostPortOf splits a target key, "https://example.com:443".
func hostPortOf(target string) (host string, port int) {
	_, hostPort, _ := strings.Cut(target, "://")
	host, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		return hostPort, 0
	}
	port, _ = strconv.Atoi(p)
	return host, port
}
