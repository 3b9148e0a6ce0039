package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/openapi"
)

// taskBody is a valid task request with the given members added or replaced.
func taskBody(t *testing.T, members map[string]any) string {
	t.Helper()
	m := map[string]any{"url": "https://example.com/hook"}
	for k, v := range members {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

func TestCreateTaskValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	now := h.Clock.Now()

	withHeader := func(name, value string) string {
		return taskBody(t, map[string]any{"headers": map[string]string{name: value}})
	}
	cases := []struct {
		name           string
		body           string
		idempotencyKey string
		want           int
		field          string // for 422
	}{
		// url
		{name: "missing url", body: `{"method": "POST"}`, want: 422, field: "url"},
		{name: "empty url", body: taskBody(t, map[string]any{"url": ""}), want: 422, field: "url"},
		{name: "relative url", body: taskBody(t, map[string]any{"url": "/hooks/x"}), want: 422, field: "url"},
		{name: "scheme-relative url", body: taskBody(t, map[string]any{"url": "//example.com/x"}), want: 422, field: "url"},
		{name: "ftp url", body: taskBody(t, map[string]any{"url": "ftp://example.com/x"}), want: 422, field: "url"},
		{name: "url with credentials", body: taskBody(t, map[string]any{"url": "https://user:pass@example.com/x"}), want: 422, field: "url"},
		{name: "url without host", body: taskBody(t, map[string]any{"url": "https:///x"}), want: 422, field: "url"},
		{name: "unparsable url", body: taskBody(t, map[string]any{"url": "https://exa mple.com/%zz"}), want: 422, field: "url"},
		{name: "url with control character", body: taskBody(t, map[string]any{"url": "https://example.com/\u0000"}), want: 422, field: "url"},
		{name: "url over 4096 characters", body: taskBody(t, map[string]any{"url": "https://example.com/" + strings.Repeat("a", 4096)}), want: 422, field: "url"},
		{name: "url as a number", body: `{"url": 42}`, want: 422, field: "url"},
		{name: "url with port 0", body: taskBody(t, map[string]any{"url": "http://example.com:0/x"}), want: 422, field: "url"},
		{name: "url with port 65536", body: taskBody(t, map[string]any{"url": "http://example.com:65536/x"}), want: 422, field: "url"},
		{name: "url host no Host header can carry", body: taskBody(t, map[string]any{"url": "http://a<b>.example/x"}), want: 422, field: "url"},
		// method
		{name: "method FOO", body: taskBody(t, map[string]any{"method": "FOO"}), want: 422, field: "method"},
		{name: "method lowercase", body: taskBody(t, map[string]any{"method": "post"}), want: 422, field: "method"},
		// headers
		{name: "header Host", body: withHeader("Host", "evil.example"), want: 422, field: "headers.Host"},
		{name: "header Content-Length", body: withHeader("Content-Length", "5"), want: 422, field: "headers.Content-Length"},
		{name: "header Connection", body: withHeader("Connection", "close"), want: 422, field: "headers.Connection"},
		{name: "header Transfer-Encoding", body: withHeader("Transfer-Encoding", "chunked"), want: 422, field: "headers.Transfer-Encoding"},
		{name: "header webhook-id", body: withHeader("webhook-id", "x"), want: 422, field: "headers.webhook-id"},
		{name: "header Webhook-Signature", body: withHeader("Webhook-Signature", "v1,x"), want: 422, field: "headers.Webhook-Signature"},
		{name: "header Hookwheel-Attempt", body: withHeader("Hookwheel-Attempt", "1"), want: 422, field: "headers.Hookwheel-Attempt"},
		{name: "header Idempotency-Key", body: withHeader("Idempotency-Key", "k"), want: 422, field: "headers.Idempotency-Key"},
		{name: "header lowercase host", body: withHeader("host", "evil.example"), want: 422, field: "headers.host"},
		{name: "invalid header name", body: withHeader("bad header", "x"), want: 422, field: "headers.bad header"},
		{name: "header value with newline", body: withHeader("X-Test", "a\nInjected: yes"), want: 422, field: "headers.X-Test"},
		{name: "header value with NUL", body: withHeader("X-Test", "a\u0000b"), want: 422, field: "headers.X-Test"},
		{name: "header twice in other letters", body: `{"url": "https://example.com/hook", "headers": {"X-Token": "a", "x-token": "b"}}`, want: 422, field: "headers.x-token"},
		{name: "header twice with an underscore", body: `{"url": "https://example.com/hook", "headers": {"X-Token": "a", "X_Token": "b"}}`, want: 422, field: "headers.X_Token"},
		{name: "headers not an object", body: `{"url": "https://example.com/hook", "headers": ["X-A"]}`, want: 422, field: "headers"},
		// run_at and delay
		{name: "run_at not RFC 3339", body: taskBody(t, map[string]any{"run_at": "tomorrow at noon"}), want: 422, field: "run_at"},
		{name: "run_at without zone", body: taskBody(t, map[string]any{"run_at": "2030-01-01T10:00:00"}), want: 422, field: "run_at"},
		{name: "run_at beyond the horizon", body: taskBody(t, map[string]any{"run_at": now.Add(365*24*time.Hour + time.Second).Format(time.RFC3339)}), want: 422, field: "run_at"},
		{name: "run_at and delay", body: taskBody(t, map[string]any{"run_at": now.Add(time.Hour).Format(time.RFC3339), "delay": "1m"}), want: 422, field: "run_at"},
		{name: "delay x", body: taskBody(t, map[string]any{"delay": "x"}), want: 422, field: "delay"},
		{name: "delay without unit", body: taskBody(t, map[string]any{"delay": "30"}), want: 422, field: "delay"},
		{name: "negative delay", body: taskBody(t, map[string]any{"delay": "-1s"}), want: 422, field: "delay"},
		{name: "delay beyond the horizon", body: taskBody(t, map[string]any{"delay": "8761h"}), want: 422, field: "delay"},
		{name: "delay as a number", body: taskBody(t, map[string]any{"delay": 30}), want: 422, field: "delay"},
		// timeout
		{name: "timeout 0s", body: taskBody(t, map[string]any{"timeout": "0s"}), want: 422, field: "timeout"},
		{name: "timeout 2h", body: taskBody(t, map[string]any{"timeout": "2h"}), want: 422, field: "timeout"},
		{name: "timeout above the 5m default maximum", body: taskBody(t, map[string]any{"timeout": "5m1s"}), want: 422, field: "timeout"},
		{name: "timeout 999ms", body: taskBody(t, map[string]any{"timeout": "999ms"}), want: 422, field: "timeout"},
		{name: "timeout not a duration", body: taskBody(t, map[string]any{"timeout": "soon"}), want: 422, field: "timeout"},
		// retry
		{name: "max_attempts 0", body: taskBody(t, map[string]any{"retry": map[string]any{"max_attempts": 0}}), want: 422, field: "retry.max_attempts"},
		{name: "max_attempts 101", body: taskBody(t, map[string]any{"retry": map[string]any{"max_attempts": 101}}), want: 422, field: "retry.max_attempts"},
		{name: "max_attempts not an integer", body: taskBody(t, map[string]any{"retry": map[string]any{"max_attempts": 1.5}}), want: 422, field: "retry.max_attempts"},
		{name: "max_attempts a string", body: taskBody(t, map[string]any{"retry": map[string]any{"max_attempts": "3"}}), want: 422, field: "retry.max_attempts"},
		{name: "min_backoff 10ms", body: taskBody(t, map[string]any{"retry": map[string]any{"min_backoff": "10ms"}}), want: 422, field: "retry.min_backoff"},
		{name: "min_backoff not a duration", body: taskBody(t, map[string]any{"retry": map[string]any{"min_backoff": "1 second"}}), want: 422, field: "retry.min_backoff"},
		{name: "max_backoff below min_backoff", body: taskBody(t, map[string]any{"retry": map[string]any{"min_backoff": "10s", "max_backoff": "5s"}}), want: 422, field: "retry.max_backoff"},
		{name: "max_backoff below default min_backoff", body: taskBody(t, map[string]any{"retry": map[string]any{"max_backoff": "500ms"}}), want: 422, field: "retry.max_backoff"},
		{name: "max_backoff over a week", body: taskBody(t, map[string]any{"retry": map[string]any{"max_backoff": "169h"}}), want: 422, field: "retry.max_backoff"},
		// shape of the document
		{name: "unknown field runAt", body: `{"url": "https://example.com/hook", "runAt": "2030-01-01T00:00:00Z"}`, want: 422, field: "runAt"},
		{name: "unknown field inside retry", body: `{"url": "https://example.com/hook", "retry": {"max_attemps": 3}}`, want: 422, field: "retry.max_attemps"},
		{name: "body not a string", body: `{"url": "https://example.com/hook", "body": {"order": 42}}`, want: 422, field: "body"},
		{name: "body a number", body: `{"url": "https://example.com/hook", "body": 42}`, want: 422, field: "body"},
		{name: "body with invalid UTF-8", body: "{\"url\": \"https://example.com/hook\", \"body\": \"a\xff\xfeb\"}", want: 422, field: "body"},
		{name: "body with a lone high surrogate", body: `{"url": "https://example.com/hook", "body": "a\ud83db"}`, want: 422, field: "body"},
		{name: "body with a lone low surrogate", body: `{"url": "https://example.com/hook", "body": "\ude00"}`, want: 422, field: "body"},
		{name: "body with a high surrogate at the end", body: `{"url": "https://example.com/hook", "body": "\ud83d"}`, want: 422, field: "body"},
		{name: "body with surrogates reversed", body: `{"url": "https://example.com/hook", "body": "\ude00\ud83d"}`, want: 422, field: "body"},
		{name: "malformed JSON", body: `{"url": "https://example.com/hook"`, want: 400},
		{name: "not JSON at all", body: `url=https://example.com/hook`, want: 400},
		{name: "empty body", body: ``, want: 400},
		{name: "whitespace body", body: " \n\t ", want: 400},
		{name: "two JSON values", body: `{"url": "https://example.com/a"} {"url": "https://example.com/b"}`, want: 400},
		{name: "trailing garbage", body: `{"url": "https://example.com/a"} x`, want: 400},
		{name: "array", body: `[{"url": "https://example.com/a"}]`, want: 400},
		{name: "null", body: `null`, want: 422, field: "url"},
		{name: "string", body: `"https://example.com/a"`, want: 400},
		// Idempotency-Key
		{name: "idempotency key of 256 characters", body: taskBody(t, nil), idempotencyKey: strings.Repeat("k", 256), want: 422, field: "Idempotency-Key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.postTask(tn, tc.body, tc.idempotencyKey)
			require.Less(t, resp.Status, 500, "bad input got a server error: %s", resp.Body)
			if tc.field != "" {
				require.Equal(t, http.StatusUnprocessableEntity, tc.want)
				requireFieldProblem(t, resp, tc.field)
				return
			}
			p := requireProblem(t, resp, tc.want)
			require.Equal(t, problemTypePrefix+"malformed-json", p.Type)
		})
	}

	t.Run("every invalid field is reported", func(t *testing.T) {
		t.Parallel()
		resp := h.postTask(tn, taskBody(t, map[string]any{
			"url": "ftp://example.com", "method": "FOO", "delay": "x", "timeout": "0s",
		}), strings.Repeat("k", 256))
		p := requireProblem(t, resp, http.StatusUnprocessableEntity)
		var fields []string
		for _, e := range p.Errors {
			fields = append(fields, e.Field)
		}
		require.ElementsMatch(t, []string{"Idempotency-Key", "url", "method", "delay", "timeout"}, fields)
	})

	// No invalid request created anything.
	resp := h.do(http.MethodGet, "/v1/tasks", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.JSONEq(t, `{"data": []}`, string(resp.Body))
}

// TestCreateTaskValidBoundaries pins the accepted side of each limit the
// validation table tests from the other side.
func TestCreateTaskValidBoundaries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	now := h.Clock.Now()
	cases := []struct {
		name    string
		members map[string]any
		key     string
	}{
		{"http url", map[string]any{"url": "http://example.com/x?q=1"}, ""},
		{"url with port 65535", map[string]any{"url": "https://example.com:65535/x"}, ""},
		{"url with an IDN host", map[string]any{"url": "https://bücher.example/x"}, ""},
		{"every method", map[string]any{"method": "PATCH"}, ""},
		{"ordinary headers", map[string]any{"headers": map[string]string{"Authorization": "Bearer x", "X-Webhookish": "1", "Content-Type": "application/json"}}, ""},
		{"run_at exactly at the horizon", map[string]any{"run_at": now.Add(365 * 24 * time.Hour).Format(time.RFC3339)}, ""},
		{"delay 0s", map[string]any{"delay": "0s"}, ""},
		{"timeout 1s", map[string]any{"timeout": "1s"}, ""},
		{"timeout 5m, the default maximum", map[string]any{"timeout": "5m"}, ""},
		{"max_attempts 1", map[string]any{"retry": map[string]any{"max_attempts": 1}}, ""},
		{"max_attempts 100", map[string]any{"retry": map[string]any{"max_attempts": 100}}, ""},
		{"min_backoff 100ms", map[string]any{"retry": map[string]any{"min_backoff": "100ms"}}, ""},
		{"max_backoff equal to min_backoff", map[string]any{"retry": map[string]any{"min_backoff": "5s", "max_backoff": "5s"}}, ""},
		{"idempotency key of 255 characters", nil, strings.Repeat("k", 255)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.postTask(tn, taskBody(t, tc.members), tc.key)
			require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		})
	}
}

