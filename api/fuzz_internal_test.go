package api

// Fuzz targets of request decoding and validation. They drive what the
// handlers do before they call the task service (decodeTask, decodeJSON and
// validateSchedule, decodeBatch and batchItemTask) on a Server built by New,
// and render refusals with the server's own error handler, so they need
// neither Postgres nor Redis.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/schedule"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// fuzzTenantMaxTimeout is the tenant's max_timeout, below the node's, so
// that a task's timeout is bounded by the lesser of the two.
const fuzzTenantMaxTimeout = 2 * time.Minute

// fuzzServer returns a Server as New builds it, with the SSRF guard on, and
// the calling tenant. The task and tenant services are never called: the
// targets stop where the handlers would call them.
func fuzzServer(t testing.TB) (*Server, *model.Tenant) {
	t.Helper()
	s, err := New(Config{
		Tasks:   new(tasks.Service),
		Tenants: new(tenants.Service),
		Guard:   netguard.New(netguard.Config{}),
		// Not a whole microsecond, so that due times are rounded as in
		// production. The clock never moves: every call sees the same now.
		Clock:  clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 123_456_789, time.UTC)),
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	return s, &model.Tenant{ID: uuid.New(), Name: "acme", Limits: model.Limits{MaxTimeout: fuzzTenantMaxTimeout}}
}

// serve runs handle on a request carrying body, as the route path would,
// and renders its error as the server does. It returns the error, and the
// recorded answer when there was one.
func serve(s *Server, path string, body []byte, handle func(c echo.Context) error) (*httptest.ResponseRecorder, error) {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	rec := httptest.NewRecorder()
	c := s.echo.NewContext(req, rec)
	err := handle(c)
	if err != nil {
		s.echo.HTTPErrorHandler(err, c)
	}
	return rec, err
}

// requireProblem checks that a refusal is the client's fault and reads as
// RFC 9457 problem+json.
func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, path string) {
	t.Helper()
	require.GreaterOrEqual(t, rec.Code, 400, rec.Body.String())
	require.Less(t, rec.Code, 500, rec.Body.String())
	require.Equal(t, "application/problem+json", rec.Header().Get(echo.HeaderContentType))
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	var p openapi.Problem
	require.NoError(t, dec.Decode(&p))
	requireProblemFields(t, p, rec.Code)
	require.NotNil(t, p.Instance)
	require.Equal(t, path, *p.Instance)
}

func requireProblemFields(t *testing.T, p openapi.Problem, status int) {
	t.Helper()
	require.Equal(t, status, p.Status)
	slug, ok := strings.CutPrefix(p.Type, problemTypePrefix)
	require.True(t, ok, "type %q", p.Type)
	require.NotEmpty(t, slug)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Detail)
	if status == http.StatusUnprocessableEntity {
		require.NotEmpty(t, p.Errors, "a validation problem names its fields")
	}
	for _, fe := range p.Errors {
		// fe.Field may be empty: it is the member's name in the request,
		// and {"": 0} names a member "".
		require.NotEmpty(t, fe.Message, "field %q", fe.Field)
	}
}

