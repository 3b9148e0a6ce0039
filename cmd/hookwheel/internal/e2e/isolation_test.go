package e2e_test

// One tenant must never hurt another: a tenant whose receivers accept
// connections and never answer, or who sends the largest bodies to them,
// holds its own share of a node and no more; and a node asked to stop does
// not wait for such sends longer than its shutdown timeout.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// hangingTarget accepts connections, reads what comes, and never answers.
type hangingTarget struct {
	ln       net.Listener
	URL      string
	accepted atomic.Int64
	open     atomic.Int64
	changed  chan struct{}

	mu    sync.Mutex
	conns []net.Conn
	// closed is set once the test's cleanup has closed every connection:
	// one accepted meanwhile is closed at once, or it would hang the node's
	// stop for its shutdown bound.
	closed bool
}

func newHangingTarget(t testing.TB) *hangingTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hangingTarget{ln: ln, URL: "http://" + ln.Addr().String(), changed: make(chan struct{}, 1)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			if h.closed {
				h.mu.Unlock()
				_ = conn.Close()
				continue
			}
			h.conns = append(h.conns, conn)
			h.mu.Unlock()
			h.accepted.Add(1)
			h.open.Add(1)
			select {
			case h.changed <- struct{}{}:
			default:
			}
			go func() {
				_, _ = io.Copy(io.Discard, conn)
				h.open.Add(-1)
				select {
				case h.changed <- struct{}{}:
				default:
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closed = true
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

// openConns sums the connections open to the targets.
func openConns(targets []*hangingTarget) int64 {
	var n int64
	for _, h := range targets {
		n += h.open.Load()
	}
	return n
}

// waitConns waits until the targets hold want connections at once.
func waitConns(t testing.TB, targets []*hangingTarget, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for openConns(targets) < want {
		require.True(t, time.Now().Before(deadline), "the hanging targets hold %d connections, want %d", openConns(targets), want)
		select {
		case <-targets[0].changed:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestNoisyTenantDoesNotStallOthers: tenant A's tasks to five targets that
// never answer hold A's share of the senders (128 by default) and no more;
// tenant B's webhooks go out on time meanwhile. Handing senders out first
// come first served, A's targets held every sender and B's webhooks waited
// for A's timeouts.
func TestNoisyTenantDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	noisy, quiet := e.createTenant(n, "noisy"), e.createTenant(n, "quiet")

	// The longest timeout a tenant may give is bounded (HOOKWHEEL_MAX_TIMEOUT,
	// 5m by default).
	resp, err := noisy.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{},
		openapi.TaskRequest{URL: "http://example.com/hook", Timeout: ptr("30m")})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode(), string(resp.Body))
	require.Contains(t, string(resp.Body), "timeout")

	var targets []*hangingTarget
	for range 5 {
		targets = append(targets, newHangingTarget(t))
	}
	reqs := make([]openapi.TaskRequest, 200)
	for i := range reqs {
		reqs[i] = openapi.TaskRequest{URL: targets[i%len(targets)].URL + "/hang", Timeout: ptr("5m")}
	}
	scheduleAll(t, noisy, reqs)
	const share = 128 // dispatcher.Config.SendersPerTenant's default
	waitConns(t, targets, share, 15*time.Second)

	healthy := newReceiver(t)
	start := time.Now().Add(500 * time.Millisecond)
	for i := range 20 {
		at := start.Add(time.Duration(i) * 20 * time.Millisecond)
		quiet.schedule(t, openapi.TaskRequest{URL: healthy.URL + "/ok", RunAt: &at})
	}
	stored := time.Now()
	ds := healthy.waitFor(t, 15*time.Second, "the quiet tenant's webhooks", func(ds []delivery) bool { return len(ds) == 20 })
	worst := worstLateness(t, ds, stored)
	t.Logf("quiet tenant's worst lateness beside a noisy tenant holding %d hanging sends: %s", openConns(targets), worst)
	require.Less(t, worst, time.Second, "a tenant's webhooks must not wait for another tenant's hanging targets")
	require.Equal(t, int64(share), openConns(targets), "the noisy tenant never holds more than its share")
}

// countStatus counts the database's tasks in status, as the API reads it: a
// claimed task is dispatching whatever status it keeps (store.ClaimTasks).
func countStatus(t *testing.T, dbURL, status string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM tasks
		WHERE CASE WHEN claim_token IS NULL THEN status ELSE 'dispatching' END = $1`, status).Scan(&n))
	return n
}

// countPending counts the tasks waiting or in flight (max_pending_tasks's
// count), in one statement.
func countPending(t *testing.T, dbURL string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM tasks
		WHERE status IN ('scheduled', 'retrying', 'dispatching')`).Scan(&n))
	return n
}

// TestLargeBodiesToHangingTargets: 300 tasks with 1 MB bodies, claimed and
// waiting for three targets that never answer, keep the node's heap near
// the tenant's byte budget (64 MiB), not 300 MB: claims carry no long body,
// and the bodies in flight are bounded per tenant. It runs the real binary,
// so the heap measured is the node's alone.
func TestLargeBodiesToHangingTargets(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", append(serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)),
		"HOOKWHEEL_SHUTDOWN_TIMEOUT=1s"))
	apiKey := createTenantVia(t, node.base, chaosAdminToken, "big-bodies")
	idle := metricAt(t, node.base, "go_memstats_heap_inuse_bytes", "")

	var targets []*hangingTarget
	for range 3 {
		targets = append(targets, newHangingTarget(t))
	}
	const tasks = 300
	// Created an hour ahead, then all made due at once: storing 300 MB
	// takes long on a loaded machine, and tasks sent while the rest were
	// still being created would hang past the targets' StuckAfter (15 s)
	// and trip their breakers, which rightly defer the tasks not yet sent.
	// The calls are raw, their answers read but not decoded nor checked
	// against openapi.yaml: each carries the 1 MB body, and decoding 600 of
	// them under the race detector took this test minutes.
	requests := make([][]byte, len(targets))
	for i, target := range targets {
		requests[i] = []byte(`{"url": "` + target.URL + `/hang", "timeout": "5m", "delay": "1h", "body": "` +
			strings.Repeat("x", 1_000_000) + `"}`)
	}
	ctx := context.Background()
	inParallel(t, tasks, func(i int) bool {
		status, body, err := postRaw(ctx, node.base+"/v1/tasks", apiKey, requests[i%len(requests)])
		return assert201(t, status, body, err)
	})
	require.False(t, t.Failed())
	status, body, err := apiCall(ctx, http.MethodGet, node.base+"/v1/tasks?limit=500", apiKey, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Data, tasks)
	now := time.Now().Format(time.RFC3339Nano)
	inParallel(t, tasks, func(i int) bool {
		status, body, err := apiCall(ctx, http.MethodPatch, node.base+"/v1/tasks/"+list.Data[i].ID, apiKey, map[string]any{"run_at": now}, nil)
		if err != nil || status != http.StatusOK {
			t.Errorf("reschedule task %s: %d %v %.300s", list.Data[i].ID, status, err, body)
			return false
		}
		return true
	})
	require.False(t, t.Failed())

	// Every task is claimed: a share's worth sending, the rest waiting for
	// the tenant's share.
	deadline := time.Now().Add(30 * time.Second)
	for countStatus(t, dbURL, "dispatching") < tasks {
		require.True(t, time.Now().Before(deadline), "all %d tasks claimed", tasks)
		time.Sleep(50 * time.Millisecond) // polling the database, no signal to wait on
	}
	waitConns(t, targets, 60, 10*time.Second)
	heap := metricAt(t, node.base, "go_memstats_heap_inuse_bytes", "")
	rss := metricAt(t, node.base, "process_resident_memory_bytes", "")
	t.Logf("%d tasks of 1 MB claimed, %d sends hanging: heap in use %.0f MB (idle %.0f MB), RSS %.0f MB",
		tasks, openConns(targets), heap/1e6, idle/1e6, rss/1e6)
	require.LessOrEqual(t, openConns(targets), int64(67), "no more bodies in flight than the tenant's 64 MiB")
	require.Less(t, heap, 200e6, "the claims must not hold their bodies")
}

