package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// BenchmarkEndToEnd schedules 10,000 tasks falling due evenly over 2 s to a
// local receiver and reports fire lateness as the receiver measures it
// (arrival minus Hookwheel-Scheduled-At) and the delivery rate. Run it with
// -benchtime 1x: one iteration is one full scenario.
func BenchmarkEndToEnd(b *testing.B) {
	const (
		tasks  = 10_000
		spread = 2 * time.Second
	)
	for range b.N {
		runEndToEnd(b, tasks, spread, nil)
	}
}

// BenchmarkNoisyNeighbour measures one tenant's fire lateness, as
// BenchmarkEndToEnd does with 2,000 tasks due over 2 s, alone ("quiet") and
// beside another tenant whose 200 tasks to five receivers that accept
// connections and never answer hold its whole share of the senders
// ("noisy"). Run it with -benchtime 1x.
func BenchmarkNoisyNeighbour(b *testing.B) {
	const (
		tasks  = 2_000
		spread = 2 * time.Second
	)
	for _, noisy := range []bool{false, true} {
		name := "quiet"
		var neighbour func(e *env, n *node)
		if noisy {
			name = "noisy"
			neighbour = hangingNeighbour
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				runEndToEnd(b, tasks, spread, neighbour)
			}
		})
	}
}

// hangingNeighbour is a tenant whose 200 tasks, to five targets that never
// answer, hold its share of the node's senders (128 sends) until the end.
func hangingNeighbour(e *env, n *node) {
	noisy := e.createTenant(n, "noisy")
	var targets []*hangingTarget
	for range 5 {
		targets = append(targets, newHangingTarget(e.t))
	}
	for i := range 200 {
		resp, err := noisy.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{},
			openapi.TaskRequest{URL: targets[i%len(targets)].URL + "/hang", Timeout: ptr("5m")})
		require.NoError(e.t, err)
		require.Equal(e.t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	}
	waitConns(e.t, targets, 128, 30*time.Second)
}

// runEndToEnd runs one BenchmarkEndToEnd scenario; neighbour, when set,
// adds another tenant's load to the node first.
func runEndToEnd(b *testing.B, tasks int, spread time.Duration, neighbour func(e *env, n *node)) {
	e := newEnv(b)
	n := e.startNode()
	if neighbour != nil {
		neighbour(e, n)
	}
	acme := e.createTenant(n, "bench")

	// Lateness in microseconds, 1 µs to 1 min at 3 significant digits.
	lateness := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var (
		mu          sync.Mutex
		received    atomic.Int64
		early       atomic.Int64
		first, last time.Time
		allArrived  = make(chan struct{})
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		at, err := time.Parse(time.RFC3339Nano, r.Header.Get("Hookwheel-Scheduled-At"))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		late := arrived.Sub(at)
		if late < 0 {
			early.Add(1)
			late = 0
		}
		mu.Lock()
		_ = lateness.RecordValue(max(1, late.Microseconds()))
		if first.IsZero() {
			first = arrived
		}
		last = arrived
		mu.Unlock()
		if received.Add(1) == int64(tasks) {
			close(allArrived)
		}
	}))
	defer recv.Close()

	// Create every task before the first falls due, through the API.
	start := time.Now().Add(15 * time.Second)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				at := start.Add(time.Duration(i) * spread / time.Duration(tasks))
				resp, err := acme.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{},
					openapi.TaskRequest{URL: recv.URL, Body: `{"bench":true}`, RunAt: &at})
				if err != nil || resp.StatusCode() != http.StatusCreated {
					b.Errorf("create task: %v %v", err, resp.Status())
					return
				}
			}
		}()
	}
	created := time.Now()
	for i := range tasks {
		work <- i
	}
	close(work)
	wg.Wait()
	createTook := time.Since(created)
	require.True(b, time.Now().Before(start), "creating %d tasks took %s, past the first due time", tasks, createTook)

	b.ResetTimer()
	select {
	case <-allArrived:
	case <-time.After(time.Until(start) + spread + time.Minute):
		b.Fatalf("only %d of %d tasks arrived", received.Load(), tasks)
	}
	b.StopTimer()

	mu.Lock()
	defer mu.Unlock()
	window := last.Sub(first)
	b.ReportMetric(float64(lateness.ValueAtQuantile(50))/1000, "p50_ms")
	b.ReportMetric(float64(lateness.ValueAtQuantile(99))/1000, "p99_ms")
	b.ReportMetric(float64(lateness.ValueAtQuantile(99.9))/1000, "p999_ms")
	b.ReportMetric(float64(lateness.Max())/1000, "max_ms")
	b.ReportMetric(float64(tasks)/window.Seconds(), "deliveries/s")
	b.ReportMetric(float64(tasks)/createTook.Seconds(), "creates/s")
	b.ReportMetric(float64(early.Load()), "early")
	b.Logf("%d tasks due over %s: lateness p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms; %0.f deliveries/s over %s; API created %.0f tasks/s; %d early",
		tasks, spread, float64(lateness.ValueAtQuantile(50))/1000, float64(lateness.ValueAtQuantile(99))/1000,
		float64(lateness.ValueAtQuantile(99.9))/1000, float64(lateness.Max())/1000,
		float64(tasks)/window.Seconds(), window, float64(tasks)/createTook.Seconds(), early.Load())
}

