package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// listByLabels lists tn's tasks with each of labels as a label parameter,
// following every cursor, and returns the ids, newest first.
func (h *harness) listByLabels(tn tenant, query url.Values) []uuid.UUID {
	h.t.Helper()
	ids := []uuid.UUID{}
	for {
		resp := h.do(http.MethodGet, "/v1/tasks?"+query.Encode(), tn.APIKey, nil, nil)
		require.Equal(h.t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		var page openapi.TaskList
		require.NoError(h.t, json.Unmarshal(resp.Body, &page))
		for _, task := range page.Data {
			ids = append(ids, task.ID)
		}
		if page.NextCursor == nil {
			return ids
		}
		query.Set("cursor", *page.NextCursor)
	}
}

func TestTaskLabels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("labels")

	labelled := h.createTask(tn, `{"url": "https://example.com/a", "labels": {"team": "payments", "env": "prod", "note": "a:b"}}`)
	require.Equal(t, openapi.Labels{"team": "payments", "env": "prod", "note": "a:b"}, labelled.Labels)
	got := h.getTask(tn, labelled.ID)
	require.Equal(t, labelled.Labels, got.Labels)

	bare := h.postTask(tn, `{"url": "https://example.com/b"}`, "")
	require.Equal(t, http.StatusCreated, bare.Status)
	require.NotContains(t, rawKeys(t, bare.Body), "labels", "no labels, no member")
	var bareTask openapi.Task
	require.NoError(t, json.Unmarshal(bare.Body, &bareTask))

	empty := h.createTask(tn, `{"url": "https://example.com/c", "labels": {}}`)
	require.Nil(t, empty.Labels)

	batch := h.do(http.MethodPost, "/v1/tasks/batch", tn.APIKey, strings.NewReader(`{"tasks": [
		{"url": "https://example.com/d", "labels": {"team": "payments"}},
		{"url": "https://example.com/e", "labels": {"Team": "payments"}},
		{"url": "https://example.com/f", "labels": {"team": "search", "env": "prod"}}
	]}`), nil)
	require.Equal(t, http.StatusOK, batch.Status, "body: %s", batch.Body)
	var results openapi.BatchResponse
	require.NoError(t, json.Unmarshal(batch.Body, &results))
	require.Len(t, results.Data, 3)
	require.NotNil(t, results.Data[0].Task)
	require.Equal(t, openapi.Labels{"team": "payments"}, results.Data[0].Task.Labels)
	require.NotNil(t, results.Data[1].Error, "an invalid label fails its item alone")
	require.Equal(t, "labels.Team", results.Data[1].Error.Errors[0].Field)
	require.NotNil(t, results.Data[2].Task)
	batchPayments, batchSearch := results.Data[0].Task.ID, results.Data[2].Task.ID

	// Another tenant's tasks with the same labels are never listed.
	other := h.createTenant("other labels")
	h.createTask(other, `{"url": "https://example.com/a", "labels": {"team": "payments", "env": "prod"}}`)

	tests := []struct {
		name  string
		query url.Values
		want  []uuid.UUID
	}{
		{"one label", url.Values{"label": {"team:payments"}}, []uuid.UUID{batchPayments, labelled.ID}},
		{"two labels, ANDed", url.Values{"label": {"team:payments", "env:prod"}}, []uuid.UUID{labelled.ID}},
		{"a value with a colon", url.Values{"label": {"note:a:b"}}, []uuid.UUID{labelled.ID}},
		{"with the url filter", url.Values{"label": {"env:prod"}, "url": {"https://example.com/f"}}, []uuid.UUID{batchSearch}},
		{"with the status filter", url.Values{"label": {"env:prod"}, "status": {"dead"}}, []uuid.UUID{}},
		{"a page at a time", url.Values{"label": {"env:prod"}, "limit": {"1"}}, []uuid.UUID{batchSearch, labelled.ID}},
		{"no match", url.Values{"label": {"team:nobody"}}, []uuid.UUID{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, h.listByLabels(tn, tt.query))
		})
	}

	t.Run("the generated client sends repeated parameters", func(t *testing.T) {
		resp, err := tn.Client.ListTasksWithResponse(context.Background(), &openapi.ListTasksParams{Label: []string{"team:payments", "env:prod"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.Len(t, resp.JSON200.Data, 1)
		require.Equal(t, labelled.ID, resp.JSON200.Data[0].ID)
	})
}

func TestTaskLabelsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("bad labels")
	many := map[string]string{}
	for i := range 33 {
		many[string(rune('a'+i%26))+strings.Repeat("x", i/26+1)] = "v"
	}
	manyJSON, err := json.Marshal(many)
	require.NoError(t, err)

	for _, tc := range []struct {
		name, labels, field string
	}{
		{"capital key", `{"Team": "x"}`, "labels.Team"},
		{"punctuation first", `{"_team": "x"}`, "labels._team"},
		{"key too long", `{"` + strings.Repeat("k", 64) + `": "x"}`, "labels." + strings.Repeat("k", 64)},
		{"value too long", `{"k": "` + strings.Repeat("v", 256) + `"}`, "labels.k"},
		{"control character", `{"k": "a\u0007b"}`, "labels.k"},
		{"too many", string(manyJSON), "labels"},
		{"not a string", `{"k": 1}`, "labels"},
		{"not an object", `["k"]`, "labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.postTask(tn, `{"url": "https://example.com/", "labels": `+tc.labels+`}`, "")
			requireFieldProblem(t, resp, tc.field)
		})
	}

	for _, tc := range []struct {
		name  string
		query string
	}{
		{"empty", "label="},
		{"empty beside a condition", "label=team:a&label="},
		{"no value at all", "label"},
		{"no colon", "label=team"},
		{"bad key", "label=Team:x"},
		{"key twice", "label=team:a&label=team:b"},
		{"control character", "label=k:a%07b"},
	} {
		t.Run("list "+tc.name, func(t *testing.T) {
			resp := h.do(http.MethodGet, "/v1/tasks?"+tc.query, tn.APIKey, nil, nil)
			requireFieldProblem(t, resp, "label")
		})
	}

	t.Run("schedule", func(t *testing.T) {
		resp := h.do(http.MethodPost, "/v1/schedules", tn.APIKey,
			strings.NewReader(`{"cron": "@hourly", "url": "https://example.com/", "labels": {"a b": "x"}}`), nil)
		requireFieldProblem(t, resp, "labels.a b")
	})
	t.Run("bulk replay", func(t *testing.T) {
		resp := h.do(http.MethodPost, "/v1/tasks/replay", tn.APIKey, strings.NewReader(`{"labels": {"A": "x"}}`), nil)
		requireFieldProblem(t, resp, "labels.A")
	})
}

