package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
)

const mergePatchJSON = "application/merge-patch+json"

// patchSchedule sends body as a merge patch of the schedule.
func (h *harness) patchSchedule(tn tenant, id uuid.UUID, body string) response {
	h.t.Helper()
	return h.do(http.MethodPatch, "/v1/schedules/"+id.String(), tn.APIKey, strings.NewReader(body),
		map[string]string{"Content-Type": mergePatchJSON})
}

// mustPatchSchedule sends body as a merge patch and requires a 200.
func (h *harness) mustPatchSchedule(tn tenant, id uuid.UUID, body string) openapi.Schedule {
	h.t.Helper()
	resp := h.patchSchedule(tn, id, body)
	require.Equal(h.t, http.StatusOK, resp.Status, "patch %s: %s", body, resp.Body)
	var s openapi.Schedule
	require.NoError(h.t, json.Unmarshal(resp.Body, &s))
	return s
}

// fullSchedule is a schedule request with every field given, none at its
// default.
const fullSchedule = `{"cron": "0 9 * * *", "timezone": "Europe/Paris", "url": "https://example.com/hook",
	"method": "PUT", "headers": {"Content-Type": "application/json", "X-Old": "1"}, "body": "{\"v\":1}",
	"timeout": "10s", "retry": {"max_attempts": 3, "min_backoff": "2s", "max_backoff": "1m"},
	"labels": {"team": "payments", "env": "prod"}}`

