package api_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
)

// statsMinute is a tenant's minute as the dispatchers write it.
func statsMinute(tenant uuid.UUID, start time.Time, status model.TaskStatus, n int, lateness time.Duration) model.TenantMinuteStats {
	r := model.TenantMinuteStats{TenantID: tenant}
	r.Start = start
	for range n {
		r.Add(status, lateness)
	}
	return r
}

// TestGetStats reads two tenants' statistics, as the dispatchers wrote
// them: each sees its own minutes, every minute of the window with zeros
// where nothing was sent, and its own tasks by status.
func TestGetStats(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme, globex := h.createTenant("acme"), h.createTenant("globex")
	h.createTask(acme, `{"url":"https://receiver.example/a","delay":"1h"}`)
	h.createTask(acme, `{"url":"https://receiver.example/a","delay":"1h"}`)
	h.createTask(globex, `{"url":"https://receiver.example/g","delay":"1h"}`)

	now := h.Clock.Now().UTC().Truncate(time.Minute)
	ctx := context.Background()
	// Two rows for acme's minute, as two nodes write it.
	require.NoError(t, h.DB.AddTaskStats(ctx, []model.TenantMinuteStats{
		statsMinute(acme.ID, now.Add(-2*time.Minute), model.StatusDelivered, 3, time.Millisecond),
		statsMinute(acme.ID, now, model.StatusRetrying, 1, 0),
		statsMinute(acme.ID, now.Add(-2*time.Hour), model.StatusDelivered, 7, 0),
		statsMinute(globex.ID, now.Add(-2*time.Minute), model.StatusDelivered, 50, time.Second),
	}))
	require.NoError(t, h.DB.AddTaskStats(ctx, []model.TenantMinuteStats{
		statsMinute(acme.ID, now.Add(-2*time.Minute), model.StatusDead, 1, time.Second),
	}))

	resp, err := acme.Client.GetStatsWithResponse(ctx, &openapi.GetStatsParams{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	st := resp.JSON200
	require.Equal(t, "1h", st.Window)
	require.Len(t, st.Minutes, 60)
	require.Equal(t, now.Add(-59*time.Minute), st.Minutes[0].Start, "oldest first")
	require.Equal(t, now, st.Minutes[59].Start, "the minute in progress last")
	busy := st.Minutes[57]
	require.Equal(t, now.Add(-2*time.Minute), busy.Start)
	require.Equal(t, 4, busy.Attempts)
	require.Equal(t, 3, busy.Delivered)
	require.Equal(t, 0, busy.Retried)
	require.Equal(t, 1, busy.Dead)
	// Three in [1 ms, 2 ms), one in [512 ms, 1024 ms): the median is two
	// thirds into the first, the 99th percentile 96 % into the second.
	require.NotNil(t, busy.LatenessP50Ms)
	require.InDelta(t, 1.667, *busy.LatenessP50Ms, 0.0005)
	require.InDelta(t, 1003.52, *busy.LatenessP99Ms, 0.001)
	require.Equal(t, 1, st.Minutes[59].Retried)
	require.Equal(t, 1, st.Minutes[59].Attempts)
	for i, m := range st.Minutes {
		if i == 57 || i == 59 {
			continue
		}
		require.Equal(t, openapi.MinuteStats{Start: now.Add(time.Duration(i-59) * time.Minute)}, m, "minute %d", i)
	}
	require.Equal(t, 10_000, st.StatusCountLimit)
	require.Equal(t, 2, st.TasksByStatus.Scheduled)
	require.Zero(t, st.TasksByStatus.Delivered+st.TasksByStatus.Dead+st.TasksByStatus.Retrying+
		st.TasksByStatus.Dispatching+st.TasksByStatus.Canceled)

	// A longer window reaches the older minute.
	resp, err = acme.Client.GetStatsWithResponse(ctx, &openapi.GetStatsParams{Window: ptr("150m")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	require.Equal(t, "2h30m", resp.JSON200.Window)
	require.Len(t, resp.JSON200.Minutes, 150)
	require.Equal(t, 7, resp.JSON200.Minutes[149-120].Delivered)

	// Globex sees its own fifty and its own task, nothing of acme's.
	resp, err = globex.Client.GetStatsWithResponse(ctx, &openapi.GetStatsParams{Window: ptr("5m")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	var total int
	for _, m := range resp.JSON200.Minutes {
		total += m.Attempts
	}
	require.Equal(t, 50, total)
	require.Equal(t, 50, resp.JSON200.Minutes[2].Delivered)
	require.Equal(t, 1, resp.JSON200.TasksByStatus.Scheduled)

	// tasks:read is the scope it takes.
	created, err := acme.Client.CreateKeyWithResponse(ctx, openapi.APIKeyRequest{Scopes: []openapi.Scope{openapi.ScopeSchedulesRead}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), string(created.Body))
	requireProblem(t, h.do(http.MethodGet, "/v1/stats", created.JSON201.APIKey, nil, nil), http.StatusForbidden)
	requireProblem(t, h.do(http.MethodGet, "/v1/stats", "", nil, nil), http.StatusUnauthorized)
}

// TestGetStatsWindow: a window is whole minutes from one minute to a day.
func TestGetStatsWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	for _, w := range []string{"", "0m", "-1h", "30s", "90s", "1h0m1s", "25h", "24h1m", "1d", "1 h", "abc"} {
		resp := h.do(http.MethodGet, "/v1/stats?window="+url.QueryEscape(w), acme.APIKey, nil, nil)
		requireFieldProblem(t, resp, "window")
	}
	for w, want := range map[string]int{"1m": 1, "1.5h": 90, "24h": 1440, "23h59m": 1439, "60s": 1} {
		resp, err := acme.Client.GetStatsWithResponse(context.Background(), &openapi.GetStatsParams{Window: ptr(w)})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "window %s: %s", w, resp.Body)
		require.Len(t, resp.JSON200.Minutes, want, "window %s", w)
	}
}