func TestScheduleLabels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("schedule labels")
	resp := h.do(http.MethodPost, "/v1/schedules", tn.APIKey,
		strings.NewReader(`{"cron": "@hourly", "url": "https://example.com/", "labels": {"team": "reports"}}`), nil)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	var sc openapi.Schedule
	require.NoError(t, json.Unmarshal(resp.Body, &sc))
	require.Equal(t, openapi.Labels{"team": "reports"}, sc.Labels)

	got, err := tn.Client.GetScheduleWithResponse(context.Background(), sc.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.Equal(t, sc.Labels, got.JSON200.Labels)
}

func TestReplayLabels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	tn := h.createTenant("replay labels")
	payments := h.createTask(tn, `{"url": "https://example.com/a", "labels": {"team": "payments"}}`)
	search := h.createTask(tn, `{"url": "https://example.com/b", "labels": {"team": "search"}}`)
	bare := h.createTask(tn, `{"url": "https://example.com/c"}`)
	for _, id := range []uuid.UUID{payments.ID, search.ID, bare.ID} {
		h.exec(`UPDATE tasks SET status = 'dead', next_attempt_at = NULL, attempts = 1 WHERE id = $1`, id)
	}

	filter := openapi.ReplayFilter{Labels: openapi.Labels{"team": "payments"}, DryRun: ptr(true)}
	resp, err := tn.Client.ReplayTasksWithResponse(ctx, filter)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Equal(t, openapi.ReplayResult{Matched: 1}, *resp.JSON200)
	filter.DryRun = nil
	resp, err = tn.Client.ReplayTasksWithResponse(ctx, filter)
	require.NoError(t, err)
	require.Equal(t, openapi.ReplayResult{Matched: 1, Replayed: 1}, *resp.JSON200)
	got := h.getTask(tn, payments.ID)
	require.Equal(t, openapi.TaskStatus("scheduled"), got.Status)
	require.Equal(t, payments.Labels, got.Labels, "a replay keeps the labels")
	require.Equal(t, openapi.TaskStatus("dead"), h.getTask(tn, search.ID).Status)

	// Edit and replay: new labels replace the old, {} removes them, null
	// is refused as for every other field.
	edited := h.replay(tn, search.ID, ptr(`{"labels": {"team": "ranking", "env": "prod"}}`))
	require.Equal(t, http.StatusOK, edited.Status, "body: %s", edited.Body)
	require.Equal(t, openapi.Labels{"team": "ranking", "env": "prod"}, h.getTask(tn, search.ID).Labels)
	cleared := h.replay(tn, bare.ID, ptr(`{"labels": {}}`))
	require.Equal(t, http.StatusOK, cleared.Status, "body: %s", cleared.Body)
	require.NotContains(t, rawKeys(t, cleared.Body), "labels")
	h.exec(`UPDATE tasks SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, search.ID)
	requireFieldProblem(t, h.replay(tn, search.ID, ptr(`{"labels": null}`)), "labels")
	requireFieldProblem(t, h.replay(tn, search.ID, ptr(`{"labels": {"Bad": "x"}}`)), "labels.Bad")
	require.Equal(t, openapi.Labels{"team": "ranking", "env": "prod"}, h.getTask(tn, search.ID).Labels, "a refused edit changes nothing")
}
