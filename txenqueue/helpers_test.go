package txenqueue_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
	"github.com/hookwheel/hookwheel/txenqueue"
)

// env is one test's world: a database of its own, seen both as hookwheel
// sees it (db) and as an application sharing it does (app: a plain pgx
// pool, without the type registrations hookwheel's own pool has), with one
// tenant and an orders table of the application's.
type env struct {
	t      *testing.T
	url    string
	db     *store.DB
	app    *pgxpool.Pool
	tenant uuid.UUID
	// apiKey is the tenant's first API key.
	apiKey string
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	url := storetest.DatabaseURL(t)
	db, err := store.Open(ctx, store.Config{DatabaseURL: url, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	app, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(app.Close)
	_, err = app.Exec(ctx, `CREATE TABLE orders (id bigint PRIMARY KEY, status text NOT NULL)`)
	require.NoError(t, err)
	created, err := tenants.New(tenants.Config{Store: db}).Create(ctx, "shop", model.ActorCLI)
	require.NoError(t, err)
	return &env{t: t, url: url, db: db, app: app, tenant: created.Tenant.ID, apiKey: created.APIKey}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// client is a txenqueue client of the env's tenant whose receivers may
// listen on loopback, changed by mutate.
func (e *env) client(mutate ...func(*txenqueue.Config)) *txenqueue.Client {
	e.t.Helper()
	cfg := txenqueue.Config{TenantID: e.tenant, AllowPrivateTargets: true}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := txenqueue.New(cfg)
	require.NoError(e.t, err)
	return c
}

// startDispatcher runs a dispatcher on the env's database until the test
// ends, and returns once it listens for announcements. Its sweep runs once
// an hour, so that a task reaches it only by the loader or by an
// announcement, never by the sweep.
func (e *env) startDispatcher() {
	e.t.Helper()
	d, err := dispatcher.New(dispatcher.Config{
		DB: e.db, Redis: storetest.Redis(e.t), Logger: quietLogger(),
		Guard:        netguard.New(netguard.Config{AllowPrivate: true}),
		LoadInterval: 100 * time.Millisecond, SweepInterval: time.Hour,
	})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(e.t, err)
		case <-time.After(30 * time.Second):
			e.t.Error("dispatcher did not stop within 30s")
		}
	})
	e.waitListening()
}

// waitListening waits until a session of the env's database listens on
// store.DueNotifyChannel.
func (e *env) waitListening() {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		var n int
		err := e.app.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n)
		require.NoError(e.t, err)
		return n > 0
	}, 10*time.Second, 10*time.Millisecond, "no dispatcher listening")
}

// delivery is one webhook a receiver got.
type delivery struct {
	id   string // webhook-id: the task id
	body string
	at   time.Time
}

// receiver is an HTTP receiver that records every webhook and answers 200.
type receiver struct {
	url string
	mu  sync.Mutex
	got []delivery
	// arrived gets each delivery as it comes.
	arrived chan delivery
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{arrived: make(chan delivery, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d := delivery{id: req.Header.Get("webhook-id"), body: string(body), at: time.Now()}
		r.mu.Lock()
		r.got = append(r.got, d)
		r.mu.Unlock()
		r.arrived <- d
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/hook"
	return r
}

// await waits for the webhook of task id, failing the test after timeout.
func (r *receiver) await(t *testing.T, id uuid.UUID, timeout time.Duration) delivery {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case d := <-r.arrived:
			if d.id == id.String() {
				return d
			}
		case <-deadline:
			require.FailNow(t, "webhook never arrived", "task %s, within %s", id, timeout)
		}
	}
}

// received reports whether the webhook of task id arrived.
func (r *receiver) received(id uuid.UUID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.got {
		if d.id == id.String() {
			return true
		}
	}
	return false
}

// taskExists reports whether hookwheel sees a task with this id.
func (e *env) taskExists(id uuid.UUID) bool {
	e.t.Helper()
	_, err := e.db.GetTask(context.Background(), e.tenant, id)
	if err == model.ErrNotFound {
		return false
	}
	require.NoError(e.t, err)
	return true
}

// listenDue hears store.DueNotifyChannel until the test ends.
func (e *env) listenDue() <-chan model.DueTask {
	e.t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	heard := make(chan model.DueTask, 64)
	listening := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.db.ListenDue(ctx, func() { close(listening) }, func(d model.DueTask) { heard <- d })
	}()
	e.t.Cleanup(func() { stop(); <-done })
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		require.FailNow(e.t, "not listening on the due channel")
	}
	return heard
}