// taskSeeds are bodies of POST /v1/tasks: what clients send, and the edges
// of every rule of the task check (tasks.Rules.Check).
func taskSeeds() []string {
	return []string{
		`{"url":"https://example.com/hook"}`,
		`{"url":"https://example.com/hook","method":"PUT","headers":{"X-Order":"42","Authorization":"Bearer t"},"body":"{\"id\":1}","delay":"30s","timeout":"10s","retry":{"max_attempts":5,"min_backoff":"500ms","max_backoff":"1h"}}`,
		`{"url":"http://[2606:4700::1111]:8443/a?b=c","run_at":"2026-11-22T10:00:00.5+01:00"}`,
		`{"url":"https://xn--bcher-kva.example/ü","body":"caf\u00e9 \ud83d\ude00"}`,
		`{"url":"https://example.com/hook","headers":{"x-a":"1","X-A":"2"}}`,
		`{"url":"https://example.com/hook","headers":{"Webhook-Id":"x"}}`,
		`{"url":"https://example.com/hook","headers":{"X-Test":"a\r\nInjected: yes"}}`,
		`{"url":"https://example.com/hook","headers":{"X-Test":" padded\t"}}`,
		`{"url":"https://example.com/hook","headers":{"bad header":"x"}}`,
		`{"url":"http://a<b>.example/"}`,
		`{"url":"http://example.com:99999/"}`,
		`{"url":"http://example.com:0/"}`,
		`{"url":"http://127.0.0.1/"}`,
		`{"url":"http://0x7f.1/"}`,
		`{"url":"https://user:pass@example.com/"}`,
		`{"url":"https://example.com/#frag"}`,
		`{"url":"ftp://example.com/"}`,
		`{"url":"//example.com/"}`,
		`{"url":"https://example.com/","delay":"8760h"}`,
		`{"url":"https://example.com/","delay":"8760h0m0.000000001s"}`,
		`{"url":"https://example.com/","delay":"-1ns"}`,
		`{"url":"https://example.com/","run_at":"2027-11-22T10:00:00.123456789Z"}`,
		`{"url":"https://example.com/","run_at":"1999-01-01T00:00:00Z"}`,
		`{"url":"https://example.com/","run_at":"2026-11-22T10:00:00Z","delay":"1s"}`,
		`{"url":"https://example.com/","timeout":"1s"}`,
		`{"url":"https://example.com/","timeout":"2m0.000000001s"}`,
		`{"url":"https://example.com/","retry":{"max_attempts":0}}`,
		`{"url":"https://example.com/","retry":{"min_backoff":"100ms","max_backoff":"168h"}}`,
		`{"url":"https://example.com/","retry":{"max_attemps":3}}`,
		`{"url":"https://example.com/","body":"a\ud83db"}`,
		"{\"url\":\"https://example.com/\",\"body\":\"\xff\"}",
		`{"url":"https://example.com/","body":{"not":"a string"}}`,
		`{"url":"https://example.com/","method":"post"}`,
		`{"url":"https://example.com/","runAt":"2030-01-01T00:00:00Z"}`,
		`{"url":"https://example.com/"} {"url":"https://example.com/"}`,
		`{"url":42}`, `{"":0}`, `[]`, `null`, `"x"`, ``, ` `, `{`, `{"url":"https://example.com/","url":"http://10.0.0.1/"}`,
	}
}

// FuzzCreateTask: a body of POST /v1/tasks (with or without an
// Idempotency-Key) is accepted, as a task that net/http sends as asked
// and that the API renders as a request giving the same task again, or
// refused with a 4xx problem.
func FuzzCreateTask(f *testing.F) {
	for i, body := range taskSeeds() {
		f.Add([]byte(body), "order-"+strconv.Itoa(i), i%3 == 0)
	}
	f.Add([]byte(`{"url":"https://example.com/"}`), "", true)
	f.Add([]byte(`{"url":"https://example.com/"}`), "\xff", true)
	f.Add([]byte(`{"url":"https://example.com/"}`), strings.Repeat("é", 256), true)
	s, tenant := fuzzServer(f)

	f.Fuzz(func(t *testing.T, body []byte, key string, withKey bool) {
		var idempotencyKey *string
		if withKey {
			idempotencyKey = &key
		}
		var task *model.Task
		rec, err := serve(s, "/v1/tasks", body, func(c echo.Context) (err error) {
			task, err = s.decodeTask(c, tenant, idempotencyKey)
			return err
		})
		if err != nil {
			requireProblem(t, rec, "/v1/tasks")
			return
		}
		requireValidTask(t, s, tenant, task)
		require.Equal(t, idempotencyKey, task.IdempotencyKey)
		require.Equal(t, withKey, task.RequestHash != nil)
		// Every header asked for is sent: none is lost to another that
		// differs from it only in letter case.
		var req taskRequest
		require.NoError(t, json.Unmarshal(body, &req))
		require.Len(t, task.Headers, len(req.Headers))
		// Nor do two of them read as one header where '_' stands for '-'.
		names := map[string]bool{}
		for name := range task.Headers {
			same := http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))
			require.False(t, names[same], "headers %q and another read as one", name)
			names[same] = true
		}

		again, err := serveTask(s, tenant, resentTask(t, task))
		require.NoError(t, err, "the task as the API renders it is refused")
		requireSameTask(t, task, again)
	})
}

// serveTask decodes body as POST /v1/tasks without an Idempotency-Key.
func serveTask(s *Server, tenant *model.Tenant, body []byte) (*model.Task, error) {
	var task *model.Task
	_, err := serve(s, "/v1/tasks", body, func(c echo.Context) (err error) {
		task, err = s.decodeTask(c, tenant, nil)
		return err
	})
	return task, err
}

// resentTask is the task as GET /v1/tasks/{id} renders it, sent back as
// the body of POST /v1/tasks.
func resentTask(t *testing.T, task *model.Task) []byte {
	t.Helper()
	out := taskJSON(task)
	body, err := json.Marshal(map[string]any{
		"url": out.URL, "method": out.Method, "headers": out.Headers, "body": out.Body,
		"run_at": out.RunAt.Format(time.RFC3339Nano), "timeout": out.Timeout, "retry": out.Retry,
	})
	require.NoError(t, err)
	return body
}

