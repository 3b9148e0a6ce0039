package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestCreateTaskExpiryValidation: expires_at and expires_in are checked as
// run_at and delay are, and must come after the task is due; each problem
// names its field.
func TestCreateTaskExpiryValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	now := h.Clock.Now()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }

	cases := []struct {
		name    string
		members map[string]any
		field   string // "" for a 201
	}{
		{"expires_at not RFC 3339", map[string]any{"expires_at": "in ten minutes"}, "expires_at"},
		{"expires_at without zone", map[string]any{"expires_at": "2030-01-01T10:00:00"}, "expires_at"},
		{"expires_at as a number", map[string]any{"expires_at": 5}, "expires_at"},
		{"expires_at in the past", map[string]any{"expires_at": at(-time.Minute)}, "expires_at"},
		{"expires_at now, due now", map[string]any{"expires_at": at(0)}, "expires_at"},
		{"expires_at before run_at", map[string]any{"run_at": at(time.Hour), "expires_at": at(30 * time.Minute)}, "expires_at"},
		{"expires_at at run_at", map[string]any{"run_at": at(time.Hour), "expires_at": at(time.Hour)}, "expires_at"},
		{"expires_at before the delay", map[string]any{"delay": "1h", "expires_at": at(time.Minute)}, "expires_at"},
		{"expires_at and expires_in", map[string]any{"expires_at": at(time.Hour), "expires_in": "1h"}, "expires_at"},
		{"expires_in x", map[string]any{"expires_in": "x"}, "expires_in"},
		{"expires_in zero", map[string]any{"expires_in": "0s"}, "expires_in"},
		{"expires_in negative", map[string]any{"expires_in": "-1m"}, "expires_in"},
		{"expires_in within the delay", map[string]any{"delay": "10m", "expires_in": "5m"}, "expires_in"},
		{"expires_in at the delay", map[string]any{"delay": "10m", "expires_in": "10m"}, "expires_in"},
		{"expires_in as a number", map[string]any{"expires_in": 60}, "expires_in"},

		{"expires_at after run_at", map[string]any{"run_at": at(time.Hour), "expires_at": at(time.Hour + time.Microsecond)}, ""},
		{"expires_at a year on", map[string]any{"expires_at": at(365 * 24 * time.Hour)}, ""},
		{"expires_in past the delay", map[string]any{"delay": "10m", "expires_in": "11m"}, ""},
		{"expires_in alone", map[string]any{"expires_in": "1ms"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.postTask(tn, taskBody(t, tc.members), "")
			if tc.field == "" {
				require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
				return
			}
			requireFieldProblem(t, resp, tc.field)
		})
	}
}

// TestCreateTaskExpiry: a task answers with the expiry it was given, exact
// to the microsecond and rounded down, expires_in counted from now; a task
// without one has no expires_at member; a batch item takes its own.
func TestCreateTaskExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	now := h.Clock.Now()

	given := now.Add(time.Hour + 1500*time.Nanosecond)
	task := h.createTask(tn, taskBody(t, map[string]any{"expires_at": given.Format(time.RFC3339Nano)}))
	require.NotNil(t, task.ExpiresAt)
	require.True(t, task.ExpiresAt.Equal(given.Truncate(time.Microsecond)), "got %s", task.ExpiresAt)
	require.True(t, h.getTask(tn, task.ID).ExpiresAt.Equal(*task.ExpiresAt), "stored as answered")

	relative := h.createTask(tn, taskBody(t, map[string]any{"delay": "1m", "expires_in": "10m"}))
	require.True(t, relative.ExpiresAt.Equal(now.Add(10*time.Minute)), "from now, as delay is: %s", relative.ExpiresAt)

	plain := h.postTask(tn, taskBody(t, nil), "")
	require.Equal(t, http.StatusCreated, plain.Status)
	require.NotContains(t, rawKeys(t, plain.Body), "expires_at")

	results := h.batch(tn,
		`{"url": "https://example.com/a", "expires_in": "5m"}`,
		`{"url": "https://example.com/b", "delay": "1h", "expires_in": "5m"}`,
	)
	a := requireItemCreated(t, results[0])
	require.True(t, a.ExpiresAt.Equal(now.Add(5*time.Minute)))
	requireItemProblem(t, results[1], 1, http.StatusUnprocessableEntity, "expires_in")
}

// TestExpiredStatusInListsAndStats: expired is a status lists filter on and
// the statistics count.
func TestExpiredStatusInListsAndStats(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	task := h.createTask(tn, taskBody(t, map[string]any{"expires_in": "1m"}))
	h.exec(`UPDATE tasks SET status = 'expired', next_attempt_at = NULL, updated_at = now() WHERE id = $1`, task.ID)
	h.createTask(tn, taskBody(t, nil))

	resp := h.do(http.MethodGet, "/v1/tasks?status=expired", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	var list openapi.TaskList
	require.NoError(t, json.Unmarshal(resp.Body, &list))
	require.Len(t, list.Data, 1)
	require.Equal(t, task.ID, list.Data[0].ID)
	require.Equal(t, openapi.TaskStatusExpired, list.Data[0].Status)

	resp = h.do(http.MethodGet, "/v1/stats", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	var stats openapi.TaskStats
	require.NoError(t, json.Unmarshal(resp.Body, &stats))
	require.Equal(t, 1, stats.TasksByStatus.Expired)
	require.Equal(t, 1, stats.TasksByStatus.Scheduled)

	// Finished: neither canceled nor replayed.
	requireProblem(t, h.do(http.MethodDelete, "/v1/tasks/"+task.ID.String(), tn.APIKey, nil, nil), http.StatusConflict)
	requireProblem(t, h.do(http.MethodPost, "/v1/tasks/"+task.ID.String()+"/replay", tn.APIKey, nil, nil), http.StatusConflict)
}

// TestRescheduleBeforeExpiry: a reschedule to a time at or after the task's
// expiry is refused by the field that gave it; one before it moves the task.
func TestRescheduleBeforeExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	task := h.createTask(tn, taskBody(t, map[string]any{"delay": "10m", "expires_in": "1h"}))
	patch := func(body string) response {
		return h.do(http.MethodPatch, "/v1/tasks/"+task.ID.String(), tn.APIKey, strings.NewReader(body), nil)
	}

	requireFieldProblem(t, patch(`{"delay": "1h"}`), "delay")
	requireFieldProblem(t, patch(`{"run_at": "`+task.ExpiresAt.Add(time.Minute).Format(time.RFC3339)+`"}`), "run_at")
	resp := patch(`{"delay": "59m"}`)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	var moved openapi.Task
	require.NoError(t, json.Unmarshal(resp.Body, &moved))
	require.True(t, moved.RunAt.Equal(h.Clock.Now().Add(59*time.Minute)))
	require.True(t, moved.ExpiresAt.Equal(*task.ExpiresAt), "the expiry stays")
}
