package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
)

// TestMetricsOnTheirOwnListener: with a metrics address, /metrics (and the
// profiles, given the same address) are served there and nowhere on the
// API's port, which answers 404 problem+json. Without one, the API's port
// serves them as before.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.MetricsAddr, c.PprofAddr = "127.0.0.1:0", "127.0.0.1:0" })
	require.NotEmpty(t, n.MetricsAddr())
	ops := "http://" + n.MetricsAddr()

	for _, tc := range []struct {
		url         string
		status      int
		contentType string
	}{
		{ops + "/metrics", http.StatusOK, "text/plain"},
		{ops + "/debug/pprof/", http.StatusOK, "text/html"},
		{n.base + "/metrics", http.StatusNotFound, "application/problem+json"},
		{n.base + "/debug/pprof/", http.StatusNotFound, "application/problem+json"},
		{ops + "/v1/targets", http.StatusNotFound, "text/plain"},
	} {
		resp, err := http.Get(tc.url)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, tc.url)
		require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType), "%s: %s", tc.url, resp.Header.Get("Content-Type"))
	}
	requireScrape(t, ops)
	resp, err := contractClient(t).Get(ops + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "the metrics listener sends the API's security headers")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	plain := e.startNode()
	require.Empty(t, plain.MetricsAddr())
	requireScrape(t, plain.base)
}

// requireScrape requires base to serve the node's metrics.
func requireScrape(t *testing.T, base string) {
	t.Helper()
	resp, err := contractClient(t).Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "# TYPE hookwheel_wheel_timers gauge")
}

// scrapeSeries reads every sample of the /metrics at base: the series
// count, and those of one metric.
func scrapeSeries(t *testing.T, base, name string) (all, named int) {
	t.Helper()
	resp, err := contractClient(t).Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		all++
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			named++
		}
	}
	require.NoError(t, sc.Err())
	return all, named
}

// TestSeriesBoundedWithManyHosts: a tenant sending to 2,000 distinct hosts
// (loopback addresses on a port that refuses), each failing once and so
// opening its breaker, which keeps it, leaves the node's scrape at a few
// hundred series: hookwheel_breaker_state names the 100 busiest targets
// and "other". Before, every open breaker had a series of its own, one per
// host. Twenty times the named targets tell a bounded scrape from one that
// grows with the hosts as surely as more would. The tenant still sees every
// one of its targets through the API, and another tenant none of them.
//
// Not parallel: the sends keep two cores busy for a while, which would
// upset the timing of the tests running beside it.
func TestSeriesBoundedWithManyHosts(t *testing.T) {
	const hosts = 2_000
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.Dispatcher.Breaker.ConsecutiveFailures = 1
		c.Dispatcher.Breaker.Cooldown = time.Hour
	})
	ops := "http://" + n.MetricsAddr()
	acme, globex := e.createTenant(n, "many-hosts"), e.createTenant(n, "bystander")
	idle, _ := scrapeSeries(t, ops, "hookwheel_breaker_state")

	reqs := make([]openapi.TaskRequest, hosts)
	for i := range reqs {
		addr := fmt.Sprintf("127.1.%d.%d:%d", i/250, 1+i%250, refusedPort)
		reqs[i] = openapi.TaskRequest{URL: "http://" + addr + "/x", Timeout: ptr("2s"),
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}}
	}
	scheduleAll(t, acme, reqs)
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	deadline := time.Now().Add(5 * time.Minute)
	for dead := 0; dead < hosts; dead = countStatus(t, e.databaseURL, "dead") {
		require.True(t, time.Now().Before(deadline), "%d of %d tasks dead", dead, hosts)
		<-poll.C
	}

	all, labelled := scrapeSeries(t, ops, "hookwheel_breaker_state")
	t.Logf("series scraped: %d idle, %d after %d hosts (hookwheel_breaker_state: %d)", idle, all, hosts, labelled)
	require.Equal(t, 101, labelled, "the 100 busiest targets and other")
	require.Less(t, all, 400)
	require.Equal(t, float64(hosts), metricAt(t, ops, "hookwheel_breakers", `state="open"`))
	require.Equal(t, 2.0, metricAt(t, ops, "hookwheel_breaker_state", `target="other"`))

	mine, err := acme.client.ListTargetsWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, mine.StatusCode(), string(mine.Body))
	require.Len(t, mine.JSON200.Data, hosts)
	for _, tg := range mine.JSON200.Data {
		require.Equal(t, openapi.TargetStateOpen, tg.State, tg.Target)
		require.Equal(t, int64(1), tg.Attempts, tg.Target)
		require.Equal(t, int64(1), tg.Failures, tg.Target)
		require.NotNil(t, tg.NextProbeAt, tg.Target)
	}
	theirs, err := globex.client.ListTargetsWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, theirs.StatusCode(), string(theirs.Body))
	require.Empty(t, theirs.JSON200.Data)

	admin := clientFor(t, n.base, "admin-token")
	every, err := admin.ListBreakersWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, every.StatusCode(), string(every.Body))
	require.Len(t, every.JSON200.Data, hosts)
	require.Equal(t, 1, every.JSON200.Data[0].Tenants)
}