func requireSameTask(t *testing.T, want, got *model.Task) {
	t.Helper()
	require.Equal(t, want.URL, got.URL)
	require.Equal(t, want.Method, got.Method)
	require.Equal(t, want.Headers, got.Headers)
	require.Equal(t, string(want.Body), string(got.Body))
	require.True(t, want.RunAt.Equal(got.RunAt), "run_at %s, then %s", want.RunAt, got.RunAt)
	require.Equal(t, want.Timeout, got.Timeout)
	require.Equal(t, want.MaxAttempts, got.MaxAttempts)
	require.Equal(t, want.MinBackoff, got.MinBackoff)
	require.Equal(t, want.MaxBackoff, got.MaxBackoff)
}

// requireValidTask checks a task the API accepted against the contract's
// rules, stated here independently of tasks.Rules.Check.
func requireValidTask(t *testing.T, s *Server, tenant *model.Tenant, task *model.Task) {
	t.Helper()
	limits, now := s.cfg.Limits, s.clock.Now()
	requireValidURL(t, s, task.URL)
	requireSendable(t, task.Method, task.URL, task.Headers, task.Body)
	require.Contains(t, []string{"GET", "POST", "PUT", "PATCH", "DELETE"}, task.Method)
	for name := range task.Headers {
		require.Equal(t, http.CanonicalHeaderKey(name), name)
		require.False(t, signing.IsSignatureHeader(name), "%s would shadow the signature", name)
		require.False(t, forbiddenHeader(name), "%s is hookwheel's or the connection's", name)
	}
	require.LessOrEqual(t, len(task.Body), limits.MaxBody)
	require.True(t, utf8.Valid(task.Body), "the body is text as sent")

	require.False(t, task.RunAt.Before(now), "due %s, before now", task.RunAt)
	require.False(t, task.RunAt.After(now.Add(limits.MaxScheduleAhead+time.Microsecond)), "due %s, beyond the horizon", task.RunAt)
	require.Zero(t, task.RunAt.Nanosecond()%1000, "due %s: Postgres keeps microseconds", task.RunAt)

	require.GreaterOrEqual(t, task.Timeout, time.Second)
	require.LessOrEqual(t, task.Timeout, min(limits.MaxTimeout, tenant.Limits.MaxTimeout))
	require.GreaterOrEqual(t, task.MaxAttempts, 1)
	require.LessOrEqual(t, task.MaxAttempts, 100)
	require.GreaterOrEqual(t, task.MinBackoff, 100*time.Millisecond)
	require.GreaterOrEqual(t, task.MaxBackoff, task.MinBackoff)
	require.LessOrEqual(t, task.MaxBackoff, 7*24*time.Hour)
}

// forbiddenHeader reports whether a task may not set the header name
// (canonical): the connection's own, those net/http sets from the URL and
// body, and those hookwheel sets on every webhook.
func forbiddenHeader(name string) bool {
	// CGI-style servers read an underscore as a hyphen.
	name = http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))
	switch name {
	case "Host", "Content-Length", "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Idempotency-Key":
		return true
	}
	return strings.HasPrefix(name, "Webhook-") || strings.HasPrefix(name, "Hookwheel-")
}

func mustParseURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

// requireValidURL checks an accepted target URL against the API's rules:
// absolute http or https, a host the guard allows, nothing that is never
// sent (credentials, a fragment).
func requireValidURL(t *testing.T, s *Server, raw string) {
	t.Helper()
	u := mustParseURL(t, raw)
	require.Contains(t, []string{"http", "https"}, u.Scheme, "url %q", raw)
	require.NotEmpty(t, u.Hostname(), "url %q", raw)
	require.Nil(t, u.User, "url %q", raw)
	require.Empty(t, u.Fragment, "url %q", raw)
	require.NoError(t, s.cfg.Guard.CheckURL(u), "url %q", raw)
}

