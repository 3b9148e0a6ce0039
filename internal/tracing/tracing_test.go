package tracing_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hookwheel/hookwheel/internal/tracing"
)

const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// A request's traceparent is carried as given, and a malformed one is
// ignored (a new trace), never an error.
func TestExtractAndCarry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, traceparent, tracestate string
		wantParent, wantState         string
	}{
		{name: "valid", traceparent: valid, wantParent: valid},
		{name: "not sampled", traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
			wantParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"},
		{name: "with state", traceparent: valid, tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
			wantParent: valid, wantState: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{name: "state too long", traceparent: valid, tracestate: "k=" + strings.Repeat("v", 250) + ",l=" + strings.Repeat("w", 250) + ",m=" + strings.Repeat("x", 20),
			wantParent: valid},
		{name: "malformed state", traceparent: valid, tracestate: "not a state", wantParent: valid},
		{name: "none"},
		{name: "garbage", traceparent: "hello"},
		{name: "version ff", traceparent: "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{name: "zero trace id", traceparent: "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
		{name: "zero span id", traceparent: "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"},
		{name: "short trace id", traceparent: "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01"},
		{name: "upper case", traceparent: "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"},
		{name: "version 00 with more", traceparent: valid + "-extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			header := http.Header{}
			if tc.traceparent != "" {
				header.Set("traceparent", tc.traceparent)
			}
			if tc.tracestate != "" {
				header.Set("tracestate", tc.tracestate)
			}
			ctx, found := tracing.Extract(context.Background(), header)
			require.Equal(t, tc.traceparent != "", found)
			parent, state := tracing.Carried(ctx)
			require.Equal(t, tc.wantParent, parent)
			require.Equal(t, tc.wantState, state)
		})
	}
}

// What Carried stores, Parent reads back as the same remote span context.
func TestParentRoundTrip(t *testing.T) {
	t.Parallel()
	header := http.Header{}
	header.Set("traceparent", valid)
	header.Set("tracestate", "rojo=00f067aa0ba902b7")
	ctx, _ := tracing.Extract(context.Background(), header)
	in := trace.SpanContextFromContext(ctx)
	require.True(t, in.IsValid())

	sc, ok := tracing.Parent(tracing.Carried(trace.ContextWithSpanContext(context.Background(), in)))
	require.True(t, ok)
	require.True(t, sc.Equal(in), "%v != %v", sc, in)
	require.True(t, sc.IsRemote())

	for _, bad := range []string{"", "hello", valid[:54], "01" + valid[2:], strings.Replace(valid, "-", "_", 1), valid[:53] + "zz"} {
		_, ok := tracing.Parent(bad, "")
		require.False(t, ok, bad)
	}
}

// A span made without a tracer keeps its parent's trace, flags and state
// under a span id of its own.
func TestChildOf(t *testing.T) {
	t.Parallel()
	parent, ok := tracing.Parent(valid, "rojo=00f067aa0ba902b7")
	require.True(t, ok)
	seen := map[trace.SpanID]bool{}
	for range 100 {
		child := tracing.ChildOf(parent)
		require.True(t, child.IsValid())
		require.Equal(t, parent.TraceID(), child.TraceID())
		require.NotEqual(t, parent.SpanID(), child.SpanID())
		require.Equal(t, parent.TraceFlags(), child.TraceFlags())
		require.Equal(t, parent.TraceState().String(), child.TraceState().String())
		require.False(t, seen[child.SpanID()])
		seen[child.SpanID()] = true
	}
}

func TestEnabled(t *testing.T) {
	t.Parallel()
	require.False(t, tracing.Enabled(nil))
	require.False(t, tracing.Enabled(noop.NewTracerProvider()))
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	require.True(t, tracing.Enabled(tp))
}
