package api_test

// The test harness of the API: a real api.Server over its own migrated
// Postgres database and Redis key prefix, served by httptest, with a recording
// announcer in place of the dispatcher (which is tested end to end elsewhere)
// and a fake clock so that times in responses can be checked exactly.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

const (
	adminToken        = "admin-secret"
	problemJSON       = "application/problem+json"
	problemTypePrefix = "urn:hookwheel:problem:"
)

// fakeScheduler records what the task service tells the local dispatcher.
type fakeScheduler struct {
	mu        sync.Mutex
	scheduled []scheduledCall
	canceled  []uuid.UUID
}

type scheduledCall struct {
	ID uuid.UUID
	At time.Time
}

func (f *fakeScheduler) Schedule(id uuid.UUID, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scheduled = append(f.scheduled, scheduledCall{ID: id, At: at})
}

func (f *fakeScheduler) Cancel(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.canceled = append(f.canceled, id)
}

func (f *fakeScheduler) Lookahead() time.Duration { return model.DefaultLookahead }

// scheduledFor returns every Schedule call made for id.
func (f *fakeScheduler) scheduledFor(id uuid.UUID) []scheduledCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []scheduledCall
	for _, c := range f.scheduled {
		if c.ID == id {
			out = append(out, c)
		}
	}
	return out
}

// canceledCount returns how many Cancel calls were made for id.
func (f *fakeScheduler) canceledCount(id uuid.UUID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.canceled {
		if c == id {
			n++
		}
	}
	return n
}

// harness is one API server and what it runs on.
type harness struct {
	t       *testing.T
	URL     string
	dbURL   string
	DB      *store.DB
	Tenants *tenants.Service
	Sched   *fakeScheduler
	Clock   *clock.Fake
	// Client is the generated client without credentials.
	Client *openapi.ClientWithResponses
}

// newHarness starts a server on a database of the test's own. Options edit
// the api.Config before the server is built.
func newHarness(t *testing.T, opts ...func(*api.Config)) *harness {
	t.Helper()
	return newHarnessDefaults(t, model.Limits{}, opts...)
}

// newHarnessDefaults is newHarness on a node whose tenants without limits
// of their own get defaults.
func newHarnessDefaults(t *testing.T, defaults model.Limits, opts ...func(*api.Config)) *harness {
	t.Helper()
	dbURL := storetest.DatabaseURL(t)
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)

	h := &harness{
		t:       t,
		dbURL:   dbURL,
		DB:      db,
		Tenants: tenants.New(tenants.Config{Store: db, KeyCacheTTL: -1, DefaultLimits: defaults}),
		Sched:   &fakeScheduler{},
		// Whole seconds: Postgres keeps microseconds, so times round-trip exactly.
		Clock: clock.NewFake(time.Now().UTC().Truncate(time.Second)),
	}
	taskService, err := tasks.New(tasks.Config{Store: db, Announcer: h.Sched, Clock: h.Clock})
	require.NoError(t, err)
	redis := storetest.Redis(t)
	sessions, err := session.New(session.Config{Key: session.RandomKey(), Clock: h.Clock})
	require.NoError(t, err)
	cfg := api.Config{
		Sessions:    sessions,
		Tasks:       taskService,
		Tenants:     h.Tenants,
		Ready:       map[string]api.Pinger{"postgres": db},
		Degradable:  map[string]api.Pinger{"redis": redis},
		RateLimiter: redis,
		AdminToken:  adminToken,
		Clock:       h.Clock,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := api.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h.URL = ts.URL
	h.Client = h.client("")
	return h
}

// withRedis points both the readiness check and the API rate limiter at r.
func withRedis(r *store.Redis) func(*api.Config) {
	return func(c *api.Config) {
		c.Degradable["redis"] = r
		c.RateLimiter = r
	}
}