// TestUpdateSchedule: each patch changes what it names and nothing else;
// null resets a field to what a create without it gets; next_run_at moves
// only when the recurrence (or the paused state) does.
func TestUpdateSchedule(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	// 10:00 in Paris, 04:00 in New York.
	now := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	h.Clock.Set(now)
	tomorrow9Paris := time.Date(2026, 6, 2, 7, 0, 0, 0, time.UTC)

	// want edits the schedule as created into what the patch must answer.
	cases := []struct {
		name  string
		patch string
		want  func(s *openapi.Schedule)
	}{
		{name: "empty patch", patch: `{}`, want: func(*openapi.Schedule) {}},
		{name: "cron", patch: `{"cron": "*/10 * * * * *"}`, want: func(s *openapi.Schedule) {
			s.Cron, s.NextRunAt = "*/10 * * * * *", ptr(now.Add(10*time.Second))
		}},
		{name: "timezone", patch: `{"timezone": "America/New_York"}`, want: func(s *openapi.Schedule) {
			s.Timezone, s.NextRunAt = "America/New_York", ptr(time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC))
		}},
		{name: "timezone null is UTC", patch: `{"timezone": null}`, want: func(s *openapi.Schedule) {
			s.Timezone, s.NextRunAt = "UTC", ptr(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
		}},
		{name: "cron and timezone together", patch: `{"cron": "30 8 * * *", "timezone": "America/New_York"}`, want: func(s *openapi.Schedule) {
			s.Cron, s.Timezone, s.NextRunAt = "30 8 * * *", "America/New_York", ptr(time.Date(2026, 6, 1, 12, 30, 0, 0, time.UTC))
		}},
		{name: "same cron written again", patch: `{"cron": "0 9 * * *", "timezone": "Europe/Paris"}`, want: func(*openapi.Schedule) {}},
		{name: "url and body", patch: `{"url": "https://example.org/new", "body": "{\"v\":2}"}`, want: func(s *openapi.Schedule) {
			s.URL, s.Body = "https://example.org/new", `{"v":2}`
		}},
		{name: "method", patch: `{"method": "DELETE"}`, want: func(s *openapi.Schedule) { s.Method = "DELETE" }},
		{name: "method null is POST", patch: `{"method": null}`, want: func(s *openapi.Schedule) { s.Method = "POST" }},
		{name: "body null is empty", patch: `{"body": null}`, want: func(s *openapi.Schedule) { s.Body = "" }},
		{name: "timeout", patch: `{"timeout": "1m"}`, want: func(s *openapi.Schedule) { s.Timeout = "1m" }},
		{name: "timeout null is the default", patch: `{"timeout": null}`, want: func(s *openapi.Schedule) { s.Timeout = "30s" }},
		{name: "headers merged by name", patch: `{"headers": {"x-old": null, "X-New": "2"}}`, want: func(s *openapi.Schedule) {
			s.Headers = map[string]string{"Content-Type": "application/json", "X-New": "2"}
		}},
		{name: "header replaced in another case", patch: `{"headers": {"content-type": "text/plain"}}`, want: func(s *openapi.Schedule) {
			s.Headers = map[string]string{"Content-Type": "text/plain", "X-Old": "1"}
		}},
		{name: "headers null", patch: `{"headers": null}`, want: func(s *openapi.Schedule) { s.Headers = nil }},
		{name: "retry merged", patch: `{"retry": {"max_attempts": 5}}`, want: func(s *openapi.Schedule) {
			s.Retry.MaxAttempts = ptr(5)
		}},
		{name: "retry field null is the tenant's default", patch: `{"retry": {"min_backoff": null}}`, want: func(s *openapi.Schedule) {
			s.Retry.MinBackoff = ptr("1s")
		}},
		{name: "retry null is the tenant's policy", patch: `{"retry": null}`, want: func(s *openapi.Schedule) {
			s.Retry = openapi.RetryPolicy{MaxAttempts: ptr(10), MinBackoff: ptr("1s"), MaxBackoff: ptr("1h")}
		}},
		{name: "labels merged by key", patch: `{"labels": {"env": null, "tier": "gold"}}`, want: func(s *openapi.Schedule) {
			s.Labels = openapi.Labels{"team": "payments", "tier": "gold"}
		}},
		{name: "paused", patch: `{"paused": true}`, want: func(s *openapi.Schedule) { s.Paused, s.NextRunAt = true, nil }},
		// Members are matched to fields whatever the letter case, as the
		// create matches them.
		{name: "url in other letters", patch: `{"URL": "https://example.org/upper"}`, want: func(s *openapi.Schedule) {
			s.URL = "https://example.org/upper"
		}},
		{name: "retry field in other letters", patch: `{"Retry": {"Max_Attempts": 4}}`, want: func(s *openapi.Schedule) {
			s.Retry.MaxAttempts = ptr(4)
		}},
		{name: "body with a surrogate pair", patch: `{"body": "\ud83d\ude00 <&>"}`, want: func(s *openapi.Schedule) {
			s.Body = "\U0001F600 <&>"
		}},
		{name: "everything at once", patch: `{"cron": "@hourly", "timezone": "UTC", "url": "https://example.org/all",
			"method": "POST", "headers": null, "body": "", "timeout": "5s", "retry": {"max_attempts": 2}, "labels": null}`,
			want: func(s *openapi.Schedule) {
				s.Cron, s.Timezone, s.URL, s.Method, s.Headers, s.Body, s.Timeout = "@hourly", "UTC", "https://example.org/all", "POST", nil, "", "5s"
				s.Retry.MaxAttempts, s.Labels, s.NextRunAt = ptr(2), nil, ptr(now.Add(time.Hour))
			}},
	}
	for _, tc := range cases {
		created := h.createSchedule(tn, fullSchedule)
		require.Equal(t, tomorrow9Paris, created.NextRunAt.UTC())
		got := h.mustPatchSchedule(tn, created.ID, tc.patch)
		want := created
		tc.want(&want)
		require.Equal(t, normalized(want), normalized(got), tc.name)
		require.Equal(t, normalized(got), normalized(h.mustSchedule(tn, created.ID)), "%s: what GET answers", tc.name)
		if normalized(want) == normalized(created) {
			require.Equal(t, created.UpdatedAt, got.UpdatedAt, "%s: a patch that changes nothing writes nothing", tc.name)
		}
	}

	// application/json is read as a merge patch too.
	s := h.createSchedule(tn, fullSchedule)
	resp := h.do(http.MethodPatch, "/v1/schedules/"+s.ID.String(), tn.APIKey, strings.NewReader(`{"method": "GET"}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, openapi.HTTPMethod("GET"), h.mustSchedule(tn, s.ID).Method)
}

// normalized is a schedule as JSON without updated_at, and with times in
// UTC, for comparing what matters of two answers.
func normalized(s openapi.Schedule) string {
	s.UpdatedAt = time.Time{}
	for _, at := range []**time.Time{&s.NextRunAt, &s.LastRunAt, &s.LastSkippedAt} {
		if *at != nil {
			*at = ptr((**at).UTC())
		}
	}
	s.CreatedAt = s.CreatedAt.UTC()
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUpdateScheduleEveryAnchor: an @every schedule given by a patch keeps
// the rhythm of the schedule's creation, as every @every schedule does.
func TestUpdateScheduleEveryAnchor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	start := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	h.Clock.Set(start)
	s := h.createSchedule(tn, `{"cron": "0 9 * * *", "url": "https://example.com/hook"}`)
	h.Clock.Set(start.Add(25 * time.Second))
	got := h.mustPatchSchedule(tn, s.ID, `{"cron": "@every 10s"}`)
	require.Equal(t, start.Add(30*time.Second), got.NextRunAt.UTC(), "anchored at creation, not at the patch")
}

// TestUpdateScheduleValidation: a patch is valid when a create with the
// merged fields would be; anything else is a 422 naming the field (or a 400
// for a body that is not a JSON object), and changes nothing.
func TestUpdateScheduleValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn := h.createTenant("acme")
	h.Clock.Set(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	s := h.createSchedule(tn, fullSchedule)
	cases := []struct {
		name   string
		patch  string
		want   int
		fields []string
		msg    string
	}{
		{name: "cron null", patch: `{"cron": null}`, want: 422, fields: []string{"cron"}, msg: "required"},
		{name: "url null", patch: `{"url": null}`, want: 422, fields: []string{"url"}, msg: "required"},
		{name: "empty cron", patch: `{"cron": ""}`, want: 422, fields: []string{"cron"}},
		{name: "bad cron", patch: `{"cron": "0 24 * * *"}`, want: 422, fields: []string{"cron"}, msg: "above maximum (23)"},
		{name: "cron never matching", patch: `{"cron": "0 0 30 2 *"}`, want: 422, fields: []string{"cron"}, msg: "never matches"},
		{name: "unknown zone", patch: `{"timezone": "Europe/Pariss"}`, want: 422, fields: []string{"timezone"}},
		{name: "private url", patch: `{"url": "http://127.0.0.1/x"}`, want: 422, fields: []string{"url"}},
		{name: "relative url", patch: `{"url": "/hook"}`, want: 422, fields: []string{"url"}},
		{name: "bad method", patch: `{"method": "TRACE"}`, want: 422, fields: []string{"method"}},
		{name: "reserved header", patch: `{"headers": {"Hookwheel-Schedule-Id": "x"}}`, want: 422, fields: []string{"headers.Hookwheel-Schedule-Id"}},
		{name: "header not a string", patch: `{"headers": {"X-A": 5}}`, want: 422, fields: []string{"headers"}},
		{name: "short timeout", patch: `{"timeout": "10ms"}`, want: 422, fields: []string{"timeout"}},
		{name: "bad retry", patch: `{"retry": {"max_attempts": 0}}`, want: 422, fields: []string{"retry.max_attempts"}},
		{name: "unknown retry field", patch: `{"retry": {"attempts": 3}}`, want: 422, fields: []string{"retry.attempts"}},
		{name: "bad label", patch: `{"labels": {"Team": "x"}}`, want: 422, fields: []string{"labels.Team"}},
		{name: "run_at", patch: `{"run_at": "2026-11-22T10:00:00Z"}`, want: 422, fields: []string{"run_at"}, msg: "does not apply to a schedule"},
		{name: "run_at null", patch: `{"run_at": null}`, want: 422, fields: []string{"run_at"}, msg: "does not apply to a schedule"},
		{name: "delay", patch: `{"delay": "1m"}`, want: 422, fields: []string{"delay"}, msg: "does not apply to a schedule"},
		{name: "delay null", patch: `{"delay": null}`, want: 422, fields: []string{"delay"}, msg: "does not apply to a schedule"},
		{name: "run_at in other letters, null", patch: `{"Run_At": null}`, want: 422, fields: []string{"run_at"}},
		{name: "run_at and delay null with a valid change", patch: `{"method": "GET", "delay": null, "run_at": null}`, want: 422,
			fields: []string{"run_at", "delay"}},
		{name: "body with an unpaired surrogate escape", patch: `{"body": "\ud800"}`, want: 422, fields: []string{"body"}, msg: "not valid UTF-8"},
		{name: "body with a low surrogate escape alone", patch: `{"body": "a\udc00b"}`, want: 422, fields: []string{"body"}},
		{name: "body with invalid UTF-8", patch: "{\"body\": \"a\xffb\"}", want: 422, fields: []string{"body"}, msg: "not valid UTF-8"},
		{name: "body in other letters with invalid UTF-8", patch: "{\"Body\": \"a\xffb\"}", want: 422, fields: []string{"body"}},
		{name: "unknown field", patch: `{"crontab": "0 9 * * *"}`, want: 422, fields: []string{"crontab"}},
		{name: "unknown field set to null", patch: `{"crontab": null}`, want: 422, fields: []string{"crontab"}},
		{name: "read-only field", patch: `{"next_run_at": "2026-06-01T09:00:00Z"}`, want: 422, fields: []string{"next_run_at"}},
		{name: "cron not a string", patch: `{"cron": 5}`, want: 422, fields: []string{"cron"}},
		{name: "paused not a boolean", patch: `{"paused": "yes"}`, want: 422, fields: []string{"paused"}},
		{name: "several at once", patch: `{"timezone": "Nowhere", "url": null}`, want: 422, fields: []string{"timezone", "url"}},
		{name: "null body", patch: `null`, want: 400},
		{name: "array body", patch: `[]`, want: 400},
		{name: "not JSON", patch: `{"cron": `, want: 400},
		{name: "empty body", patch: ``, want: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.patchSchedule(tn, s.ID, tc.patch)
			p := requireProblem(t, resp, tc.want)
			if tc.want != 422 {
				return
			}
			got := make([]string, len(p.Errors))
			for i, e := range p.Errors {
				got[i] = e.Field
				require.NotEmpty(t, e.Message)
			}
			require.Equal(t, tc.fields, got, "body: %s", resp.Body)
			if tc.msg != "" {
				require.Contains(t, p.Errors[0].Message, tc.msg)
			}
		})
	}
	require.Equal(t, normalized(s), normalized(h.mustSchedule(tn, s.ID)), "no invalid patch changed anything")
	require.Equal(t, s.UpdatedAt, h.mustSchedule(tn, s.ID).UpdatedAt)
}

// TestUpdateScheduleAnswersAsCreate: a patch answers what a create with the
// same member answers, for values that encoding/json would otherwise
// rewrite without a word, and that the create refuses.
func TestUpdateScheduleAnswersAsCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	s := h.createSchedule(tn, fullSchedule)
	cases := []struct {
		name   string
		member string
		field  string
	}{
		{"unpaired surrogate escape", `"body": "\ud800"`, "body"},
		{"invalid UTF-8 byte", "\"body\": \"a\xffb\"", "body"},
		{"run_at null", `"run_at": null`, "run_at"},
		{"delay null", `"delay": null`, "delay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			created := h.postSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/hook", `+tc.member+`}`)
			requireFieldProblem(t, created, tc.field)
			patched := h.patchSchedule(tn, s.ID, `{`+tc.member+`}`)
			requireFieldProblem(t, patched, tc.field)
		})
	}
	require.Equal(t, normalized(s), normalized(h.mustSchedule(tn, s.ID)), "no refused patch changed anything")
}

