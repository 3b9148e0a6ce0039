package hookwheel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

func TestUpdateScheduleSendsAMergePatch(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		if nth == 1 {
			// Once, as a restarting node might: a merge patch is safe
			// to send again.
			writeProblem(w, http.StatusServiceUnavailable, "restarting", "Retry-After", "0")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "cron": "*/5 * * * *", "timezone": "UTC",
			"paused": false, "next_run_at": time.Now(), "url": "https://example.com/v2", "method": "POST", "timeout": "30s",
			"retry": map[string]any{}, "created_at": time.Now(), "updated_at": time.Now(), "skipped_occurrences": 0})
	})
	c := f.client(t)
	cron, url, attempts := "*/5 * * * *", "https://example.com/v2", 3
	gone, one := (*string)(nil), "1"
	s, err := c.UpdateSchedule(context.Background(), id, hookwheel.ScheduleUpdate{
		Cron: &cron, URL: &url, MaxAttempts: &attempts,
		Headers: map[string]*string{"X-Old": gone, "X-New": &one},
		Reset:   []string{"timezone", "body", "retry.min_backoff"},
	})
	require.NoError(t, err)
	require.Equal(t, "https://example.com/v2", s.URL)

	got := f.got()
	require.Len(t, got, 2)
	for _, r := range got {
		require.Equal(t, http.MethodPatch, r.method)
		require.Equal(t, "/v1/schedules/"+id.String(), r.path)
		require.Equal(t, "application/merge-patch+json", r.header.Get("Content-Type"))
		require.JSONEq(t, `{"cron": "*/5 * * * *", "url": "https://example.com/v2", "timezone": null, "body": null,
			"headers": {"X-Old": null, "X-New": "1"}, "retry": {"max_attempts": 3, "min_backoff": null}}`, string(r.body))
	}

	// Nothing is sent for a field both set and reset, or one that cannot be.
	_, err = c.UpdateSchedule(context.Background(), id, hookwheel.ScheduleUpdate{URL: &url, Reset: []string{"url"}})
	require.ErrorContains(t, err, "cannot reset")
	_, err = c.UpdateSchedule(context.Background(), id, hookwheel.ScheduleUpdate{Body: &url, Reset: []string{"body"}})
	require.ErrorContains(t, err, "both set and reset")
	_, err = c.UpdateSchedule(context.Background(), id, hookwheel.ScheduleUpdate{MaxAttempts: &attempts, Reset: []string{"retry"}})
	require.ErrorContains(t, err, "both set and reset")
	require.Len(t, f.got(), 2)
}