// BenchmarkIngest measures how many tasks per second the API stores, through
// real HTTP, with Postgres committing synchronously (synchronous_commit on,
// its default): single POST /v1/tasks calls from 32 concurrent clients,
// against POST /v1/tasks/batch with 1,000 tasks per call from 4 concurrent
// clients. The tasks fall due in an hour, so the dispatcher running in the
// node does not compete with the ingest. Run it with -benchtime 1x.
func BenchmarkIngest(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		const tasks, concurrency = 5_000, 32
		acme, client := ingestSetup(b, concurrency)
		b.ResetTimer()
		for range b.N {
			work := make(chan int)
			var wg sync.WaitGroup
			for range concurrency {
				wg.Go(func() {
					for range work {
						resp, err := client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{},
							openapi.TaskRequest{URL: "https://example.com/ingest", Body: `{"bench":true}`, Delay: ptr("1h")})
						if err != nil || resp.StatusCode() != http.StatusCreated {
							b.Errorf("create task: %v %s", err, ingestStatus(resp))
							return
						}
					}
				})
			}
			for i := range tasks {
				work <- i
			}
			close(work)
			wg.Wait()
		}
		b.StopTimer()
		reportIngest(b, acme, tasks)
	})
	b.Run("batch", func(b *testing.B) {
		const batches, size, concurrency = 40, 1000, 4
		acme, client := ingestSetup(b, concurrency)
		items := make([]openapi.BatchTaskRequest, size)
		for i := range items {
			items[i] = openapi.BatchTaskRequest{URL: "https://example.com/ingest", Body: `{"bench":true}`, Delay: ptr("1h")}
		}
		b.ResetTimer()
		for range b.N {
			work := make(chan int)
			var wg sync.WaitGroup
			for range concurrency {
				wg.Go(func() {
					for range work {
						resp, err := client.CreateTasksBatchWithResponse(context.Background(), openapi.BatchRequest{Tasks: items})
						if err != nil || resp.StatusCode() != http.StatusOK {
							b.Errorf("create batch: %v %s", err, ingestStatus(resp))
							return
						}
						for _, res := range resp.JSON200.Data {
							if res.Task == nil {
								b.Errorf("batch item refused: %+v", res.Error)
								return
							}
						}
					}
				})
			}
			for i := range batches {
				work <- i
			}
			close(work)
			wg.Wait()
		}
		b.StopTimer()
		reportIngest(b, acme, batches*size)
	})
}

// ingestSetup starts a node on a database of its own and returns a tenant
// and a client for it that keeps a connection per concurrent caller alive
// (the default transport keeps two, and would measure TCP setup instead).
func ingestSetup(b *testing.B, concurrency int) (*tenant, *openapi.ClientWithResponses) {
	b.Helper()
	e := newEnv(b)
	n := e.startNode()
	acme := e.createTenant(n, "ingest")

	conn, err := pgx.Connect(context.Background(), e.databaseURL)
	require.NoError(b, err)
	defer conn.Close(context.Background())
	var syncCommit string
	require.NoError(b, conn.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&syncCommit))
	require.Equal(b, "on", syncCommit, "the benchmark measures durable commits")

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = concurrency
	b.Cleanup(transport.CloseIdleConnections)
	client, err := openapi.NewClientWithResponses(n.base,
		openapi.WithHTTPClient(&http.Client{Transport: transport}),
		openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+acme.apiKey)
			return nil
		}))
	require.NoError(b, err)
	return acme, client
}

// reportIngest checks that every task was stored and reports the rate.
func reportIngest(b *testing.B, acme *tenant, perOp int) {
	b.Helper()
	stored := 0
	var cursor *string
	for {
		resp, err := acme.client.ListTasksWithResponse(context.Background(), &openapi.ListTasksParams{Limit: ptr(500), Cursor: cursor})
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode())
		stored += len(resp.JSON200.Data)
		if resp.JSON200.NextCursor == nil {
			break
		}
		cursor = resp.JSON200.NextCursor
	}
	require.Equal(b, perOp*b.N, stored, "every task stored")
	rate := float64(perOp*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "tasks/s")
	b.Logf("%d tasks in %s: %.0f tasks/s", perOp*b.N, b.Elapsed().Round(time.Millisecond), rate)
}

// ingestStatus describes a generated client's response, nil on an error.
func ingestStatus[R any, P interface {
	*R
	Status() string
}](resp P) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status()
}