// requireSendable checks that net/http sends the request a task describes
// as the task describes it: the request a receiver reads back has the
// task's host, method, headers and body.
func requireSendable(t *testing.T, method, rawURL string, headers map[string]string, body []byte) {
	t.Helper()
	u := mustParseURL(t, rawURL)
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		require.NoError(t, err, "url %q", rawURL)
		require.True(t, n >= 1 && n <= 65535, "url %q: no connection can be made to port %d", rawURL, n)
	}
	// What Request.Write does to the host: an IDN is spelled in ASCII,
	// and a host that is not a valid Host header goes out as an empty one.
	host, err := httpguts.PunycodeHostPort(u.Host)
	require.NoError(t, err, "url %q: net/http cannot spell the host", rawURL)
	require.True(t, httpguts.ValidHostHeader(host), "url %q: net/http sends an empty Host for %q", rawURL, host)

	req, err := http.NewRequest(method, rawURL, bytes.NewReader(body))
	require.NoError(t, err)
	for name, value := range headers {
		// The transport refuses a request whose header fails these.
		require.True(t, httpguts.ValidHeaderFieldName(name), "header name %q", name)
		require.True(t, httpguts.ValidHeaderFieldValue(value), "header %s value %q", name, value)
		require.False(t, strings.ContainsAny(value, "\r\n\x00"), "header %s value %q", name, value)
		req.Header.Set(name, value)
	}
	var wire bytes.Buffer
	require.NoError(t, req.Write(&wire))
	got, err := http.ReadRequest(bufio.NewReader(&wire))
	require.NoError(t, err, "a receiver cannot read %q", wire.String())
	require.Equal(t, method, got.Method)
	require.NotEmpty(t, got.Host)
	for name, value := range headers {
		// A field value's leading and trailing blanks are not part of it
		// (RFC 9110 §5.5), so a receiver reads it without them.
		require.Equal(t, strings.Trim(value, " \t"), got.Header.Get(name), "header %s", name)
	}
	gotBody, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	require.Equal(t, string(body), string(gotBody))
}

// FuzzCreateSchedule: a body of POST /v1/schedules is accepted, as a
// schedule whose cron and zone parse, whose first occurrence is after now
// unless it is paused, whose task fields obey the task rules and which
// the API renders as a request giving the same schedule again, or refused
// with a 4xx problem.
func FuzzCreateSchedule(f *testing.F) {
	seeds := []string{
		`{"cron":"*/5 * * * *","url":"https://example.com/hook"}`,
		`{"cron":"30 2 * * *","timezone":"Europe/Paris","url":"https://example.com/hook","method":"PUT","headers":{"X-A":"1"},"body":"{}","timeout":"10s","retry":{"max_attempts":3}}`,
		`{"cron":"@every 90s","url":"https://example.com/hook","paused":true}`,
		`{"cron":"@daily","timezone":"America/New_York","url":"https://example.com/hook"}`,
		`{"cron":"0 0 30 2 *","url":"https://example.com/hook"}`,
		`{"cron":"* * * * *","timezone":"Local","url":"https://example.com/hook"}`,
		`{"cron":"* * * * *","timezone":"Mars/Base","url":"http://127.0.0.1/"}`,
		`{"cron":"TZ=UTC * * * * *","url":"https://example.com/hook"}`,
		`{"cron":"* * * * *","url":"https://example.com/hook","run_at":"2030-01-01T00:00:00Z","delay":"1s"}`,
		`{"cron":"","url":""}`, `{"url":"https://example.com/hook"}`, `{"cron":5}`, `{"cron":"* * * * *","paused":"yes"}`,
		`{"cron":"@every 0.5s","url":"https://example.com/"}`, `[]`, `{`,
	}
	for _, body := range seeds {
		f.Add([]byte(body))
	}
	s, tenant := fuzzServer(f)

	f.Fuzz(func(t *testing.T, body []byte) {
		sched, rec, err := serveSchedule(s, tenant, body)
		if err != nil {
			requireProblem(t, rec, "/v1/schedules")
			return
		}
		now := s.clock.Now()
		parsed, err := schedule.Parse(sched.Cron, sched.Timezone, now)
		require.NoError(t, err)
		if sched.Paused {
			require.Nil(t, sched.NextRunAt)
		} else {
			require.NotNil(t, sched.NextRunAt)
			require.True(t, sched.NextRunAt.After(now))
			require.True(t, sched.NextRunAt.Equal(parsed.Next(now)))
		}
		requireValidTask(t, s, tenant, &model.Task{
			URL: sched.URL, Method: sched.Method, Headers: sched.Headers, Body: sched.Body, RunAt: model.RoundUpToMicro(now),
			Timeout: sched.Timeout, MaxAttempts: sched.MaxAttempts, MinBackoff: sched.MinBackoff, MaxBackoff: sched.MaxBackoff,
		})

		out := scheduleJSON(sched)
		resent, err := json.Marshal(map[string]any{
			"cron": out.Cron, "timezone": out.Timezone, "paused": out.Paused, "url": out.URL, "method": out.Method,
			"headers": out.Headers, "body": out.Body, "timeout": out.Timeout, "retry": out.Retry,
		})
		require.NoError(t, err)
		again, _, err := serveSchedule(s, tenant, resent)
		require.NoError(t, err, "the schedule as the API renders it is refused")
		require.Equal(t, sched.Cron, again.Cron)
		require.Equal(t, sched.Timezone, again.Timezone)
		require.Equal(t, sched.Paused, again.Paused)
		require.Equal(t, sched.NextRunAt == nil, again.NextRunAt == nil)
		if sched.NextRunAt != nil {
			require.True(t, sched.NextRunAt.Equal(*again.NextRunAt))
		}
		requireSameTask(t,
			&model.Task{URL: sched.URL, Method: sched.Method, Headers: sched.Headers, Body: sched.Body,
				Timeout: sched.Timeout, MaxAttempts: sched.MaxAttempts, MinBackoff: sched.MinBackoff, MaxBackoff: sched.MaxBackoff},
			&model.Task{URL: again.URL, Method: again.Method, Headers: again.Headers, Body: again.Body,
				Timeout: again.Timeout, MaxAttempts: again.MaxAttempts, MinBackoff: again.MinBackoff, MaxBackoff: again.MaxBackoff})
	})
}

