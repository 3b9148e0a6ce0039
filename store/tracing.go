package store

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/tracing"
)

// startInsertSpan starts the span of one task insert (operation names its
// statement) as a child of ctx's span, through that span's own provider:
// the API's when the insert serves a request, an application's own when
// it runs in its transaction (package txenqueue). Under no recording span
// it starts none and returns a nil span, so that an insert made outside a
// trace, or with tracing off, costs nothing. One span per insert, not per
// statement: reading back the tasks that hold reused idempotency keys is
// within it.
func startInsertSpan(ctx context.Context, operation string, tasks int) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(tracing.Scope).Start(ctx, tracing.SpanStoreInsert,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("db.system.name", "postgresql"),
			attribute.String("db.operation.name", operation),
			attribute.Int(tracing.AttrTaskCount, tasks),
		))
}

// endInsertSpan ends a span startInsertSpan started, if it started one,
// with the insert's error.
func endInsertSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "insert failed")
	}
	span.End()
}

// nullIfEmpty is s, or NULL for an empty s.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
