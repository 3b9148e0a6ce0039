package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// traceRequests continues the trace a request's traceparent names (W3C
// Trace Context), and, when tp makes spans, wraps the request in a server
// span named by its route template ("POST /v1/tasks"), with the tenant and
// the task as attributes. A malformed traceparent is ignored, as the W3C
// specification asks: the request starts a new trace. With tracing off the
// request's context still carries the remote parent, which a task created
// by it stores (tasks.CreateWith) and its webhooks continue.
//
// Written here rather than taken from OpenTelemetry's contrib modules: their
// echo middleware (otelecho) stopped at v0.60.0, releases behind the otel
// version this module uses, and the span needs the tenant that only our
// authentication knows.
func traceRequests(tp trace.TracerProvider) echo.MiddlewareFunc {
	on := tracing.Enabled(tp)
	tracer := tracing.Tracer(tp)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			foldTraceHeaders(r.Header)
			ctx, found := tracing.Extract(r.Context(), r.Header)
			if !on {
				if found {
					c.SetRequest(r.WithContext(ctx))
				}
				return next(c)
			}
			route := c.Path()
			name := r.Method
			if route != "" {
				name += " " + route
			}
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route)))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if caller, ok := authenticatedCaller(c); ok && caller.Tenant != nil {
				span.SetAttributes(attribute.String(tracing.AttrTenantID, caller.Tenant.ID.String()))
			}
			if status >= 500 {
				span.SetStatus(codes.Error, strconv.Itoa(status))
			}
			return nil
		}
	}
}

// foldTraceHeaders leaves the trace context headers one line each, as the
// W3C specification reads them, before anything else does: tracestate
// lines are one list, joined; traceparent lines past the first make the
// context invalid, so the header is dropped and the request starts a new
// trace. The operations' generated parameter binding, which reads them too,
// would answer 400 to a header given twice.
func foldTraceHeaders(h http.Header) {
	if len(h["Traceparent"]) > 1 {
		delete(h, "Traceparent")
	}
	if states := h["Tracestate"]; len(states) > 1 {
		h["Tracestate"] = []string{strings.Join(states, ",")}
	}
}

// traceTask names the task a request created on its span (a no-op when
// the request is not traced).
func traceTask(c echo.Context, t *model.Task) {
	span := trace.SpanFromContext(c.Request().Context())
	if span.IsRecording() {
		span.SetAttributes(tracing.TaskAttributes(t.ID, t.TenantID, model.TargetKey(t.URL))...)
	}
}

// traceTaskCount puts how many tasks a request created on its span.
func traceTaskCount(c echo.Context, n int) {
	span := trace.SpanFromContext(c.Request().Context())
	if span.IsRecording() {
		span.SetAttributes(attribute.Int(tracing.AttrTaskCount, n))
	}
}
