package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracingFlushTimeout bounds the export of the spans still buffered when a
// node stops.
const tracingFlushTimeout = 5 * time.Second

// TracerProviderFromEnv is the tracer provider the OTEL_* environment asks
// for, as getenv reads it (os.Getenv: the exporter and the SDK read the
// process's environment themselves), and the function that flushes and
// stops it (nil when there is nothing to stop). Spans are exported over OTLP/HTTP
// when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
// set, or OTEL_TRACES_EXPORTER is otlp (to the exporter's default,
// http://localhost:4318); otherwise, or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none, no span is made at all (the no-op provider,
// which the API and the dispatcher recognise and skip).
//
// The exporter and the SDK read the rest of the standard variables
// themselves: the endpoints, OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE and their _TRACES_ forms; OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on); OTEL_BSP_*.
// The resource is service.name hookwheel, then what OTEL_RESOURCE_ATTRIBUTES
// and OTEL_SERVICE_NAME say (which win), then the SDK's own attributes.
//
// OTEL_EXPORTER_OTLP_PROTOCOL (or _TRACES_PROTOCOL) picks the exporter:
// http/protobuf (the default, port 4318) or grpc (port 4317); http/json,
// which OpenTelemetry's Go exporters do not speak, and an exporter other
// than otlp or none stop the node at start rather than being ignored.
func TracerProviderFromEnv(ctx context.Context, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	off := noop.NewTracerProvider()
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return off, nil, nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	endpoint := firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch {
	case exporter == "none":
		return off, nil, nil
	case exporter == "" && endpoint == "":
		return off, nil, nil
	case exporter != "" && exporter != "otlp":
		return nil, nil, fmt.Errorf("OTEL_TRACES_EXPORTER: hookwheel exports spans over otlp, or none; got %q", exporter)
	}
	protocolVar := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocol := strings.TrimSpace(getenv(protocolVar))
	if protocol == "" {
		protocolVar = "OTEL_EXPORTER_OTLP_PROTOCOL"
		protocol = strings.TrimSpace(getenv(protocolVar))
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("%s: hookwheel exports spans over OTLP with http/protobuf or grpc, got %q", protocolVar, protocol)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later detectors win: the environment over the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "hookwheel")),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// firstSet is the value of the first of names that getenv has set.
func firstSet(getenv func(string) string, names ...string) string {
	for _, name := range names {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
	}
	return ""
}
