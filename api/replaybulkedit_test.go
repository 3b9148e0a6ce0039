package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// replayTasks posts body to POST /v1/tasks/replay as tn and requires a 200.
func (h *harness) replayTasks(tn tenant, body string) openapi.ReplayResult {
	h.t.Helper()
	resp := h.do(http.MethodPost, "/v1/tasks/replay", tn.APIKey, strings.NewReader(body), nil)
	require.Equal(h.t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	var res openapi.ReplayResult
	require.NoError(h.t, json.Unmarshal(resp.Body, &res))
	return res
}

func TestReplayTasksEdit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn := h.createTenant("acme")
	other := h.createTenant("other")
	keyID, ok := tenants.KeyID(tn.APIKey)
	require.True(t, ok)

	dead := func(tn tenant, url string) openapi.Task {
		task := h.createTask(tn, `{"url": "`+url+`", "headers": {"Content-Type": "application/json", "X-Old-Token": "t0"},
			"body": "{\"order\": 1}", "labels": {"team": "payments"}, "delay": "1h"}`)
		finishForReplay(h, task.ID, "dead", 3, 503, ptr("receiver answered 503"))
		return h.getTask(tn, task.ID)
	}
	var moving []openapi.Task
	for _, path := range []string{"orders", "refunds", "orders?id=7"} {
		moving = append(moving, dead(tn, "https://old.example/hooks/"+path))
	}
	// Moved, its URL would pass the 4,096 characters a URL may have.
	long := dead(tn, "https://old.example/hooks/"+strings.Repeat("a", 4096-len("https://old.example/hooks/")))
	elsewhere := dead(tn, "https://other.example/hooks/orders")
	delivered := dead(tn, "https://old.example/hooks/delivered")
	h.exec(`UPDATE tasks SET status = 'delivered' WHERE id = $1`, delivered.ID)
	delivered = h.getTask(tn, delivered.ID)
	others := dead(other, "https://old.example/hooks/orders")
	beforeAll := map[uuid.UUID]openapi.Task{}
	for _, task := range append(slices.Clone(moving), long, elsewhere, delivered) {
		beforeAll[task.ID] = task
	}
	othersBefore := h.getTask(other, others.ID)
	auditBefore := len(h.auditOf("/v1/audit", tn.APIKey))

	const edit = `"edit": {"url_prefix": {"from": "https://old.example/hooks/", "to": "https://new.example/v2/hooks/"},
		"headers": {"set": {"authorization": "Bearer new"}, "remove": ["x-old-token"]}}`
	wantSample := make([]openapi.ReplayChange, len(moving))
	for i, task := range moving {
		wantSample[i] = openapi.ReplayChange{ID: task.ID, URLBefore: task.URL,
			URLAfter:       strings.Replace(task.URL, "https://old.example/hooks/", "https://new.example/v2/hooks/", 1),
			HeadersSet:     map[string]string{"Authorization": "Bearer new"},
			HeadersRemoved: []string{"X-Old-Token"}}
	}
	slices.SortFunc(wantSample, func(a, b openapi.ReplayChange) int { return strings.Compare(a.ID.String(), b.ID.String()) })
	refusals := func(res openapi.ReplayResult) {
		t.Helper()
		require.Len(t, res.Refusals, 1)
		r := res.Refusals[0]
		require.Equal(t, 1, r.Count)
		require.Equal(t, []openapi.TaskID{long.ID}, r.TaskIds)
		require.Equal(t, "url: must be at most 4096 characters", r.Reason)
	}

	t.Run("a dry run says what would change, and changes nothing", func(t *testing.T) {
		res := h.replayTasks(tn, `{"dry_run": true, `+edit+`}`)
		require.Equal(t, 4, res.Matched, "the tenant's dead tasks under the prefix")
		require.Zero(t, res.Replayed)
		require.Equal(t, ptr(3), res.Changed)
		require.Equal(t, ptr(1), res.Refused)
		refusals(res)
		require.Equal(t, wantSample, res.Sample)
		for id, before := range beforeAll {
			require.Equal(t, before, h.getTask(tn, id), "a dry run changes nothing")
			require.Empty(t, h.Sched.scheduledFor(id))
		}
		require.Equal(t, auditBefore, len(h.auditOf("/v1/audit", tn.APIKey)), "a dry run is not audited")
	})

	t.Run("the filter narrows the edit", func(t *testing.T) {
		res := h.replayTasks(tn, `{"dry_run": true, "url": "https://old.example/hooks/ref", `+edit+`}`)
		require.Equal(t, 1, res.Matched)
		require.Equal(t, ptr(1), res.Changed)
		res = h.replayTasks(tn, `{"dry_run": true, "url": "https://other.example/", `+edit+`}`)
		require.Zero(t, res.Matched, "no URL starts with both")
		require.Empty(t, res.Sample)
		require.Equal(t, ptr(0), res.Changed, "counts given, as zero")
	})

	t.Run("edited and replayed", func(t *testing.T) {
		res := h.replayTasks(tn, `{`+edit+`}`)
		require.Equal(t, 4, res.Matched)
		require.Equal(t, 3, res.Replayed)
		require.Equal(t, ptr(3), res.Changed)
		require.Equal(t, ptr(1), res.Refused)
		refusals(res)
		require.Nil(t, res.Sample, "a replay answers counts")
		for i, before := range moving {
			got := h.getTask(tn, before.ID)
			require.Equal(t, openapi.TaskStatus("scheduled"), got.Status)
			require.Equal(t, wantSample[slices.IndexFunc(wantSample, func(c openapi.ReplayChange) bool { return c.ID == before.ID })].URLAfter, got.URL, "task %d", i)
			require.Equal(t, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer new"}, got.Headers)
			require.Equal(t, before.Body, got.Body, "the body stays")
			require.Equal(t, before.Labels, got.Labels)
			require.Equal(t, before.Method, got.Method)
			require.Equal(t, before.Attempts, got.Attempts)
			require.Len(t, h.Sched.scheduledFor(before.ID), 1, "the local dispatcher is told")
		}
		for _, id := range []uuid.UUID{long.ID, elsewhere.ID, delivered.ID} {
			require.Equal(t, beforeAll[id], h.getTask(tn, id), "a refused task, or one not matched, is left as it was")
			require.Empty(t, h.Sched.scheduledFor(id))
		}
		require.Equal(t, othersBefore, h.getTask(other, others.ID), "another tenant's task is out of reach")

		entries := since(h.auditOf("/v1/audit", tn.APIKey), auditBefore)
		require.Len(t, entries, 1)
		require.Equal(t, "tasks.edit_replayed", entries[0].Action)
		require.Equal(t, "key:"+keyID, entries[0].Actor)
		require.Equal(t, map[string]any{"matched": 4.0, "replayed": 3.0, "changed": 3.0, "refused": 1.0,
			"filter": map[string]any{"url_origin": "https://old.example"},
			"edit": map[string]any{"url_from": "https://old.example", "url_to": "https://new.example",
				"set_headers": []any{"Authorization"}, "remove_headers": []any{"X-Old-Token"}}}, entries[0].Detail)
		raw, err := json.Marshal(entries[0].Detail)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "Bearer", "no header value")

		again := h.replayTasks(tn, `{`+edit+`}`)
		require.Equal(t, 1, again.Matched, "only the refused task is left")
		require.Zero(t, again.Replayed)
	})
}

func TestReplayTasksEditRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn := h.createTenant("acme")
	task := h.createTask(tn, `{"url": "https://old.example/hooks/a", "headers": {"X-A": "1"}, "delay": "1h"}`)
	finishForReplay(h, task.ID, "dead", 2, 500, nil)
	before := h.getTask(tn, task.ID)

	move := func(from, to string) string {
		return `{"edit": {"url_prefix": {"from": ` + from + `, "to": ` + to + `}}}`
	}
	headers := func(set, remove string) string {
		return `{"edit": {"headers": {"set": ` + set + `, "remove": ` + remove + `}}}`
	}
	tests := []struct {
		name, body, field string
	}{
		{"null edit", `{"edit": null}`, "edit"},
		{"empty edit", `{"edit": {}}`, "edit"},
		{"unknown member", `{"edit": {"url": "https://new.example/"}}`, "edit.url"},
		{"unknown member of url_prefix", `{"edit": {"url_prefix": {"from": "https://old.example/", "too": "https://new.example/"}}}`, "edit.url_prefix.too"},
		{"unknown member of headers", `{"edit": {"headers": {"add": {"X-B": "1"}}}}`, "edit.headers.add"},
		{"empty url_prefix", `{"edit": {"url_prefix": {}}}`, "edit.url_prefix"},
		{"from alone", `{"edit": {"url_prefix": {"from": "https://old.example/"}}}`, "edit.url_prefix.to"},
		{"from not http", move(`"ftp://old.example/"`, `"https://new.example/"`), "edit.url_prefix.from"},
		{"from without a host", move(`"https://"`, `"https://new.example/"`), "edit.url_prefix.from"},
		{"from too long", move(`"https://`+strings.Repeat("a", 2048)+`"`, `"https://new.example/"`), "edit.url_prefix.from"},
		{"from of the wrong type", move(`42`, `"https://new.example/"`), "edit.url_prefix.from"},
		{"to relative", move(`"https://old.example/"`, `"/v2/"`), "edit.url_prefix.to"},
		{"to an internal address", move(`"https://old.example/"`, `"http://169.254.169.254/latest/"`), "edit.url_prefix.to"},
		{"to with credentials", move(`"https://old.example/"`, `"https://user:pass@new.example/"`), "edit.url_prefix.to"},
		{"to the same as from", move(`"https://old.example/"`, `"https://old.example/"`), "edit.url_prefix.to"},
		{"headers changing nothing", `{"edit": {"headers": {}}}`, "edit.headers"},
		{"a reserved header", headers(`{"Webhook-Signature": "v1,forged"}`, `[]`), "edit.headers.set.Webhook-Signature"},
		{"a reserved header with _", headers(`{"hookwheel_attempt": "1"}`, `[]`), "edit.headers.set.hookwheel_attempt"},
		{"header injection", headers(`{"X-A": "1\r\nX-Injected: 1"}`, `[]`), "edit.headers.set.X-A"},
		{"headers too large", headers(`{"X-A": "`+strings.Repeat("v", 16<<10)+`"}`, `[]`), "edit.headers.set"},
		{"a header value of the wrong type", headers(`{"X-A": 1}`, `[]`), "edit.headers.set"},
		{"a bad name to remove", headers(`{}`, `["X A"]`), "edit.headers.remove"},
		{"set and removed", headers(`{"X-B": "1"}`, `["x-b"]`), "edit.headers.remove"},
		{"an invalid filter beside a valid edit", `{"url": "", ` + move(`"https://old.example/"`, `"https://new.example/"`)[1:], "url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.do(http.MethodPost, "/v1/tasks/replay", tn.APIKey, strings.NewReader(tt.body), nil)
			requireFieldProblem(t, resp, tt.field)
		})
	}
	require.Equal(t, before, h.getTask(tn, task.ID), "a refused edit changes nothing")
	require.Empty(t, h.Sched.scheduledFor(task.ID))
}
