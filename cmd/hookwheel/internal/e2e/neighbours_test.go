package e2e_test

// A tenant cannot hurt a neighbour sending to the same host, nor take a
// node's memory with its receivers' answers: its failures open its own
// breaker there, its hanging sends hold its own slots there, and an answer
// is read within bounds. They run the real binary.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// startTwoTenants starts a node and makes two tenants on it.
func startTwoTenants(t *testing.T) (n *serveNode, a, b *tenant) {
	t.Helper()
	n = startServe(t, "node", serveEnv(storetest.DatabaseURL(t), storetest.RedisURL(), storetest.RedisPrefix(t)))
	a = &tenant{client: clientFor(t, n.base, createTenantVia(t, n.base, chaosAdminToken, "a"))}
	b = &tenant{client: clientFor(t, n.base, createTenantVia(t, n.base, chaosAdminToken, "b"))}
	return n, a, b
}

// requireDeliveredAtOnce schedules tenant's webhook to url, due in half a
// second, and requires it delivered at its first attempt within a second
// of its due time.
func requireDeliveredAtOnce(t *testing.T, tn *tenant, recv *receiver, url string) {
	t.Helper()
	due := time.Now().Add(500 * time.Millisecond)
	task := tn.schedule(t, openapi.TaskRequest{URL: url, RunAt: &due})
	stored := time.Now()
	path := url[strings.LastIndex(url, "/"):]
	ds := recv.waitFor(t, 5*time.Second, "the neighbour's webhook", func(ds []delivery) bool {
		for _, d := range ds {
			if d.path == path {
				return true
			}
		}
		return false
	})
	var mine []delivery
	for _, d := range ds {
		if d.path == path {
			mine = append(mine, d)
		}
	}
	late := worstLateness(t, mine, stored)
	t.Logf("the neighbour's webhook arrived %s after its due time", late)
	require.Less(t, late, time.Second, "another tenant's trouble at the host must not delay this tenant's webhook")
	got := tn.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 5*time.Second)
	require.Equal(t, 1, got.Attempts, "delivered at its first attempt, not deferred")
}

// TestNeighbourFailuresOpenTheirOwnBreaker: tenant A's tasks keep failing
// (500) at a host, and open A's breaker there; tenant B's webhook to the
// same host goes out at once, at its first attempt. Before, the breaker was
// the host's: A's five failures deferred B's webhook to the breaker's probe,
// 30 s on.
func TestNeighbourFailuresOpenTheirOwnBreaker(t *testing.T) {
	t.Parallel()
	n, a, b := startTwoTenants(t)
	recv := newReceiver(t)
	recv.setRespond(func(d delivery, _ int) (int, http.Header) {
		if d.path == "/a" {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, nil
	})
	for range 10 {
		a.schedule(t, openapi.TaskRequest{URL: recv.URL + "/a",
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(20), MinBackoff: ptr("1s"), MaxBackoff: ptr("2s")}})
	}
	label := `target="` + targetOf(recv.URL) + `"`
	waitMetricAt(t, n.base, "hookwheel_breaker_state", label, 15*time.Second, func(v float64) bool { return v == 2 })
	waitMetricAt(t, n.base, "hookwheel_deferrals_total", `reason="breaker"`, 15*time.Second, func(v float64) bool { return v > 0 })

	requireDeliveredAtOnce(t, b, recv, recv.URL+"/b")
	require.Equal(t, 2.0, metricAt(t, n.base, "hookwheel_breaker_state", label), "A's breaker is still open")
}

// TestNeighbourHangsHoldTheirOwnSlots: tenant A's sends to a host hang, more
// of them than a target's send slots (32); tenant B's webhook to the same
// host goes out at once. Before, A's sends held every slot of the host and
// B's claim waited behind A's, until A's breaker opened on the stuck sends
// and deferred it too.
func TestNeighbourHangsHoldTheirOwnSlots(t *testing.T) {
	t.Parallel()
	_, a, b := startTwoTenants(t)
	recv := newReceiver(t)
	hang := make(chan struct{})
	// Registered after the receiver, so it runs before the receiver's
	// Close, which waits for the handlers held here.
	t.Cleanup(func() { close(hang) })
	recv.setRespond(func(d delivery, _ int) (int, http.Header) {
		if d.path == "/hang" {
			<-hang
		}
		return http.StatusOK, nil
	})
	const slots = 32 // dispatcher.Config.MaxPerTarget: SendersPerTenant/4
	reqs := make([]openapi.TaskRequest, slots+20)
	for i := range reqs {
		reqs[i] = openapi.TaskRequest{URL: recv.URL + "/hang", Timeout: ptr("5m")}
	}
	scheduleAll(t, a, reqs)
	recv.waitFor(t, 15*time.Second, "A's sends filling its slots", func(ds []delivery) bool { return len(ds) >= slots })

	requireDeliveredAtOnce(t, b, recv, recv.URL+"/b")
	hanging := 0
	for _, d := range recv.snapshot() {
		if d.path == "/hang" {
			hanging++
		}
	}
	require.Equal(t, slots, hanging, "A holds its own slots at the host, no more")
}

