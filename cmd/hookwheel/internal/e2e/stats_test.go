package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
)

// statsTotals sums a window's minutes.
type statsTotals struct{ attempts, delivered, retried, dead int }

func (tn *tenant) statsTotals(t *testing.T) (statsTotals, *openapi.TaskStats) {
	t.Helper()
	resp, err := tn.client.GetStatsWithResponse(context.Background(), &openapi.GetStatsParams{Window: ptr("10m")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	var sum statsTotals
	for _, m := range resp.JSON200.Minutes {
		sum.attempts += m.Attempts
		sum.delivered += m.Delivered
		sum.retried += m.Retried
		sum.dead += m.Dead
		if m.Attempts > 0 {
			require.NotNil(t, m.LatenessP50Ms)
			require.NotNil(t, m.LatenessP99Ms)
			require.LessOrEqual(t, *m.LatenessP50Ms, *m.LatenessP99Ms)
		} else {
			require.Nil(t, m.LatenessP50Ms)
		}
	}
	return sum, resp.JSON200
}

// TestStatsCountDeliveries delivers a few webhooks, one retried once and one
// refused for good, and reads them back from GET /v1/stats once the
// dispatcher has written its counts; another tenant sees none of them.
func TestStatsCountDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Dispatcher.StatsInterval = 100 * time.Millisecond })
	acme, globex := e.createTenant(n, "acme"), e.createTenant(n, "globex")
	recv := newReceiver(t)
	recv.setRespond(func(d delivery, nth int) (int, http.Header) {
		switch {
		case strings.HasSuffix(d.path, "/gone"):
			return http.StatusBadRequest, nil
		case strings.HasSuffix(d.path, "/flaky") && nth == 1:
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})

	retry := &openapi.RetryPolicy{MinBackoff: ptr("100ms"), MaxBackoff: ptr("200ms")}
	ok1 := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/ok"})
	ok2 := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/ok"})
	flaky := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/flaky", Retry: retry})
	gone := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/gone"})
	for _, id := range []openapi.Task{ok1, ok2, flaky} {
		acme.waitStatus(t, id.ID, openapi.TaskStatusDelivered, 10*time.Second)
	}
	acme.waitStatus(t, gone.ID, openapi.TaskStatusDead, 10*time.Second)

	want := statsTotals{attempts: 5, delivered: 3, retried: 1, dead: 1}
	// Written within a flush of the last attempt, 100 ms.
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	var (
		got   statsTotals
		stats *openapi.TaskStats
	)
	for {
		got, stats = acme.statsTotals(t)
		if got == want || time.Now().After(deadline) {
			break
		}
		<-poll.C
	}
	require.Equal(t, want, got, "statistics not written within 10s")
	require.Equal(t, "10m", stats.Window)
	require.Len(t, stats.Minutes, 10)
	require.Equal(t, 3, stats.TasksByStatus.Delivered)
	require.Equal(t, 1, stats.TasksByStatus.Dead)
	require.Zero(t, stats.TasksByStatus.Scheduled+stats.TasksByStatus.Retrying+stats.TasksByStatus.Dispatching)

	other, otherStats := globex.statsTotals(t)
	require.Equal(t, statsTotals{}, other)
	require.Zero(t, otherStats.TasksByStatus.Delivered+otherStats.TasksByStatus.Dead)
}
