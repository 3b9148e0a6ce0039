package e2e_test

import (
	"context"
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

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/openapi"
)

// BenchmarkRetention runs a steady stream of tasks falling due, created
// through the batch API a few seconds ahead, for a while, with a retention
// of a minute, and prints every report interval the size of the tasks and
// attempts tables and of their indexes, their live and dead rows, the rows
// purged so far and the fire lateness (arrival at the receiver minus the
// task's due time) of the interval. With purging the sizes should level off
// after the retention and autovacuum have come round; lateness should match
// the run that keeps everything. Two sub-benchmarks, one run each:
//
//	purge  the node default retention (HOOKWHEEL_BENCH_RETENTION)
//	keep   nothing purged (HOOKWHEEL_RETENTION=0), for comparison
//
// Settings, from the environment:
//
//	HOOKWHEEL_BENCH_RATE       tasks falling due per second (default 5000)
//	HOOKWHEEL_BENCH_DURATION   how long they keep falling due (default 10m)
//	HOOKWHEEL_BENCH_RETENTION  the retention of the purge run (default 1m)
//	HOOKWHEEL_BENCH_REPORT     the report interval (default 1m)
//
// For example, the full run of one mode (the go test timeout must outlast it):
//
//	go test -run '^$' -bench 'Retention/purge' -benchtime 1x -timeout 0 ./cmd/hookwheel/internal/e2e
func BenchmarkRetention(b *testing.B) {
	cfg := retentionBenchConfig{
		rate:      benchEnvInt(b, "HOOKWHEEL_BENCH_RATE", 5000),
		duration:  benchEnvDuration(b, "HOOKWHEEL_BENCH_DURATION", 10*time.Minute),
		retention: benchEnvDuration(b, "HOOKWHEEL_BENCH_RETENTION", time.Minute),
		report:    benchEnvDuration(b, "HOOKWHEEL_BENCH_REPORT", time.Minute),
	}
	for _, mode := range []string{"purge", "keep"} {
		b.Run(mode, func(b *testing.B) {
			c := cfg
			if mode == "keep" {
				c.retention = dispatcher.KeepForever
			}
			for range b.N {
				runRetentionBench(b, mode, c)
			}
		})
	}
}

type retentionBenchConfig struct {
	rate                        int
	duration, retention, report time.Duration
}

func benchEnvInt(b *testing.B, name string, fallback int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	require.Positive(b, n, name)
	return n
}

func benchEnvDuration(b *testing.B, name string, fallback time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	d, err := time.ParseDuration(v)
	require.NoError(b, err, name)
	require.Positive(b, d, name)
	return d
}

// latenessWindow is the lateness of the deliveries of one report interval,
// and of the whole run.
type latenessWindow struct {
	mu             sync.Mutex
	window, total  *hdrhistogram.Histogram
	early, invalid int64
}

func newLatenessWindow() *latenessWindow {
	// Microseconds, 1 µs to 10 min at 3 significant digits.
	return &latenessWindow{
		window: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3),
		total:  hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3),
	}
}

func (l *latenessWindow) record(late time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if late < 0 {
		l.early++
		late = 0
	}
	us := max(1, late.Microseconds())
	_ = l.window.RecordValue(us)
	_ = l.total.RecordValue(us)
}

// take returns the interval's count, p50 and p99 in milliseconds, and starts
// the next interval.
func (l *latenessWindow) take() (n int64, p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, p50, p99 = l.window.TotalCount(), float64(l.window.ValueAtQuantile(50))/1000, float64(l.window.ValueAtQuantile(99))/1000
	l.window.Reset()
	return n, p50, p99
}