// waitMetricAt polls the metric of the node at base until ok holds, or
// fails the test.
func waitMetricAt(t *testing.T, base, name, labels string, within time.Duration, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := metricAt(t, base, name, labels)
		if ok(v) {
			return v
		}
		require.True(t, time.Now().Before(deadline), "%s{%s} is %v after %s", name, labels, v, within)
		time.Sleep(50 * time.Millisecond) // polling the metrics, no signal to wait on
	}
}

// headerBombs are receivers that answer every webhook with size bytes of
// headers (many of 1 KB), each answer held until hold requests have come,
// or three seconds after the first, so that the answers are read at once.
type headerBombs struct {
	URLs     []string
	answered atomic.Int64
}

func newHeaderBombs(t *testing.T, receivers, size, hold int) *headerBombs {
	t.Helper()
	var resp strings.Builder
	resp.WriteString("HTTP/1.1 200 OK\r\n")
	value := strings.Repeat("b", 1000)
	for i := 0; resp.Len() < size; i++ {
		fmt.Fprintf(&resp, "X-Bomb-%05d: %s\r\n", i, value)
	}
	resp.WriteString("Content-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	answer := []byte(resp.String())

	hb := &headerBombs{}
	release := make(chan struct{})
	var once, first sync.Once
	var arrived atomic.Int64
	open := func() { once.Do(func() { close(release) }) }
	var conns sync.WaitGroup
	var lns []net.Listener
	for range receivers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		hb.URLs = append(hb.URLs, "http://"+ln.Addr().String()+"/bomb")
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				go func() {
					defer conns.Done()
					defer conn.Close()
					req, err := http.ReadRequest(bufio.NewReader(conn))
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					first.Do(func() { time.AfterFunc(3*time.Second, open) })
					if arrived.Add(1) >= int64(hold) {
						open()
					}
					<-release
					if _, err := conn.Write(answer); err == nil {
						hb.answered.Add(1)
					}
				}()
			}
		}()
	}
	t.Cleanup(func() {
		open()
		for _, ln := range lns {
			_ = ln.Close()
		}
		conns.Wait()
	})
	return hb
}

// TestHeaderBombsAreBounded: a tenant's receivers answer its 256 webhooks,
// 128 at a time, each with 4 MB of headers: the node reads at most 64 KiB of
// an answer's headers, records each attempt as failed with a clear error,
// and its peak RSS stays far below what reading them would take (47 MB
// measured). Before, every answer was read whole (net/http's default bound
// is 10 MiB) and the attempts were delivered: a peak RSS of 632 MB.
func TestHeaderBombsAreBounded(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)))
	pid, _ := node.Running()
	apiKey := createTenantVia(t, node.base, chaosAdminToken, "bombs")
	client := clientFor(t, node.base, apiKey)

	const perTenant = 128 // HOOKWHEEL_SENDERS in serveEnv, the tenant's share
	bombs := newHeaderBombs(t, 4, 4<<20, perTenant)
	const tasks = 256
	var ids []uuid.UUID
	for _, url := range bombs.URLs {
		items := make([]openapi.BatchTaskRequest, tasks/len(bombs.URLs))
		for i := range items {
			items[i] = openapi.BatchTaskRequest{URL: url, Timeout: ptr("30s"), Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}}
		}
		created, err := client.CreateTasksBatchWithResponse(context.Background(), openapi.BatchRequest{Tasks: items})
		require.NoError(t, err)
		require.NotNil(t, created.JSON200, "batch: %s", created.Body)
		for i, r := range created.JSON200.Data {
			require.NotNil(t, r.Task, "item %d: %+v", i, r.Error)
			ids = append(ids, r.Task.ID)
		}
	}

	// The first wave, a share's worth held and answered at once, fails
	// (or, reading the answers whole, is delivered); the failures open the
	// tenant's breakers, which defer the rest.
	deadline := time.Now().Add(60 * time.Second)
	for {
		dead, err := countTasks(context.Background(), node.base, apiKey, "dead")
		require.NoError(t, err)
		delivered, err := countTasks(context.Background(), node.base, apiKey, "delivered")
		require.NoError(t, err)
		if dead+delivered >= perTenant {
			t.Logf("%d dead, %d delivered; %d answers written", dead, delivered, bombs.answered.Load())
			break
		}
		require.True(t, time.Now().Before(deadline), "%d dead and %d delivered of %d", dead, delivered, perTenant)
		time.Sleep(100 * time.Millisecond) // polling the API, no signal to wait on
	}
	peak := peakRSS(t, pid)
	t.Logf("answers of 4 MB of headers, %d at a time: peak RSS %.0f MB", perTenant, peak/1e6)

	require.Less(t, peak, 150e6, "answers' headers must be read within bounds")

	var attempt *openapi.Attempt
	for _, id := range ids {
		got, err := client.ListTaskAttemptsWithResponse(context.Background(), id, nil)
		require.NoError(t, err)
		require.NotNil(t, got.JSON200, string(got.Body))
		if len(got.JSON200.Data) > 0 {
			attempt = &got.JSON200.Data[0]
			break
		}
	}
	require.NotNil(t, attempt)
	require.NotNil(t, attempt.Error, "the attempt failed")
	require.Contains(t, *attempt.Error, "response headers exceed 64 KiB")
}