// TestUpdateScheduleAccess: another tenant's schedule, a deleted one and an
// unknown id answer 404; a key without schedules:write gets 403.
func TestUpdateScheduleAccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn, other := h.createTenant("acme"), h.createTenant("other")
	s := h.createSchedule(tn, fullSchedule)

	requireProblem(t, h.patchSchedule(other, s.ID, `{"url": "https://evil.example/"}`), http.StatusNotFound)
	requireProblem(t, h.patchSchedule(tn, uuid.Must(uuid.NewV7()), `{}`), http.StatusNotFound)
	requireProblem(t, h.patchSchedule(other, s.ID, `{"cron": null}`), http.StatusNotFound)
	require.Equal(t, "https://example.com/hook", h.mustSchedule(tn, s.ID).URL)

	readOnly := h.createKey(tn, `{"name": "reader", "scopes": ["schedules:read"]}`)
	resp := h.do(http.MethodPatch, "/v1/schedules/"+s.ID.String(), readOnly.APIKey, strings.NewReader(`{}`), nil)
	requireProblem(t, resp, http.StatusForbidden)
	writer := h.createKey(tn, `{"name": "writer", "scopes": ["schedules:write"]}`)
	resp = h.do(http.MethodPatch, "/v1/schedules/"+s.ID.String(), writer.APIKey, strings.NewReader(`{"method": "GET"}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))

	del, _ := h.scheduleCall(tn, http.MethodDelete, "/v1/schedules/"+s.ID.String())
	require.Equal(t, http.StatusOK, del.Status)
	requireProblem(t, h.patchSchedule(tn, s.ID, `{}`), http.StatusNotFound)
	requireProblem(t, h.do(http.MethodPatch, "/v1/schedules/not-a-uuid", tn.APIKey, strings.NewReader(`{}`), nil), http.StatusBadRequest)
}

// TestUpdateScheduleOccurrences: occurrences already materialised keep their
// time and their request through a patch, and one at an instant the new
// recurrence also has is not made twice; the occurrences materialised after
// the patch follow it. paused true and false pause and resume, canceling
// and then remaking the waiting occurrences.
func TestUpdateScheduleOccurrences(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	start := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	h.Clock.Set(start)
	s := h.createSchedule(tn, `{"cron": "*/10 * * * * *", "url": "https://example.com/old", "body": "old"}`)

	// materialize makes tasks of the schedule's occurrences up to until, as
	// the dispatcher owning it would (its plan, without the missed ones).
	materialize := func(every time.Duration, until time.Time) {
		t.Helper()
		_, err := h.DB.MaterializeSchedules(context.Background(), model.MaterializeParams{
			Partitions: allPartitionIDs(), Until: until, Limit: 10, NotifyUntil: start,
		}, func(sc *model.Schedule) model.OccurrencePlan {
			var p model.OccurrencePlan
			at := *sc.NextRunAt
			for ; !at.After(until); at = at.Add(every) {
				p.Occurrences = append(p.Occurrences, at)
			}
			p.Next = &at
			return p
		})
		require.NoError(t, err)
	}
	materialize(10*time.Second, start.Add(20*time.Second))
	before := h.occurrences(tn, s.ID)
	require.Len(t, before, 2)

	// Every 20 s from now on, to a new URL: its first occurrence, :20, is
	// the one already materialised, which stays as it was.
	got := h.mustPatchSchedule(tn, s.ID, `{"cron": "*/20 * * * * *", "url": "https://example.com/new", "body": "new"}`)
	require.Equal(t, start.Add(20*time.Second), got.NextRunAt.UTC())
	require.Equal(t, before, h.occurrences(tn, s.ID), "materialised occurrences keep their time and request")
	materialize(20*time.Second, start.Add(40*time.Second))
	after := h.occurrences(tn, s.ID)
	require.Len(t, after, 3, "the occurrence at :20 is not made twice")
	require.Equal(t, before, after[:2])
	require.Equal(t, start.Add(40*time.Second), after[2].RunAt.UTC())
	require.Equal(t, "https://example.com/new", after[2].URL)
	require.Equal(t, "new", after[2].Body)
	require.Equal(t, openapi.TaskStatusScheduled, after[2].Status)

	// A template change alone keeps next_run_at, as the materialiser left it.
	next := h.mustSchedule(tn, s.ID).NextRunAt
	require.Equal(t, next.UTC(), h.mustPatchSchedule(tn, s.ID, `{"body": "newer"}`).NextRunAt.UTC())

	// paused true is a pause: the waiting occurrences are canceled.
	paused := h.mustPatchSchedule(tn, s.ID, `{"paused": true}`)
	require.True(t, paused.Paused)
	require.Nil(t, paused.NextRunAt)
	for _, o := range h.occurrences(tn, s.ID) {
		require.Equal(t, openapi.TaskStatusCanceled, o.Status)
		require.Equal(t, 1, h.Sched.canceledCount(o.ID))
	}
	// paused false is a resume, from the first occurrence after now; the
	// canceled occurrences from then on are forgotten, to be made afresh
	// with the schedule's new request.
	h.Clock.Set(start.Add(25 * time.Second))
	resumed := h.mustPatchSchedule(tn, s.ID, `{"paused": false}`)
	require.False(t, resumed.Paused)
	require.Equal(t, start.Add(40*time.Second), resumed.NextRunAt.UTC())
	materialize(20*time.Second, start.Add(40*time.Second))
	last := h.occurrences(tn, s.ID)
	require.Len(t, last, 3)
	require.Equal(t, openapi.TaskStatusScheduled, last[2].Status)
	require.Equal(t, "newer", last[2].Body)
}

// occurrences are the tasks of a schedule, in time order.
func (h *harness) occurrences(tn tenant, scheduleID uuid.UUID) []openapi.Task {
	h.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, h.dbURL)
	require.NoError(h.t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id FROM tasks WHERE schedule_id = $1 ORDER BY occurrence_at`, scheduleID)
	require.NoError(h.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(h.t, err)
	var out []openapi.Task
	for _, id := range ids {
		resp := h.do(http.MethodGet, "/v1/tasks/"+id.String(), tn.APIKey, nil, nil)
		require.Equal(h.t, http.StatusOK, resp.Status, string(resp.Body))
		var task openapi.Task
		require.NoError(h.t, json.Unmarshal(resp.Body, &task))
		out = append(out, task)
	}
	return out
}
