package hookwheel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// fakeServer is an HTTP server standing in for hookwheel: it answers with
// whatever handle says and records each request it got.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, nth int)) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		nth := len(f.requests)
		f.mu.Unlock()
		handle(w, r, nth)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) got() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

func (f *fakeServer) client(t *testing.T, opts ...hookwheel.Option) *hookwheel.Client {
	t.Helper()
	c, err := hookwheel.New(f.URL, "hw_test_secret", append([]hookwheel.Option{hookwheel.WithRetries(2)}, opts...)...)
	require.NoError(t, err)
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, detail string, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail,
	})
}

// taskJSON is a task as the API answers it.
func taskJSON(id uuid.UUID, url string) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return map[string]any{
		"id": id, "status": "scheduled", "url": url, "method": "POST", "run_at": now, "created_at": now,
		"updated_at": now, "attempts": 0, "max_attempts": 10, "timeout": "30s",
		"retry":           map[string]any{"max_attempts": 10, "min_backoff": "1s", "max_backoff": "1h"},
		"next_attempt_at": now, "last_status_code": nil, "last_error": nil, "idempotency_key": nil,
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, url, key string }{
		{"no scheme", "localhost:8080", "hw_a_b"},
		{"other scheme", "ftp://localhost", "hw_a_b"},
		{"no host", "http://", "hw_a_b"},
		{"no key", "http://localhost:8080", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := hookwheel.New(tc.url, tc.key)
			require.Error(t, err)
		})
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	ok := func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, taskJSON(id, "https://example.com/")) }
	tests := []struct {
		name string
		// status is the answer to the first tries, then 200.
		status     int
		retryAfter string
		failFirst  int
		call       func(*hookwheel.Client) error
		wantTries  int
		wantErr    error
	}{
		{"429 is retried, whatever the call", 429, "0", 1, replay(id), 2, nil},
		{"503 is retried for a read", 503, "0", 2, get(id), 3, nil},
		{"503 is retried for a create", 503, "0", 1, create, 2, nil},
		{"503 is not retried for a replay", 503, "0", 1, replay(id), 1, hookwheel.ErrServer},
		{"503 is not retried for a cancel", 503, "0", 1, cancel(id), 1, hookwheel.ErrServer},
		{"500 is not retried", 500, "", 1, get(id), 1, hookwheel.ErrServer},
		{"409 is not retried", 409, "", 1, cancel(id), 1, hookwheel.ErrConflict},
		{"a Retry-After past the longest wait is not waited for", 429, "3600", 1, get(id), 1, hookwheel.ErrRateLimited},
		{"a Retry-After as an HTTP date", 429, time.Now().Add(-time.Second).UTC().Format(http.TimeFormat), 1, get(id), 2, nil},
		{"retries end, and the last answer is the error", 429, "0", 10, get(id), 3, hookwheel.ErrRateLimited},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, nth int) {
				if nth <= tc.failFirst {
					header := []string{}
					if tc.retryAfter != "" {
						header = append(header, "Retry-After", tc.retryAfter)
					}
					writeProblem(w, tc.status, "try later", header...)
					return
				}
				ok(w)
			})
			err := tc.call(f.client(t, hookwheel.WithMaxRetryWait(time.Minute)))
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
				var apiErr *hookwheel.Error
				require.ErrorAs(t, err, &apiErr)
				require.Equal(t, tc.status, apiErr.StatusCode)
			}
			got := f.got()
			require.Len(t, got, tc.wantTries)
			for _, r := range got[1:] {
				require.Equal(t, got[0].header.Get("Idempotency-Key"), r.header.Get("Idempotency-Key"),
					"a retried create repeats its key")
				require.Equal(t, got[0].body, r.body)
			}
		})
	}
}

func get(id uuid.UUID) func(*hookwheel.Client) error {
	return func(c *hookwheel.Client) error { _, err := c.GetTask(context.Background(), id); return err }
}

func replay(id uuid.UUID) func(*hookwheel.Client) error {
	return func(c *hookwheel.Client) error { _, err := c.ReplayTask(context.Background(), id, nil); return err }
}

func cancel(id uuid.UUID) func(*hookwheel.Client) error {
	return func(c *hookwheel.Client) error { _, err := c.CancelTask(context.Background(), id); return err }
}

func create(c *hookwheel.Client) error {
	_, err := c.CreateTask(context.Background(), hookwheel.TaskRequest{URL: "https://example.com/"})
	return err
}

func TestRateLimitedErrorSaysWhenToComeBack(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeProblem(w, http.StatusTooManyRequests, "over the tenant's api_rate", "Retry-After", "120")
	})
	_, err := f.client(t).GetTask(context.Background(), uuid.New())
	var apiErr *hookwheel.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 2*time.Minute, apiErr.RetryAfter)
	require.ErrorIs(t, err, hookwheel.ErrRateLimited)
	require.Contains(t, err.Error(), "retry after 2m0s")
	require.Len(t, f.got(), 1)
}

func TestErrorsCarryTheProblem(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		switch r.URL.Path {
		case "/v1/tasks":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"type":"validation","title":"Unprocessable Entity","status":422,
				"detail":"the request has invalid fields","errors":[{"field":"url","message":"must be absolute"}]}`)
		case "/v1/me":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
		default:
			writeProblem(w, http.StatusNotFound, "no task "+r.URL.Path)
		}
	})
	c := f.client(t)
	ctx := context.Background()

	_, err := c.CreateTask(ctx, hookwheel.TaskRequest{URL: "/relative"})
	var apiErr *hookwheel.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 422, apiErr.StatusCode)
	require.Equal(t, "validation", apiErr.Type)
	require.Equal(t, []hookwheel.FieldError{{Field: "url", Message: "must be absolute"}}, apiErr.Fields)
	require.ErrorIs(t, err, hookwheel.ErrInvalid)
	require.Equal(t, "create task: 422 Unprocessable Entity: url: must be absolute", err.Error())

	id := uuid.New()
	_, err = c.GetTask(ctx, id)
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
	require.NotErrorIs(t, err, hookwheel.ErrConflict)
	require.Contains(t, err.Error(), "get task "+id.String()+": 404 Not Found")

	_, err = c.Me(ctx)
	require.ErrorIs(t, err, hookwheel.ErrServer)
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "Bad Gateway", apiErr.Title)
	require.Equal(t, "<html>bad gateway</html>", apiErr.Detail)
}

func TestContextCancelStopsRetrying(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeProblem(w, http.StatusServiceUnavailable, "database down", "Retry-After", "20")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.client(t).GetTask(ctx, uuid.New())
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), fmt.Sprint(err))
	require.Less(t, time.Since(start), 10*time.Second)
}
