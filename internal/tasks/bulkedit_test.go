package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

func guardedRules() tasks.Rules {
	return tasks.Rules{MaxBody: tasks.DefaultMaxBody, MaxScheduleAhead: tasks.DefaultMaxScheduleAhead,
		DefaultTimeout: tasks.DefaultTimeout, MaxTimeout: tasks.DefaultMaxTimeout, Guard: netguard.New(netguard.Config{})}
}

func TestEditTask(t *testing.T) {
	t.Parallel()
	rules, tenant := guardedRules(), &model.Tenant{ID: uuid.New()}
	target := model.EditTarget{ID: uuid.New(), URL: "https://old.example/hooks/orders?x=1",
		Headers: map[string]string{"Content-Type": "application/json", "X_old": "1", "Authorization": "Bearer old"}}

	tests := []struct {
		name        string
		edit        model.BulkEdit
		url         string
		headers     map[string]string
		changed     bool
		refusedAt   string
		refusalText string
	}{
		{"url moved, the rest kept", model.BulkEdit{URLFrom: "https://old.example/hooks/", URLTo: "https://new.example/v2/"},
			"https://new.example/v2/orders?x=1", target.Headers, true, "", ""},
		{"headers set and removed, whatever their letters", model.BulkEdit{
			SetHeaders: map[string]string{"Authorization": "Bearer new"}, RemoveHeaders: []string{"X-Old"}},
			target.URL, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer new"}, true, "", ""},
		{"nothing to change", model.BulkEdit{SetHeaders: map[string]string{"Content-Type": "application/json"}, RemoveHeaders: []string{"X-Absent"}},
			target.URL, target.Headers, false, "", ""},
		{"a URL that does not start with from is kept", model.BulkEdit{URLFrom: "https://other.example/", URLTo: "https://new.example/"},
			target.URL, target.Headers, false, "", ""},
		{"a new URL the guard refuses", model.BulkEdit{URLFrom: "https://old.example/", URLTo: "http://169.254.169.254/"},
			"", nil, false, "url", ""},
		{"a new URL too long", model.BulkEdit{URLFrom: "https://old.example/", URLTo: "https://new.example/" + strings.Repeat("a", tasks.MaxURLLength)},
			"", nil, false, "url", "at most 4096"},
		{"a new URL with a bad port", model.BulkEdit{URLFrom: "https://old.example/", URLTo: "https://new.example:"},
			"", nil, false, "url", "port"},
		{"headers too large", model.BulkEdit{SetHeaders: map[string]string{"X-Big": strings.Repeat("v", tasks.MaxHeaderBytes)}},
			"", nil, false, "headers", "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			edit, changed, fe := rules.EditTask(target, tt.edit, tenant)
			if tt.refusedAt != "" {
				require.NotEmpty(t, fe)
				require.Equal(t, tt.refusedAt, fe[0].Field)
				require.Contains(t, fe[0].Message, tt.refusalText)
				return
			}
			require.Empty(t, fe)
			require.Equal(t, tt.changed, changed)
			require.Equal(t, tt.url, *edit.URL)
			require.Equal(t, tt.headers, edit.Headers)
		})
	}
}

