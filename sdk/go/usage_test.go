package hookwheel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUsage: Usage sends the range as UTC days (none for a zero time) and
// reads the answer.
func TestUsage(t *testing.T) {
	t.Parallel()
	queries := make(chan string, 2)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		queries <- r.URL.RawQuery
		require.Equal(t, "/v1/usage", r.URL.Path)
		day := map[string]any{"date": "2026-11-27", "tasks_created": 3, "deliveries": 2, "attempts": 4,
			"failed_attempts": 2, "bytes_sent": 40, "bytes_received": 8}
		writeJSON(w, http.StatusOK, map[string]any{"from": "2026-11-27", "to": "2026-11-27", "days": []any{day},
			"totals": day, "plan": "pro", "limits": map[string]any{"tasks_per_day": 100, "deliveries_per_day": nil}})
	})
	c := f.client(t)
	ctx := context.Background()
	u, err := c.Usage(ctx, time.Date(2026, 11, 27, 23, 0, 0, 0, time.FixedZone("x", -3600)), time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, "from=2026-11-28&to=2026-11-28", <-queries, "UTC days")
	require.Len(t, u.Days, 1)
	require.EqualValues(t, 2, u.Totals.Deliveries)
	require.Equal(t, "pro", *u.Plan)
	require.Equal(t, 100, *u.Limits.TasksPerDay)
	require.Nil(t, u.Limits.DeliveriesPerDay)
	_, err = c.Usage(ctx, time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Empty(t, <-queries, "the server's defaults")
}
