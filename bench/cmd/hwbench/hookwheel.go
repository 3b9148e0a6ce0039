package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookwheel/hookwheel/openapi"
)

// task is one webhook of a run: its number and the instant it is due.
type task struct {
	seq int
	due time.Time
	// orderingKey is set by the ordering scenario only (hookwheel alone).
	orderingKey string
	// flowKey is set by the flow scenario only (hookwheel alone).
	flowKey string
}

// system is one scheduler under test: hookwheel, River or Asynq.
type system interface {
	Name() string
	// Settings says how the system is configured, for the results.
	Settings() map[string]string
	// Secret is the Standard Webhooks secret its webhooks are signed with.
	Secret() string
	// Schedule stores tasks to be POSTed to url at their due instants. For
	// hookwheel it also returns each task's id.
	Schedule(ctx context.Context, run, url string, tasks []task) ([]uuid.UUID, error)
	Close()
}

// hookwheelSystem is hookwheel as its users run it: `hookwheel serve`
// processes over a fresh database, driven through the HTTP API.
type hookwheelSystem struct {
	svc        *services
	bin        string
	senders    int
	dbURL      string
	prefix     string
	adminToken string
	nodes      []*hookwheelNode
	pool       *pgxpool.Pool // the harness's own look into the database (counts, backlog seeding)
	http       *http.Client

	apiKey, secret string
	// batchMode: 0 not yet known, 1 POST /v1/tasks/batch works, -1 it does not (501): single POSTs.
	batchMode   atomic.Int32
	batchSize   int
	batchConc   int
	singleConc  int
	submitNode  atomic.Int32 // which node's API Schedule uses
	batchNotice sync.Once
}

type hookwheelOptions struct {
	bin       string
	senders   int
	batchSize int
}

func startHookwheel(ctx context.Context, svc *services, opts hookwheelOptions, label string) (_ *hookwheelSystem, err error) {
	h := &hookwheelSystem{
		svc:        svc,
		bin:        opts.bin,
		senders:    opts.senders,
		adminToken: randomHex(16),
		batchSize:  max(1, min(opts.batchSize, 1000)),
		batchConc:  4,
		singleConc: 32,
		http: &http.Client{Transport: &http.Transport{
			MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute,
		}, Timeout: 2 * time.Minute},
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	if h.dbURL, err = svc.createDatabase(ctx, "hw_"+label); err != nil {
		return nil, err
	}
	h.prefix = svc.redisPrefix("hw_" + label)
	if _, err := h.AddNode(ctx); err != nil {
		return nil, err
	}
	if h.pool, err = newPool(ctx, h.dbURL, 4); err != nil {
		return nil, err
	}
	if err := h.createTenant(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// AddNode starts one more `hookwheel serve` (with args, e.g.
// --dispatcher-only) on the same database and Redis.
func (h *hookwheelSystem) AddNode(ctx context.Context, args ...string) (*hookwheelNode, error) {
	name := fmt.Sprintf("hookwheel-%d", len(h.nodes)+1)
	// The node's name as its application_name tells its Postgres backends
	// apart from the other nodes' in pg_stat_activity.
	dbURL, err := withParam(h.dbURL, "application_name", name)
	if err != nil {
		return nil, err
	}
	n, err := h.svc.startNode(ctx, name, nodeConfig{
		bin: h.bin, databaseURL: dbURL, redisURL: h.svc.redisURL, redisPrefix: h.prefix,
		adminToken: h.adminToken, senders: h.senders, args: args,
	})
	if err != nil {
		return nil, err
	}
	h.nodes = append(h.nodes, n)
	return n, nil
}

func (h *hookwheelSystem) Name() string   { return "hookwheel" }
func (h *hookwheelSystem) Secret() string { return h.secret }

func (h *hookwheelSystem) Settings() map[string]string {
	senders := "128 (default)"
	if h.senders > 0 {
		senders = strconv.Itoa(h.senders)
	}
	ingest := "POST /v1/tasks/batch, " + strconv.Itoa(h.batchSize) + " tasks per call, " + strconv.Itoa(h.batchConc) + " calls in flight"
	if h.batchMode.Load() < 0 {
		ingest = "POST /v1/tasks (batch answered 501), " + strconv.Itoa(h.singleConc) + " calls in flight"
	}
	return map[string]string{
		"process":   "`hookwheel serve` (API and dispatcher in one process), built from ../cmd/hookwheel",
		"senders":   senders,
		"settings":  "defaults: 1 ms wheel tick, 30 s lookahead, claims 50 ms ahead, at most 1/4 of the senders per target",
		"ingest":    ingest,
		"log_level": "warn",
	}
}

func (h *hookwheelSystem) client(node int, bearer string) (*openapi.ClientWithResponses, error) {
	return openapi.NewClientWithResponses(h.nodes[node].base,
		openapi.WithHTTPClient(h.http),
		openapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+bearer)
			return nil
		}))
}