// TestCreateTaskIdempotencyKeyBytes: the header can carry bytes that JSON
// cannot; they must not reach Postgres as a server error.
func TestCreateTaskIdempotencyKeyBytes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	resp := h.postTask(tn, taskBody(t, nil), "key-\xff\xfe")
	requireFieldProblem(t, resp, "Idempotency-Key")

	// A UTF-8 key is a key like any other.
	resp = h.postTask(tn, taskBody(t, nil), "clé-1")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
}

// TestCreateTaskBodyExact: whatever valid JSON spells a body with, the
// bytes stored are the ones it means.
func TestCreateTaskBodyExact(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	cases := []struct{ name, literal, want string }{
		{"escaped pair", `"\ud83d\ude00"`, "\U0001F600"},
		{"raw UTF-8", "\"caf\u00e9 \xf0\x9f\x98\x80\"", "café \U0001F600"},
		{"escaped backslash before u", `"\\ud83d"`, `\ud83d`},
		{"the replacement character itself", `"\ufffd"`, "\ufffd"},
		{"control escapes", `"\u0000\n\t\""`, "\x00\n\t\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.postTask(tn, `{"url": "https://example.com/hook", "body": `+tc.literal+`}`, "")
			require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
			var task openapi.Task
			require.NoError(t, json.Unmarshal(resp.Body, &task))
			require.Equal(t, tc.want, task.Body)
		})
	}
}

func TestCreateTaskBodyLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Limits.MaxBody = 1024 })
	tn := h.createTenant("acme")

	t.Run("body at the limit", func(t *testing.T) {
		t.Parallel()
		resp := h.postTask(tn, taskBody(t, map[string]any{"body": strings.Repeat("a", 1024)}), "")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	})
	t.Run("body one byte over the limit", func(t *testing.T) {
		t.Parallel()
		resp := h.postTask(tn, taskBody(t, map[string]any{"body": strings.Repeat("a", 1025)}), "")
		requireFieldProblem(t, resp, "body")
	})
	t.Run("body limit counts bytes, not escapes", func(t *testing.T) {
		t.Parallel()
		// 1,024 bytes spelled as \u0001 escapes: six times as long on the wire.
		resp := h.postTask(tn, `{"url": "https://example.com/hook", "body": "`+strings.Repeat(`\u0001`, 1024)+`"}`, "")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	})

	// The request limit is 4×1024 + 64 KiB; 100 KiB is far over it.
	huge := taskBody(t, map[string]any{"body": strings.Repeat("a", 100<<10)})
	t.Run("request far over the limit", func(t *testing.T) {
		t.Parallel()
		resp := h.postTask(tn, huge, "")
		p := requireProblem(t, resp, http.StatusRequestEntityTooLarge)
		require.Equal(t, problemTypePrefix+"too-large", p.Type)
	})
	t.Run("request far over the limit, chunked", func(t *testing.T) {
		t.Parallel()
		// Hiding the length makes the client send it chunked: the limit
		// must hold while the body is read, not only on Content-Length.
		resp := h.do(http.MethodPost, "/v1/tasks", tn.APIKey, io.MultiReader(bytes.NewReader([]byte(huge))), nil)
		p := requireProblem(t, resp, http.StatusRequestEntityTooLarge)
		require.Equal(t, problemTypePrefix+"too-large", p.Type)
	})
	t.Run("tenant creation far over the limit", func(t *testing.T) {
		t.Parallel()
		resp := h.do(http.MethodPost, "/v1/admin/tenants", adminToken,
			strings.NewReader(`{"name": "`+strings.Repeat("a", 100<<10)+`"}`), nil)
		requireProblem(t, resp, http.StatusRequestEntityTooLarge)
	})
}
