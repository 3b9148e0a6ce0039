package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

func TestRescheduleTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()
	now := h.Clock.Now()

	reschedule := func(tn tenant, id uuid.UUID, body string) response {
		return h.do(http.MethodPatch, "/v1/tasks/"+id.String(), tn.APIKey, strings.NewReader(body), nil)
	}

	cases := []struct {
		name    string
		body    string
		want    time.Time
		dueSoon bool
	}{
		{"later by delay", `{"delay": "2h"}`, now.Add(2 * time.Hour), false},
		{"later by run_at", `{"run_at": "` + now.Add(3*time.Hour).Format(time.RFC3339) + `"}`, now.Add(3 * time.Hour), false},
		{"sooner, due soon", `{"delay": "10s"}`, now.Add(10 * time.Second), true},
		{"past run_at means now", `{"run_at": "2001-02-03T04:05:06Z"}`, now, true},
		{"zero delay means now", `{"delay": "0s"}`, now, true},
		{"nanoseconds round up", `{"run_at": "` + now.Add(time.Hour+1500*time.Nanosecond).Format(time.RFC3339Nano) + `"}`,
			now.Add(time.Hour + 2*time.Microsecond), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
			resp := reschedule(tn, task.ID, tc.body)
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			var got openapi.Task
			require.NoError(t, json.Unmarshal(resp.Body, &got))
			require.Equal(t, task.ID, got.ID)
			require.Equal(t, openapi.TaskStatus("scheduled"), got.Status)
			require.True(t, got.RunAt.Equal(tc.want), "run_at %s, want %s", got.RunAt, tc.want)
			require.True(t, got.NextAttemptAt.Equal(tc.want), "next_attempt_at %s, want %s", got.NextAttemptAt, tc.want)

			stored, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
			require.NoError(t, err)
			require.True(t, stored.JSON200.RunAt.Equal(tc.want))

			// The local dispatcher drops its timer for the old time, and
			// arms one for the new time when it falls due soon.
			require.Equal(t, 1, h.Sched.canceledCount(task.ID))
			calls := h.Sched.scheduledFor(task.ID)
			if !tc.dueSoon {
				require.Empty(t, calls)
				return
			}
			require.Len(t, calls, 1)
			require.True(t, calls[0].At.Equal(tc.want))
		})
	}

	t.Run("a retrying task keeps its run_at", func(t *testing.T) {
		t.Parallel()
		task := h.createTask(tn, `{"url": "https://example.com/hook"}`)
		h.exec(`UPDATE tasks SET status = 'retrying', attempts = 1 WHERE id = $1`, task.ID)
		resp := reschedule(tn, task.ID, `{"delay": "5m"}`)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		var got openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &got))
		require.Equal(t, openapi.TaskStatus("retrying"), got.Status)
		require.True(t, got.RunAt.Equal(task.RunAt), "run_at stays the first attempt's")
		require.True(t, got.NextAttemptAt.Equal(now.Add(5*time.Minute)))
	})

	t.Run("statuses that refuse", func(t *testing.T) {
		t.Parallel()
		for _, status := range []string{"dispatching", "delivered", "dead", "canceled"} {
			task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
			h.exec(`UPDATE tasks SET status = $1 WHERE id = $2`, status, task.ID)
			p := requireProblem(t, reschedule(tn, task.ID, `{"delay": "2h"}`), http.StatusConflict)
			require.Equal(t, problemTypePrefix+"not-reschedulable", p.Type)
			require.Contains(t, p.Detail, status)
			require.Zero(t, h.Sched.canceledCount(task.ID), "a refused reschedule tells no one")
			stored, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
			require.NoError(t, err)
			require.True(t, stored.JSON200.RunAt.Equal(task.RunAt), "%s: run_at unchanged", status)
		}
	})

	t.Run("another tenant's task", func(t *testing.T) {
		t.Parallel()
		task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
		other := h.createTenant("other")
		p := requireProblem(t, reschedule(other, task.ID, `{"delay": "2h"}`), http.StatusNotFound)
		require.Equal(t, problemTypePrefix+"not-found", p.Type)
		requireProblem(t, reschedule(tn, uuid.Must(uuid.NewV7()), `{"delay": "2h"}`), http.StatusNotFound)
		resp := h.do(http.MethodPatch, "/v1/tasks/not-a-uuid", tn.APIKey, strings.NewReader(`{"delay": "2h"}`), nil)
		requireProblem(t, resp, http.StatusBadRequest)
	})

	t.Run("bad requests", func(t *testing.T) {
		t.Parallel()
		task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
		bad := []struct {
			body   string
			status int
			field  string
		}{
			{`{}`, 422, "run_at"},
			{`null`, 422, "run_at"},
			{`{"run_at": "` + now.Add(time.Hour).Format(time.RFC3339) + `", "delay": "1m"}`, 422, "run_at"},
			{`{"run_at": "tomorrow"}`, 422, "run_at"},
			{`{"run_at": "` + now.Add(366*24*time.Hour).Format(time.RFC3339) + `"}`, 422, "run_at"},
			{`{"delay": "soon"}`, 422, "delay"},
			{`{"delay": "-1s"}`, 422, "delay"},
			{`{"delay": "8761h"}`, 422, "delay"},
			{`{"delay": 30}`, 422, "delay"},
			{`{"delay": "1m", "url": "https://example.com/other"}`, 422, "url"},
			{`{"delay": `, 400, ""},
			{``, 400, ""},
		}
		for _, tc := range bad {
			resp := reschedule(tn, task.ID, tc.body)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
			} else {
				requireProblem(t, resp, tc.status)
			}
		}
		stored, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
		require.NoError(t, err)
		require.True(t, stored.JSON200.RunAt.Equal(task.RunAt), "nothing moved")
	})

	t.Run("the generated client", func(t *testing.T) {
		t.Parallel()
		task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
		at := now.Add(4 * time.Hour)
		resp, err := tn.Client.RescheduleTaskWithResponse(ctx, task.ID, openapi.RescheduleRequest{RunAt: &at})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.True(t, resp.JSON200.RunAt.Equal(at))
	})
}