func (h *hookwheelSystem) apiClient() (*openapi.ClientWithResponses, error) {
	return h.client(int(h.submitNode.Load()), h.apiKey)
}

func (h *hookwheelSystem) createTenant(ctx context.Context) error {
	c, err := h.client(0, h.adminToken)
	if err != nil {
		return err
	}
	resp, err := c.CreateTenantWithResponse(ctx, openapi.TenantCreateRequest{Name: "hwbench"})
	if err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	if resp.JSON201 == nil {
		return fmt.Errorf("create tenant: %s %s", resp.Status(), resp.Body)
	}
	h.apiKey, h.secret = resp.JSON201.APIKey, resp.JSON201.SigningSecret
	return nil
}

var jsonHeaders = map[string]string{"Content-Type": "application/json"}

func (h *hookwheelSystem) Schedule(ctx context.Context, run, url string, tasks []task) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(tasks))
	if h.batchMode.Load() >= 0 {
		done, err := h.scheduleBatch(ctx, run, url, tasks, ids)
		if err != nil {
			return nil, err
		}
		if done {
			return ids, nil
		}
	}
	return ids, h.scheduleSingle(ctx, run, url, tasks, ids)
}

var errBatchUnsupported = errors.New("batch unsupported")

// scheduleBatch reports false when the server does not implement the batch
// route; the caller then falls back to single calls.
func (h *hookwheelSystem) scheduleBatch(ctx context.Context, run, url string, tasks []task, ids []uuid.UUID) (bool, error) {
	c, err := h.apiClient()
	if err != nil {
		return false, err
	}
	chunks := make(chan int)
	var (
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	for range h.batchConc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := range chunks {
				to := min(from+h.batchSize, len(tasks))
				if err := h.postBatch(ctx, c, run, url, tasks[from:to], ids[from:to]); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
feed:
	for from := 0; from < len(tasks); from += h.batchSize {
		select {
		case chunks <- from:
		case <-ctx.Done():
			break feed
		}
	}
	close(chunks)
	wg.Wait()
	if errors.Is(firstErr, errBatchUnsupported) {
		return false, nil
	}
	return firstErr == nil, firstErr
}

func (h *hookwheelSystem) postBatch(ctx context.Context, c *openapi.ClientWithResponses, run, url string, tasks []task, ids []uuid.UUID) error {
	items := make([]openapi.BatchTaskRequest, len(tasks))
	for i, t := range tasks {
		due := t.due
		items[i] = openapi.BatchTaskRequest{URL: url, Body: makeBody(run, t.seq, t.due), RunAt: &due, Headers: jsonHeaders}
		if t.orderingKey != "" {
			items[i].OrderingKey = &t.orderingKey
		}
		if t.flowKey != "" {
			items[i].FlowKey = &t.flowKey
		}
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: items})
		if err != nil {
			return fmt.Errorf("POST /v1/tasks/batch: %w", err)
		}
		switch code := resp.StatusCode(); {
		case code == http.StatusNotImplemented || code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
			h.batchMode.Store(-1)
			h.batchNotice.Do(func() {
				logf("hookwheel: POST /v1/tasks/batch answered %d; falling back to concurrent single POST /v1/tasks", code)
			})
			return errBatchUnsupported
		case code == http.StatusTooManyRequests && attempt < 20:
			time.Sleep(100 * time.Millisecond)
			continue
		case resp.JSON200 == nil:
			return fmt.Errorf("POST /v1/tasks/batch: %s %.300s", resp.Status(), resp.Body)
		}
		h.batchMode.Store(1)
		if len(resp.JSON200.Data) != len(items) {
			return fmt.Errorf("POST /v1/tasks/batch: %d results for %d items", len(resp.JSON200.Data), len(items))
		}
		for i, r := range resp.JSON200.Data {
			if r.Task == nil {
				detail := ""
				if r.Error != nil {
					detail = r.Error.Title + ": " + r.Error.Detail
				}
				return fmt.Errorf("POST /v1/tasks/batch: item %d failed: %s", i, detail)
			}
			ids[i] = r.Task.ID
		}
		return nil
	}
}