func runRetentionBench(b *testing.B, mode string, cfg retentionBenchConfig) {
	ctx := context.Background()
	e := newEnv(b)
	n := e.startNode(func(c *app.Config) { c.Dispatcher.Retention = cfg.retention })
	acme := e.createTenant(n, "bench")
	db, err := pgx.Connect(ctx, e.databaseURL)
	require.NoError(b, err)
	defer db.Close(ctx)

	late := newLatenessWindow()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		at, err := time.Parse(time.RFC3339Nano, r.Header.Get("Hookwheel-Scheduled-At"))
		if err != nil {
			late.mu.Lock()
			late.invalid++
			late.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		late.record(arrived.Sub(at))
	}))
	defer recv.Close()

	// The feeder creates each 100 ms slot of tasks lead ahead of its due
	// time, in batch calls of up to 1,000 spread over a few connections.
	const (
		slot    = 100 * time.Millisecond
		lead    = 5 * time.Second
		callers = 4
	)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = callers
	defer transport.CloseIdleConnections()
	client, err := openapi.NewClientWithResponses(n.base,
		openapi.WithHTTPClient(&http.Client{Transport: transport}),
		openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+acme.apiKey)
			return nil
		}))
	require.NoError(b, err)
	body := `{"order":` + strconv.Quote(strings.Repeat("x", 200)) + `}`
	perSlot := max(1, int(float64(cfg.rate)*slot.Seconds()))
	slots := int(cfg.duration / slot)
	start := time.Now().Add(lead)
	var createdLate, createErrors atomic.Int64
	batches := make(chan []openapi.BatchTaskRequest, callers)
	var feeders sync.WaitGroup
	for range callers {
		feeders.Go(func() {
			for items := range batches {
				if time.Now().After(*items[0].RunAt) {
					createdLate.Add(int64(len(items)))
				}
				resp, err := client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: items})
				if err != nil || resp.StatusCode() != http.StatusOK {
					createErrors.Add(int64(len(items)))
				}
			}
		})
	}
	go func() {
		defer close(batches)
		for s := range slots {
			slotStart := start.Add(time.Duration(s) * slot)
			<-time.After(time.Until(slotStart.Add(-lead)))
			items := make([]openapi.BatchTaskRequest, 0, perSlot)
			for i := range perSlot {
				at := slotStart.Add(time.Duration(i) * slot / time.Duration(perSlot))
				items = append(items, openapi.BatchTaskRequest{URL: recv.URL + "/hook", Body: body, RunAt: &at})
				if len(items) == 1000 || i == perSlot-1 {
					batches <- items
					items = make([]openapi.BatchTaskRequest, 0, perSlot)
				}
			}
		}
	}()

	fmt.Fprintf(os.Stderr, "retention bench %s: %d tasks/s due for %s, retention %s, report every %s\n",
		mode, cfg.rate, cfg.duration, retentionText(cfg.retention), cfg.report)
	// Purged rows are only dead rows until vacuum reclaims them: with
	// autovacuum off (as on some CI servers) the tables grow whatever the
	// retention, and the sizes printed say nothing about leveling off.
	var autovacuum string
	require.NoError(b, db.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum))
	if autovacuum != "on" {
		fmt.Fprintf(os.Stderr, "retention bench %s: warning: autovacuum is %s on this server; dead rows are never reclaimed, so the tables cannot level off\n",
			mode, autovacuum)
	}
	b.ResetTimer()
	end := start.Add(cfg.duration)
	// Progress goes to stderr as it happens: b.Logf would hold every line
	// until the benchmark ends.
	report := func(elapsed time.Duration) {
		count, p50, p99 := late.take()
		fmt.Fprintf(os.Stderr, "t=%-6s delivered=%-7d p50=%.2fms p99=%.2fms purged_tasks=%.0f oldest_finished=%.0fs %s\n",
			elapsed.Round(time.Second), count, p50, p99,
			metric(b, n, "hookwheel_retention_purged_total", `kind="tasks"`),
			metric(b, n, "hookwheel_retention_oldest_finished_age_seconds", ""),
			tableSizes(b, db))
	}
	tick := time.NewTicker(cfg.report)
	defer tick.Stop()
	for now := range tick.C {
		if !now.Before(end) {
			break
		}
		report(now.Sub(start))
	}
	feeders.Wait()
	// The last due tasks are sent within a second or so; wait for them so
	// that the last report counts them.
	<-time.After(time.Until(end.Add(2 * time.Second)))
	report(time.Since(start))
	b.StopTimer()

	late.mu.Lock()
	defer late.mu.Unlock()
	total := late.total
	b.ReportMetric(float64(total.ValueAtQuantile(50))/1000, "p50_ms")
	b.ReportMetric(float64(total.ValueAtQuantile(99))/1000, "p99_ms")
	b.ReportMetric(float64(total.ValueAtQuantile(99.9))/1000, "p999_ms")
	b.ReportMetric(float64(total.TotalCount()), "delivered")
	b.ReportMetric(float64(tableTotal(b, db, "tasks"))/(1<<20), "tasks_MiB")
	b.ReportMetric(float64(tableTotal(b, db, "attempts"))/(1<<20), "attempts_MiB")
	fmt.Fprintf(os.Stderr, "retention bench %s: %d delivered of %d; lateness p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms; "+
		"%d created after their due time, %d not created, %d early, %d unreadable\n",
		mode, total.TotalCount(), slots*perSlot, float64(total.ValueAtQuantile(50))/1000, float64(total.ValueAtQuantile(99))/1000,
		float64(total.ValueAtQuantile(99.9))/1000, float64(total.Max())/1000,
		createdLate.Load(), createErrors.Load(), late.early, late.invalid)
}

func retentionText(d time.Duration) string {
	if d == dispatcher.KeepForever {
		return "off (kept forever)"
	}
	return d.String()
}

// tableSizes describes the tasks and attempts tables: heap, indexes (all,
// and tasks_finished, which purging reads) and total in MiB, with their
// live and dead rows as the statistics collector counts them (a count(*)
// would scan the tables it measures).
func tableSizes(b *testing.B, db *pgx.Conn) string {
	b.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid),
			coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0),
			CASE WHEN c.relname = 'tasks' THEN pg_relation_size('tasks_finished') END
		FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE c.relname IN ('tasks', 'attempts') AND c.relkind = 'r'
		ORDER BY c.relname DESC`)
	require.NoError(b, err)
	defer rows.Close()
	const mib = 1 << 20
	var out []string
	for rows.Next() {
		var (
			name                 string
			heap, indexes, total int64
			live, dead           int64
			finishedIndex        *int64
		)
		require.NoError(b, rows.Scan(&name, &heap, &indexes, &total, &live, &dead, &finishedIndex))
		s := fmt.Sprintf("%s: heap=%.1fMiB indexes=%.1fMiB total=%.1fMiB live=%d dead=%d",
			name, float64(heap)/mib, float64(indexes)/mib, float64(total)/mib, live, dead)
		if finishedIndex != nil {
			s += fmt.Sprintf(" tasks_finished=%.1fMiB", float64(*finishedIndex)/mib)
		}
		out = append(out, s)
	}
	require.NoError(b, rows.Err())
	return strings.Join(out, " | ")
}

func tableTotal(b *testing.B, db *pgx.Conn, table string) int64 {
	b.Helper()
	var size int64
	require.NoError(b, db.QueryRow(context.Background(), `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&size))
	return size
}