// TestStopIsBounded: SIGTERM waits at most HOOKWHEEL_SHUTDOWN_TIMEOUT for a
// send whose receiver never answers, then cuts it off; the attempt is
// recorded as interrupted, and the task is sent again at once by the next
// node, nothing lost. Before, a stop waited for the send's whole timeout.
func TestStopIsBounded(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	env := append(serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)), "HOOKWHEEL_SHUTDOWN_TIMEOUT=2s")
	first := startServe(t, "first", env)
	apiKey := createTenantVia(t, first.base, chaosAdminToken, "stopping")
	client := clientFor(t, first.base, apiKey)

	hang := make(chan struct{})
	var hangOnce sync.Once
	release := func() { hangOnce.Do(func() { close(hang) }) }
	recv := newReceiver(t)
	// After the receiver, so it runs before the receiver's Close, which
	// waits for the handler blocked on hang.
	t.Cleanup(release)
	recv.setRespond(func(_ delivery, nth int) (int, http.Header) {
		if nth == 1 {
			<-hang
		}
		return http.StatusOK, nil
	})
	resp, err := client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{},
		openapi.TaskRequest{URL: recv.URL + "/slow", Timeout: ptr("5m")})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	id := taskOf(t, resp.JSON201).ID
	recv.waitFor(t, 10*time.Second, "the first attempt", func(ds []delivery) bool { return len(ds) == 1 })

	stopAt := time.Now()
	require.NoError(t, first.Term(20*time.Second), "SIGTERM must end the node within its shutdown timeout")
	stopped := time.Since(stopAt)
	t.Logf("stopped %s after SIGTERM with a send in flight", stopped)
	require.GreaterOrEqual(t, stopped, 2*time.Second, "the send in flight was given its shutdown timeout")
	release()

	second := startServe(t, "second", env)
	ds := recv.waitFor(t, 20*time.Second, "the task sent again", func(ds []delivery) bool { return len(ds) == 2 })
	require.Equal(t, ds[0].webhookID(), ds[1].webhookID())
	require.Equal(t, "2", ds[1].header.Get("Hookwheel-Attempt"))

	c2 := clientFor(t, second.base, apiKey)
	deadline := time.Now().Add(10 * time.Second)
	var attempts []openapi.Attempt
	for {
		got, err := c2.ListTaskAttemptsWithResponse(context.Background(), id, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, got.StatusCode(), string(got.Body))
		attempts = got.JSON200.Data
		if len(attempts) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the API, no signal to wait on
	}
	require.Len(t, attempts, 2, fmt.Sprintf("%+v", attempts))
	require.NotNil(t, attempts[0].Error)
	require.Contains(t, *attempts[0].Error, "interrupted")
	require.Equal(t, openapi.AttemptOutcomeRetry, attempts[0].Outcome)
	require.Equal(t, openapi.AttemptOutcomeSuccess, attempts[1].Outcome)
}