func (h *hookwheelSystem) scheduleSingle(ctx context.Context, run, url string, tasks []task, ids []uuid.UUID) error {
	c, err := h.apiClient()
	if err != nil {
		return err
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range h.singleConc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) || ctx.Err() != nil {
					return
				}
				id, err := h.postOne(ctx, c, run, url, tasks[i])
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func (h *hookwheelSystem) postOne(ctx context.Context, c *openapi.ClientWithResponses, run, url string, t task) (uuid.UUID, error) {
	due := t.due
	req := openapi.TaskRequest{URL: url, Body: makeBody(run, t.seq, t.due), RunAt: &due, Headers: jsonHeaders}
	// Without its flow key a task would go unlimited, and the flow
	// scenario would measure nothing if the batch route were missing.
	if t.flowKey != "" {
		req.FlowKey = &t.flowKey
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{}, req)
		if err != nil {
			return uuid.Nil, fmt.Errorf("POST /v1/tasks: %w", err)
		}
		if resp.StatusCode() == http.StatusTooManyRequests && attempt < 20 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if resp.JSON201 == nil {
			return uuid.Nil, fmt.Errorf("POST /v1/tasks: %s %.300s", resp.Status(), resp.Body)
		}
		created, err := resp.JSON201.AsTask()
		if err != nil {
			return uuid.Nil, fmt.Errorf("POST /v1/tasks: read the task: %w", err)
		}
		return created.ID, nil
	}
}

// putFlowLimit limits the tenant's tasks of flow key to rate sends per
// period (PUT /v1/flow-keys/{key}), parallelism left unlimited.
func (h *hookwheelSystem) putFlowLimit(ctx context.Context, key string, rate int, period time.Duration) error {
	c, err := h.apiClient()
	if err != nil {
		return err
	}
	p := period.String()
	resp, err := c.PutFlowLimitWithResponse(ctx, key, openapi.FlowLimitRequest{Rate: &rate, Period: &p})
	if err != nil {
		return fmt.Errorf("PUT /v1/flow-keys/%s: %w", key, err)
	}
	// 201: the key had no limits; 200: they were replaced.
	if resp.JSON201 == nil && resp.JSON200 == nil {
		return fmt.Errorf("PUT /v1/flow-keys/%s: %s %.300s", key, resp.Status(), resp.Body)
	}
	return nil
}

// sendStarts waits (up to 30 s) until at least want attempts are written
// to Postgres, and returns when each began, in order (Unix ns, to the µs).
func (h *hookwheelSystem) sendStarts(ctx context.Context, want int) ([]int64, error) {
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err := h.attemptsRecorded(ctx)
		if err != nil {
			return nil, err
		}
		if got >= int64(want) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d attempts recorded 30 s after the last delivery", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rows, err := h.pool.Query(ctx, "SELECT (extract(epoch FROM started_at) * 1e6)::bigint * 1000 FROM attempts ORDER BY started_at")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// attemptsRecorded counts the attempts written to Postgres.
func (h *hookwheelSystem) attemptsRecorded(ctx context.Context) (int64, error) {
	var n int64
	err := h.pool.QueryRow(ctx, "SELECT count(*) FROM attempts").Scan(&n)
	return n, err
}

func (h *hookwheelSystem) Close() {
	for _, n := range h.nodes {
		n.stop()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h.dbURL != "" {
		h.svc.dropDatabase(ctx, h.dbURL)
	}
	if h.prefix != "" {
		h.svc.deleteRedisPrefix(ctx, h.prefix)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// idKeeper is a hookwheelSystem that keeps the ids of what it schedules.
type idKeeper struct {
	*hookwheelSystem
	ids *[]uuid.UUID
}

func (k *idKeeper) Schedule(ctx context.Context, run, url string, tasks []task) ([]uuid.UUID, error) {
	ids, err := k.hookwheelSystem.Schedule(ctx, run, url, tasks)
	if run != "calibrate" {
		*k.ids = ids
	}
	return ids, err
}
