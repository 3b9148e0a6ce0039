package tasks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// TestCheckExpiry: Rules.Check, the one place a request becomes a task,
// resolves expires_at or expires_in (from now) to the task's ExpiresAt,
// rounded down to the microsecond, and refuses one not after the task's
// due time, both at once, or an expires_in that is not positive, each under
// its field.
func TestCheckExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	rules := tasks.Rules{MaxBody: 1 << 20, MaxScheduleAhead: 365 * 24 * time.Hour,
		DefaultTimeout: 30 * time.Second, MaxTimeout: 5 * time.Minute}
	tenant := &model.Tenant{}
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	in := func(d time.Duration) *time.Duration { return &d }

	cases := []struct {
		name  string
		req   tasks.Request
		want  *time.Time
		field string
	}{
		{name: "none", req: tasks.Request{}},
		{name: "expires_at", req: tasks.Request{ExpiresAt: at(time.Hour)}, want: at(time.Hour)},
		{name: "expires_at rounded down", req: tasks.Request{ExpiresAt: at(time.Hour + 1999*time.Nanosecond)},
			want: at(time.Hour + time.Microsecond)},
		{name: "expires_in from now", req: tasks.Request{Delay: in(time.Minute), ExpiresIn: in(10 * time.Minute)},
			want: at(10 * time.Minute)},
		{name: "after run_at", req: tasks.Request{RunAt: at(time.Hour), ExpiresAt: at(time.Hour + time.Microsecond)},
			want: at(time.Hour + time.Microsecond)},
		{name: "at run_at", req: tasks.Request{RunAt: at(time.Hour), ExpiresAt: at(time.Hour)}, field: "expires_at"},
		{name: "before now", req: tasks.Request{ExpiresAt: at(-time.Second)}, field: "expires_at"},
		{name: "within a microsecond of now", req: tasks.Request{ExpiresAt: at(999 * time.Nanosecond)}, field: "expires_at"},
		{name: "within the delay", req: tasks.Request{Delay: in(time.Hour), ExpiresIn: in(time.Minute)}, field: "expires_in"},
		{name: "expires_in zero", req: tasks.Request{ExpiresIn: in(0)}, field: "expires_in"},
		{name: "both", req: tasks.Request{ExpiresAt: at(time.Hour), ExpiresIn: in(time.Hour)}, field: "expires_at"},
		{name: "unreadable", req: tasks.Request{Unreadable: tasks.FieldErrors{{Field: "expires_in", Message: "must be a duration"}}},
			field: "expires_in"},
		{name: "unreadable and the other", req: tasks.Request{ExpiresAt: at(time.Hour),
			Unreadable: tasks.FieldErrors{{Field: "expires_in", Message: "must be a duration"}}}, field: "expires_at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, url := tc.req, "https://example.com/hook"
			req.URL = &url
			var fe tasks.FieldErrors
			task := rules.Check(&fe, &req, tenant, now)
			if tc.field != "" {
				require.Nil(t, task)
				require.Len(t, fe, 1, "%+v", fe)
				require.Equal(t, tc.field, fe[0].Field)
				return
			}
			require.Empty(t, fe)
			require.NotNil(t, task)
			require.Equal(t, tc.want, task.ExpiresAt)
		})
	}
}
