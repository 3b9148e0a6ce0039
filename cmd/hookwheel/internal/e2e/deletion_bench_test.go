package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// BenchmarkTenantDeletion measures what deleting a large tenant costs its
// neighbours. Tenant "victim" has many stored tasks (pending a month ahead,
// and a fifth of them delivered, with two attempts each); tenant
// "neighbour" has a steady stream of tasks falling due to a receiver, which
// measures their fire lateness (arrival minus Hookwheel-Scheduled-At) in
// two phases: "alone", the victim's rows stored and untouched, and
// "beside", DELETE /v1/admin/tenants/{victim} sent at the phase's start,
// lateness counted for the tasks falling due until the deletion is done
// (GET /v1/admin/tenants/{victim} answers 404), the stream going on for at
// least the phase. It reports the lateness of both phases, the deletion's
// duration and the rows (tasks and attempts) it deleted per second.
//
// Settings, from the environment:
//
//	HOOKWHEEL_BENCH_VICTIM_TASKS    the victim's tasks (default 100000; 10000 with -short)
//	HOOKWHEEL_BENCH_NEIGHBOUR_RATE  the neighbour's tasks falling due per second (default 200)
//	HOOKWHEEL_BENCH_PHASE           how long each phase's stream lasts at least (default 20s)
//
// Run it with -benchtime 1x: one iteration is the whole scenario.
func BenchmarkTenantDeletion(b *testing.B) {
	victimTasks := 100_000
	if testing.Short() {
		victimTasks = 10_000
	}
	cfg := deletionBenchConfig{
		victimTasks: benchEnvInt(b, "HOOKWHEEL_BENCH_VICTIM_TASKS", victimTasks),
		rate:        benchEnvInt(b, "HOOKWHEEL_BENCH_NEIGHBOUR_RATE", 200),
		phase:       benchEnvDuration(b, "HOOKWHEEL_BENCH_PHASE", 20*time.Second),
	}
	for range b.N {
		runTenantDeletion(b, cfg)
	}
}

type deletionBenchConfig struct {
	victimTasks, rate int
	phase             time.Duration
}

const (
	// neighbourSlot is the span of due times the feeder creates in one
	// batch call, neighbourLead ahead of the first of them.
	neighbourSlot = 100 * time.Millisecond
	neighbourLead = 3 * time.Second
)

