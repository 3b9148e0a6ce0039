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

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
)

// scheduleBody is a valid schedule request with the given members added or
// replaced (nil removes one).
func scheduleBody(t *testing.T, members map[string]any) string {
	t.Helper()
	m := map[string]any{"url": "https://example.com/hook", "cron": "0 9 * * *"}
	for k, v := range members {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

func (h *harness) postSchedule(tn tenant, body string) response {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/schedules", tn.APIKey, strings.NewReader(body), nil)
}

// createSchedule posts body and requires a 201, returning the schedule.
func (h *harness) createSchedule(tn tenant, body string) openapi.Schedule {
	h.t.Helper()
	resp := h.postSchedule(tn, body)
	require.Equal(h.t, http.StatusCreated, resp.Status, "create schedule: %s", resp.Body)
	var s openapi.Schedule
	require.NoError(h.t, json.Unmarshal(resp.Body, &s))
	return s
}

// scheduleCall sends a request about one schedule and decodes a 200.
func (h *harness) scheduleCall(tn tenant, method, path string) (response, openapi.Schedule) {
	h.t.Helper()
	resp := h.do(method, path, tn.APIKey, nil, nil)
	var s openapi.Schedule
	if resp.Status == http.StatusOK {
		require.NoError(h.t, json.Unmarshal(resp.Body, &s))
	}
	return resp, s
}

func TestCreateSchedule(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	// 2026-03-27 12:00 UTC, two days before Paris springs forward.
	h.Clock.Set(time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC))

	resp := h.postSchedule(tn, scheduleBody(t, map[string]any{
		"cron": "30 2 * * *", "timezone": "Europe/Paris", "method": "PUT",
		"headers": map[string]string{"content-type": "application/json"}, "body": `{"report":true}`,
		"timeout": "10s", "retry": map[string]any{"max_attempts": 3},
	}))
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	var s openapi.Schedule
	require.NoError(t, json.Unmarshal(resp.Body, &s))
	require.Equal(t, "/v1/schedules/"+s.ID.String(), resp.Header.Get("Location"))
	require.Equal(t, byte(7), s.ID[6]>>4, "schedule ids are UUIDv7")
	require.Equal(t, "30 2 * * *", s.Cron)
	require.Equal(t, "Europe/Paris", s.Timezone)
	require.False(t, s.Paused)
	require.NotNil(t, s.NextRunAt)
	require.Equal(t, time.Date(2026, 3, 28, 1, 30, 0, 0, time.UTC), s.NextRunAt.UTC(), "02:30 CET")
	require.Nil(t, s.LastRunAt)
	require.Equal(t, "https://example.com/hook", s.URL)
	require.Equal(t, openapi.HTTPMethod("PUT"), s.Method)
	require.Equal(t, map[string]string{"Content-Type": "application/json"}, s.Headers)
	require.Equal(t, `{"report":true}`, s.Body)
	require.Equal(t, "10s", s.Timeout)
	require.Equal(t, 3, *s.Retry.MaxAttempts)
	require.Equal(t, "1s", *s.Retry.MinBackoff)
	require.Equal(t, "1h", *s.Retry.MaxBackoff)
	keys := rawKeys(t, resp.Body)
	for _, k := range []string{"id", "cron", "timezone", "paused", "next_run_at", "url", "method", "timeout", "retry", "created_at", "updated_at"} {
		require.Contains(t, keys, k)
	}

	// Defaults: UTC, POST, 30s, the tenant's retry policy.
	h.exec(`UPDATE tenants SET retry_max_attempts = 4, retry_max_backoff_ms = 120000 WHERE id = $1`, tn.ID)
	d := h.createSchedule(tn, `{"url": "https://example.com/d", "cron": "*/15 * * * *"}`)
	require.Equal(t, "UTC", d.Timezone)
	require.Equal(t, openapi.HTTPMethod("POST"), d.Method)
	require.Equal(t, "30s", d.Timeout)
	require.Equal(t, 4, *d.Retry.MaxAttempts)
	require.Equal(t, "2m", *d.Retry.MaxBackoff)
	require.Equal(t, time.Date(2026, 3, 27, 12, 15, 0, 0, time.UTC), d.NextRunAt.UTC())

	// Created paused: no next run until resumed.
	resp = h.postSchedule(tn, scheduleBody(t, map[string]any{"paused": true}))
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	require.JSONEq(t, `null`, string(rawKeys(t, resp.Body)["next_run_at"]))
	require.JSONEq(t, `true`, string(rawKeys(t, resp.Body)["paused"]))

	// Seconds, descriptors and @every (anchored at creation).
	for expr, want := range map[string]time.Time{
		"*/2 * * * * *": time.Date(2026, 3, 27, 12, 0, 2, 0, time.UTC),
		"@hourly":       time.Date(2026, 3, 27, 13, 0, 0, 0, time.UTC),
		"@every 90s":    time.Date(2026, 3, 27, 12, 1, 30, 0, time.UTC),
	} {
		s := h.createSchedule(tn, scheduleBody(t, map[string]any{"cron": expr}))
		require.Equal(t, want, s.NextRunAt.UTC(), expr)
	}
}

func TestCreateScheduleValidation(t *testing.T) {
	t.Parallel()
	// With the SSRF guard, as a server has it: schedules' URLs are checked
	// at creation like tasks'.
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn := h.createTenant("acme")
	cases := []struct {
		name   string
		body   string
		want   int
		fields []string // for 422, in order
		msg    string   // part of the first message
	}{
		{name: "missing cron", body: scheduleBody(t, map[string]any{"cron": nil}), want: 422, fields: []string{"cron"}, msg: "required"},
		{name: "empty cron", body: scheduleBody(t, map[string]any{"cron": ""}), want: 422, fields: []string{"cron"}, msg: "required"},
		{name: "three fields", body: scheduleBody(t, map[string]any{"cron": "1 2 3"}), want: 422, fields: []string{"cron"}, msg: "expected 5 to 6 fields"},
		{name: "hour out of range", body: scheduleBody(t, map[string]any{"cron": "0 24 * * *"}), want: 422, fields: []string{"cron"}, msg: "above maximum (23)"},
		{name: "30 February", body: scheduleBody(t, map[string]any{"cron": "0 0 30 2 *"}), want: 422, fields: []string{"cron"}, msg: "never matches"},
		{name: "every below a second", body: scheduleBody(t, map[string]any{"cron": "@every 500ms"}), want: 422, fields: []string{"cron"}, msg: "at least 1s"},
		{name: "every without duration", body: scheduleBody(t, map[string]any{"cron": "@every often"}), want: 422, fields: []string{"cron"}, msg: "duration"},
		{name: "zone inside cron", body: scheduleBody(t, map[string]any{"cron": "TZ=UTC 0 9 * * *"}), want: 422, fields: []string{"cron"}, msg: "timezone field"},
		{name: "cron as a number", body: scheduleBody(t, map[string]any{"cron": 5}), want: 422, fields: []string{"cron"}},
		{name: "unknown zone", body: scheduleBody(t, map[string]any{"timezone": "Europe/Pariss"}), want: 422, fields: []string{"timezone"}, msg: "not a known IANA time zone"},
		{name: "Local zone", body: scheduleBody(t, map[string]any{"timezone": "Local"}), want: 422, fields: []string{"timezone"}},
		{name: "empty zone", body: scheduleBody(t, map[string]any{"timezone": ""}), want: 422, fields: []string{"timezone"}},
		{name: "zone and cron both wrong", body: scheduleBody(t, map[string]any{"timezone": "Nowhere", "cron": "61 * * * *"}), want: 422, fields: []string{"timezone", "cron"}},
		{name: "missing url", body: scheduleBody(t, map[string]any{"url": nil}), want: 422, fields: []string{"url"}},
		{name: "private url", body: scheduleBody(t, map[string]any{"url": "http://127.0.0.1/x"}), want: 422, fields: []string{"url"}},
		{name: "bad method", body: scheduleBody(t, map[string]any{"method": "TRACE"}), want: 422, fields: []string{"method"}},
		{name: "reserved header", body: scheduleBody(t, map[string]any{"headers": map[string]string{"Hookwheel-Schedule-Id": "x"}}), want: 422, fields: []string{"headers.Hookwheel-Schedule-Id"}},
		{name: "short timeout", body: scheduleBody(t, map[string]any{"timeout": "10ms"}), want: 422, fields: []string{"timeout"}},
		{name: "bad retry", body: scheduleBody(t, map[string]any{"retry": map[string]any{"max_attempts": 0}}), want: 422, fields: []string{"retry.max_attempts"}},
		{name: "unknown retry field", body: scheduleBody(t, map[string]any{"retry": map[string]any{"attempts": 3}}), want: 422, fields: []string{"retry.attempts"}},
		{name: "run_at", body: scheduleBody(t, map[string]any{"run_at": "2026-11-22T10:00:00Z"}), want: 422, fields: []string{"run_at"}, msg: "does not apply to a schedule"},
		{name: "delay", body: scheduleBody(t, map[string]any{"delay": "5m"}), want: 422, fields: []string{"delay"}},
		{name: "unknown field", body: scheduleBody(t, map[string]any{"crontab": "0 9 * * *"}), want: 422, fields: []string{"crontab"}},
		{name: "paused not a boolean", body: scheduleBody(t, map[string]any{"paused": "yes"}), want: 422, fields: []string{"paused"}},
		{name: "not JSON", body: `{"cron": `, want: 400},
		{name: "empty body", body: ``, want: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.postSchedule(tn, tc.body)
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
	// Nothing invalid was stored.
	resp := h.do(http.MethodGet, "/v1/schedules", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.JSONEq(t, `{"data": []}`, string(resp.Body))
}

func TestScheduleLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	other := h.createTenant("other")
	start := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	h.Clock.Set(start)
	s := h.createSchedule(tn, scheduleBody(t, map[string]any{"cron": "*/10 * * * * *"}))
	path := "/v1/schedules/" + s.ID.String()

	resp, got := h.scheduleCall(tn, http.MethodGet, path)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, s.ID, got.ID)
	require.Equal(t, start.Add(10*time.Second), got.NextRunAt.UTC())

	// Two occurrences materialised (as a dispatcher would), one of them
	// being sent already.
	done, err := h.DB.MaterializeSchedules(context.Background(), model.MaterializeParams{
		Partitions: allPartitionIDs(), Until: start.Add(20 * time.Second), Limit: 10, NotifyUntil: start,
	}, func(sc *model.Schedule) model.OccurrencePlan {
		next := sc.NextRunAt.Add(20 * time.Second)
		return model.OccurrencePlan{Occurrences: []time.Time{*sc.NextRunAt, sc.NextRunAt.Add(10 * time.Second)}, Next: &next}
	})
	require.NoError(t, err)
	created := done.Created
	require.Len(t, created, 2)
	first, second := created[0], created[1]
	if second.At.Before(first.At) {
		first, second = second, first
	}
	h.exec(`UPDATE tasks SET status = 'dispatching', attempts = 1 WHERE id = $1`, first.ID)
	task := h.do(http.MethodGet, "/v1/tasks/"+second.ID.String(), tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, task.Status)
	require.Equal(t, `"`+s.ID.String()+`"`, string(rawKeys(t, task.Body)["schedule_id"]), "an occurrence names its schedule")
	require.Equal(t, start.Add(30*time.Second), h.mustSchedule(tn, s.ID).NextRunAt.UTC())
	require.Equal(t, start.Add(20*time.Second), h.mustSchedule(tn, s.ID).LastRunAt.UTC())

	// Another tenant sees none of it.
	for _, call := range []struct{ method, path string }{
		{http.MethodGet, path}, {http.MethodDelete, path}, {http.MethodPost, path + "/pause"},
		{http.MethodPost, path + "/resume"}, {http.MethodGet, path + "/next"},
	} {
		resp := h.do(call.method, call.path, other.APIKey, nil, nil)
		requireProblem(t, resp, http.StatusNotFound)
	}
	resp = h.do(http.MethodGet, "/v1/schedules", other.APIKey, nil, nil)
	require.JSONEq(t, `{"data": []}`, string(resp.Body))

	// Pause: the waiting occurrence is canceled (and its timer dropped), the
	// one being sent is left to finish.
	resp, paused := h.scheduleCall(tn, http.MethodPost, path+"/pause")
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.True(t, paused.Paused)
	require.Nil(t, paused.NextRunAt)
	require.JSONEq(t, `null`, string(rawKeys(t, resp.Body)["next_run_at"]))
	require.Equal(t, 1, h.Sched.canceledCount(second.ID))
	require.Zero(t, h.Sched.canceledCount(first.ID))
	require.Equal(t, "canceled", h.taskStatus(tn, second.ID))
	require.Equal(t, "dispatching", h.taskStatus(tn, first.ID))
	resp, again := h.scheduleCall(tn, http.MethodPost, path+"/pause")
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, paused.UpdatedAt, again.UpdatedAt, "pausing a paused schedule changes nothing")

	// Resume a minute later: from the first occurrence after now, not the
	// ones missed while paused.
	h.Clock.Set(start.Add(time.Minute + 3*time.Second))
	resp, resumed := h.scheduleCall(tn, http.MethodPost, path+"/resume")
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.False(t, resumed.Paused)
	require.Equal(t, start.Add(time.Minute+10*time.Second), resumed.NextRunAt.UTC())
	resp, same := h.scheduleCall(tn, http.MethodPost, path+"/resume")
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, resumed.UpdatedAt, same.UpdatedAt, "resuming a running schedule changes nothing")

	// Delete: answers the schedule as it was, then it is gone.
	resp, deleted := h.scheduleCall(tn, http.MethodDelete, path)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, s.ID, deleted.ID)
	require.NotNil(t, deleted.NextRunAt)
	for _, call := range []struct{ method, path string }{
		{http.MethodGet, path}, {http.MethodDelete, path}, {http.MethodPost, path + "/pause"},
		{http.MethodPost, path + "/resume"}, {http.MethodGet, path + "/next"},
	} {
		resp := h.do(call.method, call.path, tn.APIKey, nil, nil)
		requireProblem(t, resp, http.StatusNotFound)
	}
	requireProblem(t, h.do(http.MethodGet, "/v1/schedules/not-a-uuid", tn.APIKey, nil, nil), http.StatusBadRequest)
	requireProblem(t, h.do(http.MethodGet, "/v1/schedules/"+uuid.NewString(), "", nil, nil), http.StatusUnauthorized)
}