// refusedPort is a port nothing listens on in the tests (tcpmux, port 1):
// dialled on a 127.1.0.0/16 address, where no test listens either, it
// answers "connection refused".
const refusedPort = 1

// TestIdleTargetsForgotten: a tenant sending to a thousand distinct targets
// (here closed ports) leaves no lasting state behind: each target's breaker
// and slots are forgotten once idle. Before, every target ever sent to was
// kept for the life of the process.
func TestIdleTargetsForgotten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Dispatcher.Breaker.IdleAfter = time.Second })
	acme := e.createTenant(n, "many-hosts")

	// A thousand loopback addresses on a port nothing listens on: each
	// answers "connection refused". (Ports that were free a moment ago
	// could be another test's listener by the time they are dialled.)
	var reqs []openapi.TaskRequest
	for i := range 1000 {
		addr := fmt.Sprintf("127.1.%d.%d:%d", i/250, 1+i%250, refusedPort)
		reqs = append(reqs, openapi.TaskRequest{URL: "http://" + addr + "/x", Timeout: ptr("2s"),
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	}
	scheduleAll(t, acme, reqs)
	// How many targets are kept at once depends on how fast the tasks go
	// out, which a loaded machine slows; what must hold is that every one
	// is forgotten once its last task is done.
	var peak float64
	deadline := time.Now().Add(2 * time.Minute)
	for countStatus(t, e.databaseURL, "dead") < len(reqs) {
		require.True(t, time.Now().Before(deadline), "%d of %d tasks dead", countStatus(t, e.databaseURL, "dead"), len(reqs))
		peak = max(peak, metric(t, n, "hookwheel_targets", ""))
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	peak = max(peak, metric(t, n, "hookwheel_targets", ""))
	require.Positive(t, peak, "targets are counted while they are sent to")
	waitMetric(t, n, "hookwheel_targets", "", 30*time.Second, func(v float64) bool { return v == 0 })
	t.Logf("targets kept: at most %.0f seen while sending, 0 once idle", peak)
}

// TestUnauthenticatedConnectionsAreBounded: connections left idle after a
// health check, and a request trickled a byte at a time, are closed by the
// real binary within its configured bounds; before, both were held open for
// ever by clients that never authenticated. Errors net/http answers by
// itself are problem+json.
func TestUnauthenticatedConnectionsAreBounded(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", append(serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)),
		"HOOKWHEEL_HTTP_IDLE_TIMEOUT=1s", "HOOKWHEEL_HTTP_READ_TIMEOUT=2s"))
	addr := strings.TrimPrefix(node.base, "http://")

	closed := func(conn net.Conn, within time.Duration) bool {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(within)))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	var idle []net.Conn
	for range 100 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		idle = append(idle, conn)
	}
	for i, conn := range idle {
		require.True(t, closed(conn, 15*time.Second), "idle connection %d still open after 15s", i)
	}

	trickled, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer trickled.Close()
	_, err = io.WriteString(trickled, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	trickle := time.NewTicker(200 * time.Millisecond)
	defer trickle.Stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := io.WriteString(trickled, " "); err != nil {
			break // closed by the server
		}
		require.True(t, time.Now().Before(deadline), "a request trickled a byte every 200ms was still being read after 15s")
		<-trickle.C
	}

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 80<<10)+"\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
}

