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
		runEndToEnd(b, tasks, spread)
	}
}

func runEndToEnd(b *testing.B, tasks int, spread time.Duration) {
	e := newEnv(b)
	n := e.startNode()
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
	case <-time.After(start.Sub(time.Now()) + spread + time.Minute):
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