func (h *harness) mustSchedule(tn tenant, id uuid.UUID) openapi.Schedule {
	h.t.Helper()
	resp, s := h.scheduleCall(tn, http.MethodGet, "/v1/schedules/"+id.String())
	require.Equal(h.t, http.StatusOK, resp.Status, string(resp.Body))
	return s
}

func (h *harness) taskStatus(tn tenant, id uuid.UUID) string {
	h.t.Helper()
	resp := h.do(http.MethodGet, "/v1/tasks/"+id.String(), tn.APIKey, nil, nil)
	require.Equal(h.t, http.StatusOK, resp.Status, string(resp.Body))
	var task openapi.Task
	require.NoError(h.t, json.Unmarshal(resp.Body, &task))
	return string(task.Status)
}

func allPartitionIDs() []int16 {
	ps := make([]int16, model.Partitions)
	for i := range ps {
		ps[i] = int16(i)
	}
	return ps
}

func TestListSchedules(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	var ids []uuid.UUID
	for range 5 {
		ids = append(ids, h.createSchedule(tn, scheduleBody(t, nil)).ID)
	}
	var seen []uuid.UUID
	cursor := ""
	for {
		path := "/v1/schedules?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp := h.do(http.MethodGet, path, tn.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		var page openapi.ScheduleList
		require.NoError(t, json.Unmarshal(resp.Body, &page))
		for _, s := range page.Data {
			seen = append(seen, s.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Equal(t, []uuid.UUID{ids[4], ids[3], ids[2], ids[1], ids[0]}, seen, "newest first")

	requireFieldProblem(t, h.do(http.MethodGet, "/v1/schedules?limit=0", tn.APIKey, nil, nil), "limit")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/schedules?limit=501", tn.APIKey, nil, nil), "limit")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/schedules?cursor=zzz", tn.APIKey, nil, nil), "cursor")
}

// TestNextScheduleTimes previews fire times across DST transitions, in the
// schedule's zone and in UTC, written out.
func TestNextScheduleTimes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	cases := []struct {
		name  string
		cron  string
		zone  string
		now   time.Time
		query string
		want  [][2]string // local, UTC
	}{
		{
			name: "Paris, spring forward", cron: "30 2 * * *", zone: "Europe/Paris",
			now: time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC), query: "?count=3",
			want: [][2]string{
				{"2026-03-28T02:30:00+01:00", "2026-03-28T01:30:00Z"},
				{"2026-03-29T03:00:00+02:00", "2026-03-29T01:00:00Z"}, // 02:30 does not exist
				{"2026-03-30T02:30:00+02:00", "2026-03-30T00:30:00Z"},
			},
		},
		{
			name: "Paris, fall back", cron: "30 2 * * *", zone: "Europe/Paris",
			now: time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), query: "?count=2",
			want: [][2]string{
				{"2026-10-25T02:30:00+02:00", "2026-10-25T00:30:00Z"}, // the first of two 02:30s
				{"2026-10-26T02:30:00+01:00", "2026-10-26T01:30:00Z"},
			},
		},
		{
			name: "New York, spring forward", cron: "30 2 * * *", zone: "America/New_York",
			now: time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), query: "?count=2",
			want: [][2]string{
				{"2026-03-08T03:00:00-04:00", "2026-03-08T07:00:00Z"}, // 02:30 does not exist
				{"2026-03-09T02:30:00-04:00", "2026-03-09T06:30:00Z"},
			},
		},
		{
			name: "New York, fall back", cron: "30 1 * * *", zone: "America/New_York",
			now: time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), query: "?count=2",
			want: [][2]string{
				{"2026-11-01T01:30:00-04:00", "2026-11-01T05:30:00Z"}, // the first of two 01:30s
				{"2026-11-02T01:30:00-05:00", "2026-11-02T06:30:00Z"},
			},
		},
	}
	for _, tc := range cases {
		h.Clock.Set(tc.now)
		s := h.createSchedule(tn, scheduleBody(t, map[string]any{"cron": tc.cron, "timezone": tc.zone}))
		resp := h.do(http.MethodGet, "/v1/schedules/"+s.ID.String()+"/next"+tc.query, tn.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		var page struct {
			Data []struct {
				Local string `json:"local"`
				UTC   string `json:"utc"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(resp.Body, &page))
		var got [][2]string
		for _, ft := range page.Data {
			got = append(got, [2]string{ft.Local, ft.UTC})
		}
		require.Equal(t, tc.want, got, tc.name)
	}

	// Ten by default, even while paused; count is bounded.
	h.Clock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := h.createSchedule(tn, scheduleBody(t, map[string]any{"cron": "@every 1h", "paused": true}))
	resp := h.do(http.MethodGet, "/v1/schedules/"+s.ID.String()+"/next", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var list openapi.FireTimeList
	require.NoError(t, json.Unmarshal(resp.Body, &list))
	require.Len(t, list.Data, 10)
	require.Equal(t, time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), list.Data[9].Utc.UTC())
	resp = h.do(http.MethodGet, "/v1/schedules/"+s.ID.String()+"/next?count=100", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	for _, q := range []string{"?count=0", "?count=101", "?count=-1"} {
		requireFieldProblem(t, h.do(http.MethodGet, "/v1/schedules/"+s.ID.String()+"/next"+q, tn.APIKey, nil, nil), "count")
	}
	requireProblem(t, h.do(http.MethodGet, "/v1/schedules/"+s.ID.String()+"/next?count=ten", tn.APIKey, nil, nil), http.StatusBadRequest)
}

// TestCreateScheduleQuota: a tenant at its max_schedules gets 429 with
// Retry-After for one more, paused ones counting; deleting one makes room.
// Another tenant is not held back.
func TestCreateScheduleQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme, other := h.createTenant("acme"), h.createTenant("other")
	h.patchLimits(acme, `{"limits":{"max_schedules":2}}`)

	first := h.createSchedule(acme, scheduleBody(t, nil))
	h.createSchedule(acme, scheduleBody(t, map[string]any{"paused": true}))
	resp := h.postSchedule(acme, scheduleBody(t, nil))
	p := requireProblem(t, resp, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"schedule-quota-exceeded", p.Type)
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	require.Contains(t, p.Detail, "at most 2 schedules")

	h.createSchedule(other, scheduleBody(t, nil))

	del, _ := h.scheduleCall(acme, http.MethodDelete, "/v1/schedules/"+first.ID.String())
	require.Equal(t, http.StatusOK, del.Status, string(del.Body))
	created := h.createSchedule(acme, scheduleBody(t, nil))
	require.Zero(t, created.SkippedOccurrences)
	require.Nil(t, created.LastSkippedAt)
}