func runTenantDeletion(b *testing.B, cfg deletionBenchConfig) {
	ctx := context.Background()
	e := newEnv(b)
	n := e.startNode()
	victim := e.createTenant(n, "victim")
	neighbour := e.createTenant(n, "neighbour")
	db, err := pgx.Connect(ctx, e.databaseURL)
	require.NoError(b, err)
	defer db.Close(ctx)

	seeded := time.Now()
	tasks, attempts := seedVictim(b, db, benchClient(b, n.base, victim.apiKey, 4), victim, cfg.victimTasks)
	fmt.Fprintf(os.Stderr, "tenant deletion bench: the victim has %d tasks and %d attempts, stored in %s\n",
		tasks, attempts, time.Since(seeded).Round(time.Millisecond))

	rcv := newDueRecorder(b)
	feeder := &neighbourFeeder{client: benchClient(b, n.base, neighbour.apiKey, 2), url: rcv.URL + "/neighbour", rate: cfg.rate}
	b.ResetTimer()

	// Alone: the victim's rows stored, nothing deleting them.
	aloneStart := time.Now().Add(neighbourLead)
	aloneEnd := aloneStart.Add(cfg.phase)
	feeder.feed(b, aloneStart, func(slot time.Time) bool { return slot.Before(aloneEnd) })
	rcv.waitFor(b, feeder.created.Load(), aloneEnd.Add(time.Minute))

	// Beside: the deletion starts with the phase, the stream lasts until
	// it is done and at least the phase.
	besideStart := time.Now().Add(neighbourLead)
	besideEnd := besideStart.Add(cfg.phase)
	var deleted atomic.Bool
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		feeder.feed(b, besideStart, func(slot time.Time) bool {
			return (slot.Before(besideEnd) || !deleted.Load()) && slot.Before(besideStart.Add(time.Hour))
		})
	}()
	<-time.After(time.Until(besideStart)) // pacing: the phase starts now
	deleteStart := time.Now()
	status, body, err := apiCall(ctx, http.MethodDelete, n.base+"/v1/admin/tenants/"+victim.id.String(), "admin-token", nil, nil)
	require.NoError(b, err)
	require.Equal(b, http.StatusAccepted, status, string(body))
	deleteEnd := waitTenantGone(b, n.base, victim.id.String(), deleteStart)
	deleted.Store(true)
	<-fed
	rcv.waitFor(b, feeder.created.Load(), time.Now().Add(time.Minute))
	b.StopTimer()

	var left int
	require.NoError(b, db.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE tenant_id = $1`, victim.id).Scan(&left))
	require.Zero(b, left, "the victim's tasks are gone")

	alone, aloneEarly := rcv.lateness(aloneStart, aloneEnd)
	beside, besideEarly := rcv.lateness(besideStart, deleteEnd)
	took := deleteEnd.Sub(deleteStart)
	rowsPerSecond := float64(tasks+attempts) / took.Seconds()
	ms := func(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	b.ReportMetric(ms(alone, 50), "alone-p50-ms")
	b.ReportMetric(ms(alone, 99), "alone-p99-ms")
	b.ReportMetric(float64(alone.Max())/1000, "alone-max-ms")
	b.ReportMetric(ms(beside, 50), "beside-p50-ms")
	b.ReportMetric(ms(beside, 99), "beside-p99-ms")
	b.ReportMetric(float64(beside.Max())/1000, "beside-max-ms")
	b.ReportMetric(took.Seconds(), "delete-s")
	b.ReportMetric(rowsPerSecond, "delete-rows/s")
	fmt.Fprintf(os.Stderr, "tenant deletion bench: %d tasks and %d attempts deleted in %s (%.0f rows/s); neighbour at %d/s: "+
		"alone %d tasks, lateness p50 %.2f ms, p99 %.2f ms, max %.2f ms; beside the deletion %d tasks, p50 %.2f ms, p99 %.2f ms, max %.2f ms; "+
		"%d created after their due time, %d early, %d unreadable\n",
		tasks, attempts, took.Round(time.Millisecond), rowsPerSecond, cfg.rate,
		alone.TotalCount(), ms(alone, 50), ms(alone, 99), float64(alone.Max())/1000,
		beside.TotalCount(), ms(beside, 50), ms(beside, 99), float64(beside.Max())/1000,
		feeder.createdLate.Load(), aloneEarly+besideEarly, rcv.invalid.Load())
}

// benchClient is a client acting for apiKey that keeps conns connections
// to the node alive.
func benchClient(b *testing.B, base, apiKey string, conns int) *openapi.ClientWithResponses {
	b.Helper()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = conns
	b.Cleanup(transport.CloseIdleConnections)
	client, err := openapi.NewClientWithResponses(base,
		openapi.WithHTTPClient(&http.Client{Transport: transport}),
		openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+apiKey)
			return nil
		}))
	require.NoError(b, err)
	return client
}

// seedVictim stores count tasks for the victim through the batch API, due
// in a month, then makes a fifth of them delivered after two attempts: the
// rows a tenant's deliveries leave, written in SQL because delivering them
// would take the benchmark minutes. It returns the victim's tasks and
// attempts.
func seedVictim(b *testing.B, db *pgx.Conn, client *openapi.ClientWithResponses, victim *tenant, count int) (tasks, attempts int) {
	b.Helper()
	const batch, callers = 1000, 4
	ctx := context.Background()
	body := `{"order":` + strconv.Quote(strings.Repeat("x", 200)) + `}`
	work := make(chan int)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for size := range work {
				items := make([]openapi.BatchTaskRequest, size)
				for i := range items {
					items[i] = openapi.BatchTaskRequest{URL: "https://victim.example/hook", Body: body, Delay: ptr("720h")}
				}
				resp, err := client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: items})
				if err != nil || resp.StatusCode() != http.StatusOK {
					b.Errorf("create the victim's tasks: %v %s", err, ingestStatus(resp))
				}
			}
		})
	}
	for left := count; left > 0; left -= batch {
		work <- min(batch, left)
	}
	close(work)
	wg.Wait()
	require.False(b, b.Failed())

	_, err := db.Exec(ctx, `WITH done AS (
			UPDATE tasks SET status = 'delivered', attempts = 2, next_attempt_at = NULL, last_status_code = 200, updated_at = now()
			WHERE id IN (SELECT id FROM tasks WHERE tenant_id = $1 ORDER BY id LIMIT $2)
			RETURNING id)
		INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, outcome)
		SELECT d.id, a, now(), 5, CASE a WHEN 1 THEN 503 ELSE 200 END, CASE a WHEN 1 THEN 'retry' ELSE 'success' END
		FROM done d, generate_series(1, 2) AS a`, victim.id, count/5)
	require.NoError(b, err)
	require.NoError(b, db.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM attempts a JOIN tasks t ON t.id = a.task_id
		WHERE t.tenant_id = $1) FROM tasks WHERE tenant_id = $1`, victim.id).Scan(&tasks, &attempts))
	require.Equal(b, count, tasks, "every victim task stored")
	return tasks, attempts
}