// client is the generated client sending token as a bearer token ("" for none).
func (h *harness) client(token string) *openapi.ClientWithResponses {
	h.t.Helper()
	var opts []openapi.ClientOption
	if token != "" {
		opts = append(opts, openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	}
	c, err := openapi.NewClientWithResponses(h.URL, opts...)
	require.NoError(h.t, err)
	return c
}

// tenant is a tenant created through the admin API.
type tenant struct {
	ID            uuid.UUID
	APIKey        string
	SigningSecret string
	Client        *openapi.ClientWithResponses
}

// createTenant creates a tenant through POST /v1/admin/tenants.
func (h *harness) createTenant(name string) tenant {
	h.t.Helper()
	resp, err := h.client(adminToken).CreateTenantWithResponse(context.Background(), openapi.TenantCreateRequest{Name: name})
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusCreated, resp.StatusCode(), "create tenant: %s", resp.Body)
	require.NotNil(h.t, resp.JSON201)
	return tenant{
		ID:            resp.JSON201.ID,
		APIKey:        resp.JSON201.APIKey,
		SigningSecret: resp.JSON201.SigningSecret,
		Client:        h.client(resp.JSON201.APIKey),
	}
}

// response is a raw HTTP response, body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends a raw request. token "" sends no Authorization header; headers
// are added as given.
func (h *harness) do(method, path, token string, body io.Reader, headers map[string]string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.URL+path, body)
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// postTask sends body to POST /v1/tasks as tenant.
func (h *harness) postTask(tn tenant, body string, idempotencyKey string) response {
	h.t.Helper()
	var headers map[string]string
	if idempotencyKey != "" {
		headers = map[string]string{"Idempotency-Key": idempotencyKey}
	}
	return h.do(http.MethodPost, "/v1/tasks", tn.APIKey, strings.NewReader(body), headers)
}

// createTask posts body and requires a 201, returning the task.
func (h *harness) createTask(tn tenant, body string) openapi.Task {
	h.t.Helper()
	resp := h.postTask(tn, body, "")
	require.Equal(h.t, http.StatusCreated, resp.Status, "create task: %s", resp.Body)
	var task openapi.Task
	require.NoError(h.t, json.Unmarshal(resp.Body, &task))
	return task
}

// exec runs SQL on the server's database, for states the API cannot reach
// on its own (a task being dispatched, attempts recorded).
func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, h.dbURL)
	require.NoError(h.t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(h.t, err)
}

// problem is a decoded problem+json body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
	Checks map[string]string `json:"checks"`
}

// requireProblem checks that resp is an RFC 9457 problem with this status
// and every member the contract names, and returns it.
func requireProblem(t *testing.T, resp response, status int) problem {
	t.Helper()
	require.Equal(t, status, resp.Status, "body: %s", resp.Body)
	require.Equal(t, problemJSON, resp.Header.Get("Content-Type"), "body: %s", resp.Body)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(resp.Body, &raw), "body: %s", resp.Body)
	for _, member := range []string{"type", "title", "status", "detail"} {
		require.Contains(t, raw, member, "problem member %q missing: %s", member, resp.Body)
	}
	var p problem
	require.NoError(t, json.Unmarshal(resp.Body, &p))
	require.Equal(t, status, p.Status)
	require.True(t, strings.HasPrefix(p.Type, problemTypePrefix), "type %q", p.Type)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Detail)
	return p
}

// requireFieldProblem checks a 422 validation problem naming exactly field.
func requireFieldProblem(t *testing.T, resp response, field string) problem {
	t.Helper()
	p := requireProblem(t, resp, http.StatusUnprocessableEntity)
	require.Equal(t, problemTypePrefix+"validation", p.Type)
	require.Len(t, p.Errors, 1, "body: %s", resp.Body)
	require.Equal(t, field, p.Errors[0].Field, "body: %s", resp.Body)
	require.NotEmpty(t, p.Errors[0].Message)
	return p
}

