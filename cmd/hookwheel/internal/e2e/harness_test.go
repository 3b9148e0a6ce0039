package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// env is one test's world: its own database and Redis prefix.
type env struct {
	t           testing.TB
	databaseURL string
	redisPrefix string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return &env{t: t, databaseURL: storetest.DatabaseURL(t), redisPrefix: storetest.RedisPrefix(t)}
}

func testLogger() *slog.Logger {
	if os.Getenv("HOOKWHEEL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// node is a hookwheel node running in this test process.
type node struct {
	*app.Node
	base   string
	cancel context.CancelFunc
	done   chan error
}

// startNode runs a node until stop or the end of the test.
func (e *env) startNode(mutate ...func(*app.Config)) *node {
	e.t.Helper()
	cfg := app.Config{
		DatabaseURL:    e.databaseURL,
		RedisURL:       storetest.RedisURL(),
		RedisKeyPrefix: e.redisPrefix,
		Addr:           "127.0.0.1:0",
		AdminToken:     "admin-token",
		Logger:         testLogger(),
		Dispatcher:     dispatcher.Config{LoadInterval: 200 * time.Millisecond, SweepInterval: time.Second},
		// The receivers of these tests listen on loopback.
		Targets: netguard.Config{AllowPrivate: true},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := app.New(ctx, cfg)
	require.NoError(e.t, err)
	nd := &node{Node: n, base: "http://" + n.Addr(), cancel: cancel, done: make(chan error, 1)}
	go func() { nd.done <- n.Run(ctx) }()
	e.t.Cleanup(func() { nd.stop(e.t) })
	return nd
}

// stop shuts the node down gracefully and waits for it; stopping twice is fine.
func (n *node) stop(t testing.TB) {
	t.Helper()
	n.cancel()
	select {
	case err, ok := <-n.done:
		if ok {
			require.NoError(t, err)
			close(n.done)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node did not stop within 30s")
	}
}

// tenant is a tenant's credentials and a client acting for it.
type tenant struct {
	id            uuid.UUID
	apiKey        string
	signingSecret string
	client        *openapi.ClientWithResponses
}

func (e *env) createTenant(n *node, name string) *tenant {
	e.t.Helper()
	created, err := n.Tenants().Create(context.Background(), name, model.ActorCLI)
	require.NoError(e.t, err)
	return &tenant{
		id:            created.Tenant.ID,
		apiKey:        created.APIKey,
		signingSecret: created.SigningSecret,
		client:        clientFor(e.t, n.base, created.APIKey),
	}
}

// clientFor is a client of the node at base acting with apiKey; every answer
// it gets is checked against openapi.yaml on behalf of t.
func clientFor(t testing.TB, base, apiKey string) *openapi.ClientWithResponses {
	c, err := openapi.NewClientWithResponses(base,
		openapi.WithHTTPClient(contractClient(t)),
		openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+apiKey)
			return nil
		}))
	require.NoError(t, err)
	return c
}

// schedule creates a task and returns it; it fails the test on any non-201.
func (tn *tenant) schedule(t *testing.T, req openapi.TaskRequest) openapi.Task {
	t.Helper()
	resp, err := tn.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{}, req)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	return taskOf(t, resp.JSON201)
}

// taskOf is the task a create answered: POST /v1/tasks answers a task, or
// for a topic a publish.
func taskOf(t *testing.T, created *openapi.TaskOrPublish) openapi.Task {
	t.Helper()
	require.NotNil(t, created)
	task, err := created.AsTask()
	require.NoError(t, err)
	return task
}

func (tn *tenant) task(t *testing.T, id uuid.UUID) openapi.Task {
	t.Helper()
	resp, err := tn.client.GetTaskWithResponse(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	return *resp.JSON200
}

// waitStatus polls a task until it reaches status or the deadline passes.
func (tn *tenant) waitStatus(t *testing.T, id uuid.UUID, status openapi.TaskStatus, within time.Duration) openapi.Task {
	t.Helper()
	deadline := time.Now().Add(within)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		task := tn.task(t, id)
		if task.Status == status {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s after %s, want %s", id, task.Status, within, status)
		}
		<-poll.C
	}
}

// delivery is one webhook request as a receiver saw it.
type delivery struct {
	arrived time.Time
	method  string
	path    string
	header  http.Header
	body    []byte
}

func (d delivery) webhookID() string { return d.header.Get("webhook-id") }

// receiver is a real HTTP server that records every webhook and answers
// with whatever respond says (200 by default).
type receiver struct {
	*httptest.Server
	mu         sync.Mutex
	deliveries []delivery
	byID       map[string]int
	changed    chan struct{}
	respond    func(d delivery, nth int) (int, http.Header)
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{byID: map[string]int{}, changed: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived := time.Now()
		body, _ := io.ReadAll(req.Body)
		d := delivery{arrived: arrived, method: req.Method, path: req.URL.Path, header: req.Header.Clone(), body: body}
		r.mu.Lock()
		r.deliveries = append(r.deliveries, d)
		r.byID[d.webhookID()]++
		nth := r.byID[d.webhookID()]
		respond := r.respond
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
		status, header := http.StatusOK, http.Header(nil)
		if respond != nil {
			status, header = respond(d, nth)
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) setRespond(f func(d delivery, nth int) (int, http.Header)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.respond = f
}

// waitFor blocks until cond holds over the deliveries, or fails the test.
func (r *receiver) waitFor(t *testing.T, within time.Duration, what string, cond func(ds []delivery) bool) []delivery {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ds := append([]delivery(nil), r.deliveries...)
		r.mu.Unlock()
		if cond(ds) {
			return ds
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("receiver: %s: not within %s (%d deliveries so far)", what, within, len(ds))
		}
	}
}

func (r *receiver) snapshot() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...)
}

func distinctIDs(ds []delivery) map[string]int {
	counts := map[string]int{}
	for _, d := range ds {
		counts[d.webhookID()]++
	}
	return counts
}

func ptr[T any](v T) *T { return &v }

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// rawRequest sends a request as given and returns the answer, checked
// against openapi.yaml.
func rawRequest(t *testing.T, method, url, apiKey string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := contractClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// worstLateness is the latest of ds's arrivals after their due time, or
// after stored, when the test's creations returned, if that is later: a
// task stored past its due time is sent at once, and the time before it was
// stored is the loaded machine's, not the dispatcher's.
func worstLateness(t *testing.T, ds []delivery, stored time.Time) time.Duration {
	t.Helper()
	var worst time.Duration
	for _, d := range ds {
		at, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
		require.NoError(t, err)
		if stored.After(at) {
			at = stored
		}
		worst = max(worst, d.arrived.Sub(at))
	}
	return worst
}