// serveSchedule does what CreateSchedule does before the task service.
func serveSchedule(s *Server, tenant *model.Tenant, body []byte) (*model.Schedule, *httptest.ResponseRecorder, error) {
	var sched *model.Schedule
	rec, err := serve(s, "/v1/schedules", body, func(c echo.Context) error {
		var req scheduleRequest
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
		var err error
		now := s.clock.Now()
		sched, err = s.validateSchedule(&req, tenant, now, now)
		return err
	})
	return sched, rec, err
}

// FuzzCreateTasksBatch: a body of POST /v1/tasks/batch is refused as a
// whole with a 4xx problem, or each of its items is accepted or refused on
// its own with a 4xx problem pointing at it; and an item without an
// idempotency_key fares as the same body sent to POST /v1/tasks does.
func FuzzCreateTasksBatch(f *testing.F) {
	seeds := []string{
		`{"tasks":[{"url":"https://example.com/a"},{"url":"https://example.com/b","idempotency_key":"k1","delay":"1m"}]}`,
		`{"tasks":[{"url":"https://example.com/a"},{"url":"http://10.0.0.1/"},{"url":42},{"urll":"x"},[],null,"x"]}`,
		`{"tasks":[{"url":"https://example.com/a","idempotency_key":""},{"url":"https://example.com/a","idempotency_key":"\ud800"}]}`,
		`{"tasks":[{"url":"https://example.com/a","headers":{"x-a":"1","X-A":"2"}}]}`,
		`{"tasks":[{"url":"https://example.com/a","retry":{"max_attempts":1.5}}]}`,
		`{"tasks":[]}`, `{"tasks":null}`, `{}`, `{"tasks":{}}`, `{"tasks":[1]}`, `{"task":[]}`, `[]`, ``,
	}
	for _, body := range seeds {
		f.Add([]byte(body))
	}
	s, tenant := fuzzServer(f)

	f.Fuzz(func(t *testing.T, body []byte) {
		var items []json.RawMessage
		rec, err := serve(s, batchPath, body, func(c echo.Context) (err error) {
			items, err = decodeBatch(c)
			return err
		})
		if err != nil {
			requireProblem(t, rec, batchPath)
			return
		}
		require.NotEmpty(t, items)
		require.LessOrEqual(t, len(items), maxBatchItems)
		for i, raw := range items {
			task, err := s.batchItemTask(raw, tenant, s.clock.Now())
			if err != nil {
				var p *problem
				require.True(t, errors.As(err, &p), "item %d: %v", i, err)
				out := itemProblem(p, i)
				require.GreaterOrEqual(t, out.Status, 400)
				require.Less(t, out.Status, 500)
				requireProblemFields(t, *out, out.Status)
				require.Equal(t, batchPath+"#/tasks/"+strconv.Itoa(i), *out.Instance)
			} else {
				requireValidTask(t, s, tenant, task)
			}

			var probe struct {
				IdempotencyKey json.RawMessage `json:"idempotency_key"`
			}
			if json.Unmarshal(raw, &probe) != nil || probe.IdempotencyKey != nil {
				continue
			}
			single, singleErr := serveTask(s, tenant, raw)
			require.Equal(t, err == nil, singleErr == nil, "item %d: in a batch %v, alone %v", i, err, singleErr)
			if err == nil {
				requireSameTask(t, task, single)
			}
		}
	})
}