// rawKeys returns the members of a JSON object.
func rawKeys(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "body: %s", body)
	return m
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, err := h.Client.HealthzWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode())
	require.NotNil(t, resp.JSON200)
	require.Equal(t, openapi.HealthStatusOk, resp.JSON200.Status)
}

func TestReadyz(t *testing.T) {
	t.Parallel()

	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		resp, err := h.Client.ReadyzWithResponse(context.Background())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.NotNil(t, resp.JSON200)
		require.Equal(t, openapi.HealthStatusOk, resp.JSON200.Status)
		require.Equal(t, map[string]string{"postgres": "ok", "redis": "ok"}, resp.JSON200.Checks)
	})

	t.Run("redis unreachable: ready, degraded", func(t *testing.T) {
		t.Parallel()
		// A real Redis client pointed at a port nothing listens on.
		addr := closedAddr(t)
		unreachable, err := store.OpenRedis(store.RedisConfig{URL: "redis://" + addr + "/0"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = unreachable.Close() })
		h := newHarness(t, withRedis(unreachable))

		resp, err := h.Client.ReadyzWithResponse(context.Background())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.NotNil(t, resp.JSON200)
		require.Equal(t, openapi.HealthStatusDegraded, resp.JSON200.Status)
		// Which dependency, not its error: that names internal addresses
		// to whoever can reach the port.
		require.Equal(t, map[string]string{"postgres": "ok", "redis": "unreachable"}, resp.JSON200.Checks)
		require.NotContains(t, string(resp.Body), addr)
	})

	t.Run("postgres unreachable", func(t *testing.T) {
		t.Parallel()
		// A real pool pointed at a port nothing listens on (told there is
		// no pooler, it opens lazily instead of probing).
		addr := closedAddr(t)
		unreachable, err := store.Open(context.Background(), store.Config{
			DatabaseURL: "postgres://postgres@" + addr + "/hookwheel?sslmode=disable&connect_timeout=1",
			Pooler:      store.PoolerNone,
		})
		require.NoError(t, err)
		t.Cleanup(unreachable.Close)
		h := newHarness(t, func(c *api.Config) { c.Ready["postgres"] = unreachable })

		resp := h.do(http.MethodGet, "/readyz", "", nil, nil)
		p := requireProblem(t, resp, http.StatusServiceUnavailable)
		require.Equal(t, problemTypePrefix+"not-ready", p.Type)
		require.Equal(t, "unreachable", p.Checks["postgres"])
		require.Equal(t, "ok", p.Checks["redis"])
		require.NotContains(t, string(resp.Body), addr)

		// The generated client reads the same body as the spec's NotReady.
		typed, err := h.Client.ReadyzWithResponse(context.Background())
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, typed.StatusCode())
		require.NotNil(t, typed.ApplicationProblemJSON503)
		require.Equal(t, "unreachable", typed.ApplicationProblemJSON503.Checks["postgres"])
	})
}

func TestOpenAPIDocumentServed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	want, err := os.ReadFile("../openapi/openapi.yaml")
	require.NoError(t, err)
	resp := h.do(http.MethodGet, "/openapi.yaml", "", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, "application/yaml", resp.Header.Get("Content-Type"))
	require.True(t, bytes.Equal(want, resp.Body), "served document differs from openapi/openapi.yaml")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/healthz", "", nil, nil).Status)
	require.Equal(t, http.StatusNotFound, h.do(http.MethodGet, "/no/such/route", "", nil, nil).Status)

	resp := h.do(http.MethodGet, "/metrics", "", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
	body := string(resp.Body)
	require.Contains(t, body, "# TYPE hookwheel_http_request_duration_seconds histogram")
	require.Contains(t, body, `hookwheel_http_request_duration_seconds_count{code="200",method="GET",route="/healthz"} 1`)
	require.Contains(t, body, `hookwheel_http_request_duration_seconds_count{code="404",method="GET",route="unmatched"} 1`)
}
