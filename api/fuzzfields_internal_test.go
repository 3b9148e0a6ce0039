package api

// Fuzz targets of single fields of a task request: its durations, URL and
// headers. Like those of fuzz_internal_test.go they drive a Server built by
// New short of the task service, so they need neither Postgres nor Redis.

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/tenants"
)

// FuzzDuration: a duration given in any field of a task request that takes
// one is accepted within that field's bounds or refused by that field's
// name; and an accepted duration, spelled as the API spells durations in
// its answers, reads back as the same duration in the same field. The same
// holds of a tenant's max_timeout and a signing-secret rotation's grace.
func FuzzDuration(f *testing.F) {
	for _, d := range []string{
		"30s", "1h", "1h30m", "500ms", "1.5s", "999ms", "1s", "0s", "0", "-1s", "2m", "2m0.000000001s", "100ms",
		"99ms", "168h", "168h0m0.000000001s", "8760h", "8761h", "1µs", "1us", "1μs", "1ns", ".5s", "5.s",
		"1h0m0s", "+3m", "9223372036854775807ns", "9223372036854775808ns", "2562047h47m16.854775807s", "1d", "30",
		" 30s", "30S", "", "1e3s",
	} {
		f.Add(d)
	}
	s, tenant := fuzzServer(f)
	limits, now := s.cfg.Limits, s.clock.Now()

	// The fields of a task request that are durations, how each is sent,
	// and what an accepted one becomes. A backoff out of order with the
	// other one's default is refused by either name.
	backoffs := []string{"retry.min_backoff", "retry.max_backoff"}
	fields := []struct {
		name      string
		send      func(string) map[string]any
		got       func(*model.Task) time.Duration
		lo, hi    time.Duration
		refusedBy []string
	}{
		{
			"timeout", func(d string) map[string]any { return map[string]any{"timeout": d} },
			func(t *model.Task) time.Duration { return t.Timeout },
			time.Second, min(limits.MaxTimeout, fuzzTenantMaxTimeout), []string{"timeout"},
		},
		{
			"delay", func(d string) map[string]any { return map[string]any{"delay": d} },
			func(t *model.Task) time.Duration { return t.RunAt.Sub(now) },
			0, limits.MaxScheduleAhead + time.Microsecond, []string{"delay"},
		},
		{
			"retry.min_backoff", func(d string) map[string]any { return map[string]any{"retry": map[string]string{"min_backoff": d}} },
			func(t *model.Task) time.Duration { return t.MinBackoff },
			100 * time.Millisecond, time.Hour, backoffs, // up to the default max_backoff
		},
		{
			"retry.max_backoff", func(d string) map[string]any { return map[string]any{"retry": map[string]string{"max_backoff": d}} },
			func(t *model.Task) time.Duration { return t.MaxBackoff },
			time.Second, 7 * 24 * time.Hour, backoffs, // from the default min_backoff
		},
	}

	f.Fuzz(func(t *testing.T, text string) {
		parsed, parseErr := time.ParseDuration(text)
		if parseErr == nil {
			again, err := time.ParseDuration(formatDuration(parsed))
			require.NoError(t, err, "%s spelled %q", parsed, formatDuration(parsed))
			require.Equal(t, parsed, again, "%s spelled %q", parsed, formatDuration(parsed))
		}

		for _, field := range fields {
			body := map[string]any{"url": "https://example.com/hook"}
			for k, v := range field.send(text) {
				body[k] = v
			}
			task, err := serveTask(s, tenant, mustJSON(t, body))
			if err != nil {
				requireRefusedBy(t, err, field.refusedBy...)
				continue
			}
			d := field.got(task)
			require.GreaterOrEqual(t, d, field.lo, "%s %q", field.name, text)
			require.LessOrEqual(t, d, field.hi, "%s %q", field.name, text)
			if !utf8.ValidString(text) {
				continue // JSON carried another text than this one
			}
			require.NoError(t, parseErr, "%s accepted %q, which is no Go duration", field.name, text)
			if field.name == "delay" {
				require.True(t, task.RunAt.Equal(model.RoundUpToMicro(now.Add(parsed))))
				continue
			}
			require.Equal(t, parsed, d)
			for k, v := range field.send(formatDuration(d)) {
				body[k] = v
			}
			again, err := serveTask(s, tenant, mustJSON(t, body))
			require.NoError(t, err, "%s %q spelled %q", field.name, text, formatDuration(d))
			require.Equal(t, d, field.got(again))
		}

		var fe fieldErrors
		maxTimeout := (&limitsUpdate{given: true, req: limitsRequest{MaxTimeout: &text}}).validate(&fe, limits.MaxTimeout).MaxTimeout
		switch {
		case len(fe) == 0 && maxTimeout == model.Unlimited:
			require.Zero(t, parsed, "only 0 lifts the limit: %q", text)
		case len(fe) == 0:
			require.GreaterOrEqual(t, maxTimeout, time.Second)
			require.LessOrEqual(t, maxTimeout, limits.MaxTimeout)
			require.Equal(t, parsed, maxTimeout)
		default:
			require.Equal(t, "limits.max_timeout", fe[0].Field)
		}

		fe = nil
		grace, ok := parseGrace(&fe, text)
		require.Equal(t, ok, len(fe) == 0)
		if ok {
			require.GreaterOrEqual(t, grace, time.Duration(0))
			require.LessOrEqual(t, grace, tenants.MaxGrace)
			again, ok := parseGrace(&fe, formatDuration(grace))
			require.True(t, ok)
			require.Equal(t, grace, again)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// FuzzTaskTarget: a task's URL and headers, as given (bytes JSON could not
// carry included), are accepted only if net/http sends them as given to a
// public host, and refused by the field at fault.
func FuzzTaskTarget(f *testing.F) {
	seeds := []struct{ url, name, value string }{
		{"https://example.com/hook", "X-Order", "42"},
		{"http://example.com:8080/a?b=c&d", "authorization", "Bearer abc"},
		{"https://bücher.example/ä", "X-Utf8", "caf\xc3\xa9"},
		{"https://example.com/", "X-Obs", "\xff\xfe"},
		{"https://example.com/", "X-Tab", "a\tb"},
		{"https://example.com/", "X-Blank", " "},
		{"https://example.com/", "X-Empty", ""},
		{"https://example.com/", "X-Crlf", "a\r\nX-Injected: 1"},
		{"https://example.com/", "X-Lf", "a\nb"},
		{"https://example.com/", "X-Nul", "a\x00b"},
		{"https://example.com/", "X-Del", "a\x7fb"},
		{"https://example.com/", "", "x"},
		{"https://example.com/", "X Space", "x"},
		{"https://example.com/", "X:Colon", "x"},
		{"https://example.com/", "Ünï", "x"},
		{"https://example.com/", "webhook-signature", "v1,x"},
		{"https://example.com/", "WEBHOOK-ID", "x"},
		{"https://example.com/", "Hookwheel-Signature", "x"},
		{"https://example.com/", "Hookwheel-Attempt", "1"},
		{"https://example.com/", "transfer-encoding", "chunked"},
		{"https://example.com/", "Host", "evil.example"},
		{"https://example.com/", "Content-Length", "0"},
		{"https://example.com/", "Idempotency-Key", "k"},
		{"https://example.com/", "Proxy-Authorization", "Basic x"},
		{"https://example.com/", "X-Long", strings.Repeat("v", 17<<10)},
		{"http://a<b>.example/", "X-A", "1"},
		{"http://a\"b.example/", "X-A", "1"},
		{"http://example.com:99999/", "X-A", "1"},
		{"http://example.com:0/", "X-A", "1"},
		{"http://example.com:/", "X-A", "1"},
		{"http://[::1]/", "X-A", "1"},
		{"http://[2606:4700::1111%25eth0]/", "X-A", "1"},
		{"http://169.254.169.254/latest/", "X-A", "1"},
		{"http://0x7f000001/", "X-A", "1"},
		{"http://localhost./", "X-A", "1"},
		{"https://user@example.com/", "X-A", "1"},
		{"https://example.com/#x", "X-A", "1"},
		{"https:example.com", "X-A", "1"},
		{"https:///x", "X-A", "1"},
		{"javascript:alert(1)", "X-A", "1"},
		{"https://example.com/\x00", "X-A", "1"},
		{"https://exa mple.com/", "X-A", "1"},
		{"https://example.com/%zz", "X-A", "1"},
		{"HTTPS://EXAMPLE.COM/", "X-A", "1"},
		{"https://xn--/", "X-A", "1"},
		{"https://\u00ad.example/", "X-A", "1"},
	}
	for _, sd := range seeds {
		f.Add(sd.url, sd.name, sd.value)
	}
	s, tenant := fuzzServer(f)
	const goodURL = "https://example.com/hook"

	f.Fuzz(func(t *testing.T, rawURL, name, value string) {
		now := s.clock.Now()
		task, err := s.checkTask((&taskRequest{URL: &rawURL}).request(), tenant, now)
		if err != nil {
			requireRefusedBy(t, err, "url")
		} else {
			requireValidURL(t, s, task.URL)
			requireSendable(t, task.Method, task.URL, nil, nil)
		}

		target := goodURL
		task, err = s.checkTask((&taskRequest{URL: &target, Headers: map[string]string{name: value}}).request(), tenant, now)
		if err != nil {
			requireRefusedBy(t, err, "headers."+name, "headers")
			return
		}
		require.Len(t, task.Headers, 1)
		requireSendable(t, task.Method, task.URL, task.Headers, nil)
		for got := range task.Headers {
			require.Equal(t, http.CanonicalHeaderKey(name), got)
			require.False(t, signing.IsSignatureHeader(got))
			require.False(t, forbiddenHeader(got), "%s is hookwheel's or the connection's", got)
		}
	})
}

// requireRefusedBy checks that err is a validation problem naming only the
// fields given.
func requireRefusedBy(t *testing.T, err error, fields ...string) {
	t.Helper()
	var p *problem
	require.True(t, errors.As(err, &p), "%v", err)
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.NotEmpty(t, p.fields)
	for _, fe := range p.fields {
		require.True(t, slices.Contains(fields, fe.Field), "refused by %q (%s), not by %v", fe.Field, fe.Message, fields)
	}
}
