package hookwheel_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// planJSON is a plan as the API answers it.
func planJSON(name string, limits map[string]any) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return map[string]any{"name": name, "limits": limits, "created_at": now, "updated_at": now}
}

func TestPlans(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		switch {
		case r.Method == http.MethodPut && nth == 1:
			writeJSON(w, http.StatusCreated, planJSON("free", map[string]any{"tasks_per_day": 1000, "api_rate": 0}))
		case r.Method == http.MethodPut:
			// A put sets the same limits however often it is sent.
			if nth == 2 {
				writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
				return
			}
			writeJSON(w, http.StatusOK, planJSON("free", map[string]any{"tasks_per_day": 1000, "api_rate": 0}))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/admin/plans":
			writeJSON(w, http.StatusOK, map[string]any{"data": []any{planJSON("free", map[string]any{}), planJSON("pro", map[string]any{})}})
		case r.URL.Path == "/v1/admin/plans/gone":
			writeProblem(w, http.StatusNotFound, "plan gone not found")
		case r.Method == http.MethodDelete && r.URL.Path == "/v1/admin/plans/free":
			writeProblem(w, http.StatusConflict, "plan free has tenants on it")
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			writeJSON(w, http.StatusOK, planJSON("pro", map[string]any{"max_pending_tasks": 5}))
		}
	})
	c := f.client(t)
	ctx := context.Background()
	perDay, unlimited := 1000, float32(0)
	for range 2 {
		plan, err := c.PutPlan(ctx, "free", hookwheel.Limits{TasksPerDay: &perDay, APIRate: &unlimited})
		require.NoError(t, err, "201 and 200 alike")
		require.Equal(t, "free", plan.Name)
		require.Equal(t, 1000, *plan.Limits.TasksPerDay)
	}
	plan, err := c.GetPlan(ctx, "pro")
	require.NoError(t, err)
	require.Equal(t, 5, *plan.Limits.MaxPendingTasks)
	_, err = c.GetPlan(ctx, "gone")
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
	plans, err := c.ListPlans(ctx)
	require.NoError(t, err)
	require.Len(t, plans, 2)
	err = c.DeletePlan(ctx, "free")
	require.ErrorIs(t, err, hookwheel.ErrConflict)
	var apiErr *hookwheel.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusConflict, apiErr.StatusCode)
	require.NoError(t, c.DeletePlan(ctx, "pro"))

	got := f.got()
	require.Equal(t, "/v1/admin/plans/free", got[0].path)
	require.JSONEq(t, `{"tasks_per_day": 1000, "api_rate": 0}`, string(got[0].body), "0 is sent: it lifts the limit")
	require.Equal(t, got[1].body, got[2].body, "retried after a 503, as it was")
	last := got[len(got)-1]
	require.Equal(t, http.MethodDelete, last.method)
	require.Equal(t, "/v1/admin/plans/pro", last.path)
}