func TestCheckBulkEdit(t *testing.T) {
	t.Parallel()
	rules, tenant := guardedRules(), &model.Tenant{ID: uuid.New()}
	s := func(v string) *string { return &v }

	var fe tasks.FieldErrors
	got := rules.CheckBulkEdit(&fe, tasks.BulkEditRequest{URLFrom: s("https://old.example"), URLTo: s("https://new.example/v2"),
		HeadersGiven: true, SetHeaders: map[string]string{"authorization": "Bearer new"}, RemoveHeaders: []string{"x_old_token"}}, tenant)
	require.Empty(t, fe)
	require.Equal(t, model.BulkEdit{URLFrom: "https://old.example", URLTo: "https://new.example/v2",
		SetHeaders: map[string]string{"Authorization": "Bearer new"}, RemoveHeaders: []string{"X-Old-Token"}}, got)

	bad := []struct {
		name  string
		req   tasks.BulkEditRequest
		field string
	}{
		{"nothing", tasks.BulkEditRequest{}, "edit"},
		{"from alone", tasks.BulkEditRequest{URLFrom: s("https://old.example/")}, "edit.url_prefix.to"},
		{"to alone", tasks.BulkEditRequest{URLTo: s("https://new.example/")}, "edit.url_prefix.from"},
		{"from not http", tasks.BulkEditRequest{URLFrom: s("ftp://old.example/"), URLTo: s("https://new.example/")}, "edit.url_prefix.from"},
		{"from without a host", tasks.BulkEditRequest{URLFrom: s("https://"), URLTo: s("https://new.example/")}, "edit.url_prefix.from"},
		{"from empty", tasks.BulkEditRequest{URLFrom: s(""), URLTo: s("https://new.example/")}, "edit.url_prefix.from"},
		{"from too long", tasks.BulkEditRequest{URLFrom: s("https://" + strings.Repeat("a", tasks.MaxURLPrefix)), URLTo: s("https://new.example/")}, "edit.url_prefix.from"},
		{"to relative", tasks.BulkEditRequest{URLFrom: s("https://old.example/"), URLTo: s("/v2/")}, "edit.url_prefix.to"},
		{"to with credentials", tasks.BulkEditRequest{URLFrom: s("https://old.example/"), URLTo: s("https://u:p@new.example/")}, "edit.url_prefix.to"},
		{"to a blocked address", tasks.BulkEditRequest{URLFrom: s("https://old.example/"), URLTo: s("http://127.0.0.1/")}, "edit.url_prefix.to"},
		{"to the same as from", tasks.BulkEditRequest{URLFrom: s("https://old.example/"), URLTo: s("https://old.example/")}, "edit.url_prefix.to"},
		{"headers that change nothing", tasks.BulkEditRequest{HeadersGiven: true}, "edit.headers"},
		{"a reserved header", tasks.BulkEditRequest{HeadersGiven: true, SetHeaders: map[string]string{"Webhook-Id": "x"}}, "edit.headers.set.Webhook-Id"},
		{"a hop-by-hop header", tasks.BulkEditRequest{HeadersGiven: true, SetHeaders: map[string]string{"Connection": "close"}}, "edit.headers.set.Connection"},
		{"an injected header", tasks.BulkEditRequest{HeadersGiven: true, SetHeaders: map[string]string{"X-A": "1\r\nX-B: 2"}}, "edit.headers.set.X-A"},
		{"headers too large", tasks.BulkEditRequest{HeadersGiven: true, SetHeaders: map[string]string{"X-A": strings.Repeat("v", tasks.MaxHeaderBytes)}}, "edit.headers.set"},
		{"a bad name to remove", tasks.BulkEditRequest{HeadersGiven: true, RemoveHeaders: []string{"X A"}}, "edit.headers.remove"},
		{"set and removed", tasks.BulkEditRequest{HeadersGiven: true, SetHeaders: map[string]string{"X-A": "1"}, RemoveHeaders: []string{"x_a"}}, "edit.headers.remove"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var fe tasks.FieldErrors
			rules.CheckBulkEdit(&fe, tt.req, tenant)
			require.NotEmpty(t, fe)
			require.Equal(t, tt.field, fe[0].Field, "%v", fe)
		})
	}
}

// TestEditReplayMatching: more dead tasks than one chunk, and a pending
// quota with room for some of them: the edit moves and replays as many as
// the quota has room for, oldest first, announcing each, and leaves the rest
// dead and as they were, for a dry run to describe.
func TestEditReplayMatching(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	for range 3 {
		batch := make([]*model.Task, 400)
		for i := range batch {
			batch[i] = b.newTask(time.Hour, "", "")
		}
		_, err := svc.CreateBatch(t.Context(), b.tenant, batch)
		require.NoError(t, err)
	}
	require.Empty(t, b.announcer.scheduledCalls(), "due in an hour: not announced")
	b.exec(t, `UPDATE tasks SET status = 'dead', attempts = 1, next_attempt_at = NULL, headers = '{"X-Old": "1"}'`)
	b.tenant.Limits.MaxPendingTasks = 1100
	edit := model.BulkEdit{URLFrom: "https://example.com/", URLTo: "https://moved.example/", RemoveHeaders: []string{"X-Old"}}

	res, err := svc.EditReplayMatching(t.Context(), b.tenant, model.ReplayFilter{}, edit, guardedRules(), false, "key:test")
	require.NoError(t, err)
	require.Equal(t, 1200, res.Matched)
	require.Equal(t, 1100, res.Replayed, "as many as the quota has room for")
	require.Equal(t, 1100, res.Changed)
	require.Zero(t, res.Refused)
	require.Nil(t, res.Sample)
	calls := b.announcer.scheduledCalls()
	require.Len(t, calls, 1100)
	got, err := svc.Get(t.Context(), b.tenant.ID, calls[0].ID)
	require.NoError(t, err)
	require.Equal(t, "https://moved.example/hook", got.URL)
	require.Equal(t, map[string]string{}, got.Headers)
	require.Equal(t, model.StatusScheduled, got.Status)

	dry, err := svc.EditReplayMatching(t.Context(), b.tenant, model.ReplayFilter{}, edit, guardedRules(), true, "key:test")
	require.NoError(t, err)
	require.Equal(t, 100, dry.Matched, "the tasks left dead, as they were")
	require.Equal(t, 100, dry.Changed)
	require.Zero(t, dry.Replayed)
	require.Len(t, dry.Sample, tasks.EditSampleSize)
	for i, s := range dry.Sample {
		require.Equal(t, "https://example.com/hook", s.URLBefore)
		require.Equal(t, "https://moved.example/hook", s.URLAfter)
		require.Equal(t, []string{"X-Old"}, s.RemovedHeaders)
		if i > 0 {
			require.Negative(t, strings.Compare(dry.Sample[i-1].ID.String(), s.ID.String()), "in id order")
		}
	}

	_, err = svc.EditReplayMatching(t.Context(), b.tenant, model.ReplayFilter{}, edit, guardedRules(), false, "key:test")
	var quota *tasks.QuotaError
	require.ErrorAs(t, err, &quota, "no room left")
	require.Len(t, b.announcer.scheduledCalls(), 1100)
}
