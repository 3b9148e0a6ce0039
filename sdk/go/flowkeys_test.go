package hookwheel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// flowLimitJSON is a flow limit as the API answers it.
func flowLimitJSON(key string, rate int, period string, parallelism int) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return map[string]any{"key": key, "rate": rate, "period": period, "parallelism": parallelism, "created_at": now, "updated_at": now}
}

func TestPutFlowLimitSendsTheLimits(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		status := http.StatusCreated
		switch {
		case nth == 2:
			// A put sets the same limits however often it is sent.
			writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
			return
		case nth > 2:
			status = http.StatusOK
		}
		writeJSON(w, status, flowLimitJSON("customer-1042", 100, "1s", 5))
	})
	c := f.client(t)
	ctx := context.Background()
	for range 2 {
		limit, err := c.PutFlowLimit(ctx, "customer-1042", hookwheel.FlowLimitSpec{Rate: 100, Period: time.Second, Parallelism: 5})
		require.NoError(t, err, "201 and 200 alike")
		require.Equal(t, hookwheel.FlowLimit{Key: "customer-1042", Rate: 100, Period: "1s", Parallelism: 5,
			CreatedAt: limit.CreatedAt, UpdatedAt: limit.UpdatedAt}, *limit)
	}
	_, err := c.PutFlowLimit(ctx, hookwheel.DefaultFlowKey, hookwheel.FlowLimitSpec{Parallelism: 2})
	require.NoError(t, err)
	_, err = c.PutFlowLimit(ctx, "tenant:acme@eu+1=a", hookwheel.FlowLimitSpec{Rate: 10, Period: 90 * time.Second})
	require.NoError(t, err)

	got := f.got()
	require.Len(t, got, 5)
	require.Equal(t, http.MethodPut, got[0].method)
	require.Equal(t, "/v1/flow-keys/customer-1042", got[0].path)
	require.JSONEq(t, `{"rate": 100, "period": "1s", "parallelism": 5}`, string(got[0].body))
	require.Equal(t, got[1].body, got[2].body, "retried after a 503, as it was")
	require.Equal(t, "/v1/flow-keys/*", got[3].path, "the default's key")
	require.JSONEq(t, `{"parallelism": 2}`, string(got[3].body), "zeros and no period are left to the server's defaults")
	require.Equal(t, "/v1/flow-keys/tenant:acme@eu+1=a", got[4].path, "every character a key may hold, as it is")
	require.JSONEq(t, `{"rate": 10, "period": "1m30s"}`, string(got[4].body))
}

func TestFlowLimitReadsAndDeletes(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/flow-keys":
			page := map[string]any{"data": []any{flowLimitJSON("a", 1, "1s", 0)}, "next_cursor": "c1"}
			if r.URL.Query().Get("cursor") == "c1" {
				page = map[string]any{"data": []any{flowLimitJSON("b", 0, "1s", 3)}}
			}
			writeJSON(w, http.StatusOK, page)
		case r.URL.Path == "/v1/flow-keys/gone":
			writeProblem(w, http.StatusNotFound, "no limits of flow key gone")
		case r.Method == http.MethodDelete && nth == 4:
			writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
		default:
			writeJSON(w, http.StatusOK, flowLimitJSON(strings.TrimPrefix(r.URL.Path, "/v1/flow-keys/"), 1, "1s", 0))
		}
	})
	c := f.client(t)
	ctx := context.Background()

	var keys []string
	for l, err := range c.ListFlowLimits(ctx, 1) {
		require.NoError(t, err)
		keys = append(keys, l.Key)
	}
	require.Equal(t, []string{"a", "b"}, keys, "every page")
	limit, err := c.GetFlowLimit(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "a", limit.Key)
	_, err = c.DeleteFlowLimit(ctx, "a")
	require.ErrorIs(t, err, hookwheel.ErrServer, "a delete is not repeated after a 503")
	deleted, err := c.DeleteFlowLimit(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 1, deleted.Rate)
	_, err = c.GetFlowLimit(ctx, "gone")
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
	_, err = c.DeleteFlowLimit(ctx, "gone")
	require.ErrorIs(t, err, hookwheel.ErrNotFound)

	got := f.got()
	require.Len(t, got, 7)
	require.Equal(t, url.Values{"limit": {"1"}}, mustQuery(t, got[0].query))
	require.Equal(t, url.Values{"limit": {"1"}, "cursor": {"c1"}}, mustQuery(t, got[1].query))
	require.Equal(t, http.MethodGet, got[2].method)
	require.Equal(t, "/v1/flow-keys/a", got[2].path)
	require.Equal(t, http.MethodDelete, got[3].method)
	require.Equal(t, "/v1/flow-keys/a", got[4].path)
}