// TestConcurrentLargeBatchesAreBounded: eight batch calls of 31 MiB at once,
// from two tenants, every item invalid, leave the node's peak RSS far below
// what holding them all would take (715 MB before): calls beyond the
// node's batch budget are refused with 429, Retry-After, and go through when
// sent again.
func TestConcurrentLargeBatchesAreBounded(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)))
	pid, _ := node.Running()
	keys := []string{createTenantVia(t, node.base, chaosAdminToken, "batch-a"), createTenantVia(t, node.base, chaosAdminToken, "batch-b")}

	item := `{"url": "nope", "body": "` + strings.Repeat("x", 1_000_000) + `"}`
	items := make([]string, 31)
	for i := range items {
		items[i] = item
	}
	batch := []byte(`{"tasks": [` + strings.Join(items, ",") + `]}`)

	post := func(key string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, node.base+"/v1/tasks/batch", bytes.NewReader(batch))
		if err != nil {
			return 0, err.Error()
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := contractClient(t).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	retryAfter := make([]string, 8)
	for i := range statuses {
		wg.Go(func() { statuses[i], retryAfter[i] = post(keys[i%2]) })
	}
	wg.Wait()
	peak := peakRSS(t, pid)
	var ok, busy int
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			busy++
			require.Equal(t, "1", retryAfter[i])
		default:
			t.Fatalf("batch %d answered %d", i, s)
		}
	}
	t.Logf("8 batches of %d MB at once: %d read, %d refused with 429; peak RSS %.0f MB", len(batch)/1e6, ok, busy, peak/1e6)
	require.Positive(t, ok)
	require.Less(t, peak, 400e6, "concurrent batches must not all be held at once")

	// A refused call goes through when it comes back alone.
	status, _ := post(keys[0])
	require.Equal(t, http.StatusOK, status)
}

// peakRSS is the highest resident set size process pid has had, in bytes.
func peakRSS(t *testing.T, pid int) float64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			require.NoError(t, err)
			return kb * 1024
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// inParallel runs do(0) to do(n-1) on four goroutines, and stops handing out
// work once one returns false.
func inParallel(t *testing.T, n int, do func(i int) bool) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if !do(i) {
					return
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