// neighbourFeeder creates the neighbour's stream: rate tasks a second
// falling due evenly, each neighbourSlot of them in one batch call made
// neighbourLead before the first of them falls due.
type neighbourFeeder struct {
	client      *openapi.ClientWithResponses
	url         string
	rate        int
	created     atomic.Int64
	createdLate atomic.Int64
}

// feed creates the slots from start on while more(the slot's start) holds,
// and returns when the last call has.
func (f *neighbourFeeder) feed(b *testing.B, start time.Time, more func(slot time.Time) bool) {
	const callers = 2
	perSlot := max(1, int(float64(f.rate)*neighbourSlot.Seconds()))
	slots := make(chan []openapi.BatchTaskRequest, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for items := range slots {
				if time.Now().After(*items[0].RunAt) {
					f.createdLate.Add(int64(len(items)))
				}
				resp, err := f.client.CreateTasksBatchWithResponse(context.Background(), openapi.BatchRequest{Tasks: items})
				if err != nil || resp.StatusCode() != http.StatusOK {
					b.Errorf("create the neighbour's tasks: %v %s", err, ingestStatus(resp))
					continue
				}
				for _, res := range resp.JSON200.Data {
					if res.Task == nil {
						b.Errorf("a neighbour's task refused: %+v", res.Error)
						continue
					}
					f.created.Add(1)
				}
			}
		})
	}
	for slot := start; more(slot); slot = slot.Add(neighbourSlot) {
		<-time.After(time.Until(slot.Add(-neighbourLead))) // pacing: the slot is due to be created
		items := make([]openapi.BatchTaskRequest, perSlot)
		for i := range items {
			at := slot.Add(time.Duration(i) * neighbourSlot / time.Duration(perSlot))
			items[i] = openapi.BatchTaskRequest{URL: f.url, Body: `{"neighbour":true}`, RunAt: &at}
		}
		slots <- items
	}
	close(slots)
	wg.Wait()
}

// waitTenantGone polls the tenant through the admin API until it answers
// 404, printing the deletion's progress every few seconds, and returns
// when it first answered 404.
func waitTenantGone(b *testing.B, base, id string, started time.Time) time.Time {
	b.Helper()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	lastPrint := time.Now()
	for {
		status, body, err := apiCall(context.Background(), http.MethodGet, base+"/v1/admin/tenants/"+id, "admin-token", nil, nil)
		now := time.Now()
		require.NoError(b, err)
		if status == http.StatusNotFound {
			return now
		}
		require.Equal(b, http.StatusOK, status, string(body))
		if now.Sub(lastPrint) >= 5*time.Second {
			var t struct {
				Deletion *struct {
					Deleted map[string]int64 `json:"deleted"`
				} `json:"deletion"`
			}
			require.NoError(b, json.Unmarshal(body, &t))
			if t.Deletion != nil {
				fmt.Fprintf(os.Stderr, "tenant deletion bench: %s after the DELETE: %v\n", now.Sub(started).Round(time.Second), t.Deletion.Deleted)
			}
			lastPrint = now
		}
		require.Less(b, now.Sub(started), time.Hour, "the deletion is not done after an hour")
		<-poll.C
	}
}

// dueRecorder is a receiver that answers 200 and records each webhook's
// due time (Hookwheel-Scheduled-At) and lateness.
type dueRecorder struct {
	*httptest.Server
	mu       sync.Mutex
	samples  []dueSample
	received atomic.Int64
	invalid  atomic.Int64
}

type dueSample struct {
	due  time.Time
	late time.Duration
}

func newDueRecorder(b *testing.B) *dueRecorder {
	r := &dueRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived := time.Now()
		due, err := time.Parse(time.RFC3339Nano, req.Header.Get("Hookwheel-Scheduled-At"))
		if err != nil {
			r.invalid.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.samples = append(r.samples, dueSample{due: due, late: arrived.Sub(due)})
		r.mu.Unlock()
		r.received.Add(1)
	}))
	b.Cleanup(r.Close)
	return r
}

// waitFor polls until n webhooks have arrived, or fails at the deadline.
func (r *dueRecorder) waitFor(b *testing.B, n int64, deadline time.Time) {
	b.Helper()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for r.received.Load() < n {
		require.True(b, time.Now().Before(deadline), "%d of %d webhooks arrived by the deadline", r.received.Load(), n)
		<-poll.C
	}
}

// lateness is the lateness of the webhooks due in [from, to), in
// microseconds, and how many of them arrived early (counted as 0).
func (r *dueRecorder) lateness(from, to time.Time) (*hdrhistogram.Histogram, int) {
	h := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	early := 0
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.due.Before(from) || !s.due.Before(to) {
			continue
		}
		if s.late < 0 {
			early++
		}
		_ = h.RecordValue(max(1, s.late.Microseconds()))
	}
	return h, early
}