// TestFlowKeyReachesTheAPI: a flow key goes wherever an ordering key goes,
// tasks, batch lines, schedules and their merge patches, and comes back on
// the task.
func TestFlowKeyReachesTheAPI(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if strings.HasPrefix(r.URL.Path, "/v1/schedules") {
			status := http.StatusOK
			if r.Method == http.MethodPost {
				status = http.StatusCreated
			}
			writeJSON(w, status, map[string]any{"id": id, "cron": "@hourly", "timezone": "UTC",
				"paused": false, "next_run_at": nil, "url": "https://example.com/", "method": "POST", "timeout": "30s",
				"retry": map[string]any{}, "created_at": time.Now(), "updated_at": time.Now(), "skipped_occurrences": 0,
				"flow_key": "customer-1042"})
			return
		}
		task := taskJSON(id, "https://example.com/")
		task["flow_key"] = "customer-1042"
		writeJSON(w, http.StatusCreated, task)
	})
	c := f.client(t)
	ctx := context.Background()

	task, err := c.CreateTask(ctx, hookwheel.TaskRequest{URL: "https://example.com/", FlowKey: "customer-1042"})
	require.NoError(t, err)
	require.Equal(t, "customer-1042", *task.FlowKey)
	s, err := c.CreateSchedule(ctx, hookwheel.ScheduleRequest{Cron: "@hourly", URL: "https://example.com/", FlowKey: "customer-1042"})
	require.NoError(t, err)
	require.Equal(t, "customer-1042", *s.FlowKey)
	other := "customer-7"
	_, err = c.UpdateSchedule(ctx, id, hookwheel.ScheduleUpdate{FlowKey: &other})
	require.NoError(t, err)
	_, err = c.UpdateSchedule(ctx, id, hookwheel.ScheduleUpdate{Reset: []string{"flow_key"}})
	require.NoError(t, err)
	_, err = c.UpdateSchedule(ctx, id, hookwheel.ScheduleUpdate{FlowKey: &other, Reset: []string{"flow_key"}})
	require.ErrorContains(t, err, "both set and reset")

	got := f.got()
	require.Len(t, got, 4)
	require.JSONEq(t, `{"url": "https://example.com/", "flow_key": "customer-1042"}`, string(got[0].body))
	require.JSONEq(t, `{"cron": "@hourly", "url": "https://example.com/", "flow_key": "customer-1042"}`, string(got[1].body))
	require.JSONEq(t, `{"flow_key": "customer-7"}`, string(got[2].body))
	require.JSONEq(t, `{"flow_key": null}`, string(got[3].body), "reset removes it")

	// A batch line spells it as the API does.
	var req hookwheel.TaskRequest
	require.NoError(t, json.Unmarshal([]byte(`{"url": "https://example.com/", "flow_key": "customer-1042"}`), &req))
	require.Equal(t, hookwheel.TaskRequest{URL: "https://example.com/", FlowKey: "customer-1042"}, req)
	line, err := json.Marshal(req)
	require.NoError(t, err)
	require.JSONEq(t, `{"url": "https://example.com/", "flow_key": "customer-1042"}`, string(line))
}
