package hookwheel_test

// The tests in this file run against a live hookwheel server, the one
// HOOKWHEEL_URL names, acting as the tenant of HOOKWHEEL_API_KEY; without
// both they skip. The server's own test suite runs them against a fresh node
// (cmd/hookwheel/internal/e2e/sdk_go_test.go).
//
// The webhook tests also need HOOKWHEEL_RECEIVER_URL and
// HOOKWHEEL_SIGNING_SECRET (the tenant's secret): a receiver the server can
// reach that records every request it gets, answers 200 (or NNN for a path
// holding "/status/NNN/"), and answers GET /deliveries/{webhook-id} with the
// requests that carried that webhook-id, oldest first, as a JSON array of
// {"method", "url" (path and query), "header", "body" (base64)}.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// live is a test's view of the live server.
type live struct {
	client *hookwheel.Client
	// base starts every URL this test schedules, unique to the test, so
	// that filters by URL prefix see only its tasks.
	base string
	// receiver and secret are empty when no receiver was given.
	receiver, secret string
}

func newLive(t *testing.T) *live {
	t.Helper()
	url, key := os.Getenv("HOOKWHEEL_URL"), os.Getenv("HOOKWHEEL_API_KEY")
	if url == "" || key == "" {
		t.Skip("set HOOKWHEEL_URL and HOOKWHEEL_API_KEY to run this test against a live server")
	}
	c, err := hookwheel.New(url, key)
	require.NoError(t, err)
	l := &live{client: c, receiver: strings.TrimSuffix(os.Getenv("HOOKWHEEL_RECEIVER_URL"), "/"),
		secret: os.Getenv("HOOKWHEEL_SIGNING_SECRET")}
	// Without a receiver, URLs of tasks that are never sent.
	host := l.receiver
	if host == "" {
		host = "https://example.com"
	}
	l.base = host + "/hookwheel-sdk-test/" + uuid.NewString()
	return l
}

func (l *live) needReceiver(t *testing.T) {
	t.Helper()
	if l.receiver == "" || l.secret == "" {
		t.Skip("set HOOKWHEEL_RECEIVER_URL and HOOKWHEEL_SIGNING_SECRET to run this test")
	}
}

// later creates a task due in an hour, canceled at the end of the test.
func (l *live) later(t *testing.T, ctx context.Context, req hookwheel.TaskRequest) *hookwheel.Task {
	t.Helper()
	if req.Delay == 0 && req.RunAt.IsZero() {
		req.Delay = time.Hour
	}
	task, err := l.client.CreateTask(ctx, req)
	require.NoError(t, err)
	l.cancelAtEnd(t, task.ID)
	return task
}

func (l *live) cancelAtEnd(t *testing.T, id uuid.UUID) {
	t.Cleanup(func() {
		_, err := l.client.CancelTask(context.Background(), id)
		if err != nil && !errors.Is(err, hookwheel.ErrConflict) {
			t.Errorf("cancel task %s: %v", id, err)
		}
	})
}

// waitStatus polls the task until it is in status, or fails the test.
func (l *live) waitStatus(t *testing.T, ctx context.Context, id uuid.UUID, status hookwheel.TaskStatus) *hookwheel.Task {
	t.Helper()
	var task *hookwheel.Task
	poll(t, 30*time.Second, "task "+id.String()+" "+string(status), func() bool {
		var err error
		task, err = l.client.GetTask(ctx, id)
		require.NoError(t, err)
		return task.Status == status
	})
	return task
}

// delivery is one request the receiver recorded.
type delivery struct {
	Method string      `json:"method"`
	URL    string      `json:"url"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

// waitDeliveries polls the receiver until it has n requests of the webhook
// id, and returns them.
func (l *live) waitDeliveries(t *testing.T, ctx context.Context, id uuid.UUID, n int) []delivery {
	t.Helper()
	var got []delivery
	poll(t, 30*time.Second, "deliveries of "+id.String(), func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.receiver+"/deliveries/"+id.String(), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got = nil
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		return len(got) >= n
	})
	require.Len(t, got, n)
	return got
}

// poll calls cond every 20 ms until it holds, or fails the test after
// within.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		<-tick.C
	}
}

func TestLiveTasks(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()

	created := l.later(t, ctx, hookwheel.TaskRequest{URL: l.base + "/one", Method: "PUT",
		Headers: map[string]string{"X-Order": "42"}, Body: `{"order":42}`, Timeout: 5 * time.Second, MaxAttempts: 3})
	require.Equal(t, hookwheel.StatusScheduled, created.Status)
	require.Equal(t, hookwheel.HTTPMethod("PUT"), created.Method)
	require.Equal(t, 3, created.MaxAttempts)
	require.NotNil(t, created.IdempotencyKey, "a create gets a key of its own")
	require.WithinDuration(t, time.Now().Add(time.Hour), created.RunAt, time.Minute)

	// The same key twice: one task.
	key := "sdk-" + uuid.NewString()
	first := l.later(t, ctx, hookwheel.TaskRequest{URL: l.base + "/keyed", IdempotencyKey: key, RunAt: created.RunAt})
	again, err := l.client.CreateTask(ctx, hookwheel.TaskRequest{URL: l.base + "/keyed", IdempotencyKey: key, RunAt: created.RunAt})
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)

	got, err := l.client.GetTask(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	require.Equal(t, `{"order":42}`, got.Body)
	require.Equal(t, map[string]string{"X-Order": "42"}, got.Headers)

	// Five tasks under one prefix, read two by two: three pages.
	var want []uuid.UUID
	for range 5 {
		want = append(want, l.later(t, ctx, hookwheel.TaskRequest{URL: l.base + "/list"}).ID)
	}
	var listed []uuid.UUID
	for task, err := range l.client.ListTasks(ctx, hookwheel.TaskFilter{URLPrefix: l.base + "/list", PageSize: 2}) {
		require.NoError(t, err)
		listed = append(listed, task.ID)
	}
	slices.Reverse(want) // newest first
	require.Equal(t, want, listed)

	moved, err := l.client.RescheduleTask(ctx, created.ID, hookwheel.Reschedule{Delay: 2 * time.Hour})
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), *moved.NextAttemptAt, time.Minute)

	attempts, err := l.client.TaskAttempts(ctx, created.ID)
	require.NoError(t, err)
	require.Empty(t, attempts)

	canceled, err := l.client.CancelTask(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, hookwheel.StatusCanceled, canceled.Status)
	_, err = l.client.CancelTask(ctx, created.ID)
	require.ErrorIs(t, err, hookwheel.ErrConflict, "a canceled task cannot be canceled again")
	var apiErr *hookwheel.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusConflict, apiErr.StatusCode)
	require.NotEmpty(t, apiErr.Detail)

	_, err = l.client.GetTask(ctx, uuid.New())
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
	_, err = l.client.ReplayTask(ctx, first.ID, nil)
	require.ErrorIs(t, err, hookwheel.ErrConflict, "a scheduled task cannot be replayed")
}

func TestLiveBatch(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()
	key := "sdk-batch-" + uuid.NewString()
	item := hookwheel.TaskRequest{URL: l.base + "/batch", Delay: time.Hour, IdempotencyKey: key}

	results, err := l.client.CreateTasks(ctx, []hookwheel.TaskRequest{
		item,
		{URL: "not a URL"},
		item, // the same key and request: the first item's task
		{URL: l.base + "/batch", Delay: time.Hour},
	})
	require.NoError(t, err)
	require.Len(t, results, 4)
	for _, i := range []int{0, 2, 3} {
		require.Nil(t, results[i].Err, "item %d", i)
		l.cancelAtEnd(t, results[i].Task.ID)
	}
	require.False(t, results[0].Replayed)
	require.True(t, results[2].Replayed)
	require.Equal(t, results[0].Task.ID, results[2].Task.ID)
	require.NotEqual(t, results[0].Task.ID, results[3].Task.ID)

	require.Nil(t, results[1].Task)
	require.ErrorIs(t, results[1].Err, hookwheel.ErrInvalid)
	require.Contains(t, results[1].Err.Instance, "/tasks/1")
	require.NotEmpty(t, results[1].Err.Fields)
	require.Equal(t, "url", results[1].Err.Fields[0].Field)
}

func TestLiveSchedules(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()

	s, err := l.client.CreateSchedule(ctx, hookwheel.ScheduleRequest{Cron: "0 9 * * *", Timezone: "Europe/Paris",
		URL: l.base + "/daily", Body: `{"report":"daily"}`, Paused: true})
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := l.client.DeleteSchedule(context.Background(), s.ID); err != nil && !errors.Is(err, hookwheel.ErrNotFound) {
			t.Errorf("delete schedule %s: %v", s.ID, err)
		}
	})
	require.True(t, s.Paused)
	require.Equal(t, "Europe/Paris", s.Timezone)

	got, err := l.client.GetSchedule(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, s.Cron, got.Cron)

	found := false
	for sched, err := range l.client.ListSchedules(ctx, hookwheel.ScheduleFilter{PageSize: 1}) {
		require.NoError(t, err)
		if sched.ID == s.ID {
			found = true
			break
		}
	}
	require.True(t, found, "ListSchedules must list the new schedule")

	next, err := l.client.NextScheduleTimes(ctx, s.ID, 3)
	require.NoError(t, err)
	require.Len(t, next, 3)
	for i, ft := range next {
		require.Equal(t, 9, ft.Local.Hour(), "09:00 in Paris")
		require.True(t, ft.Local.Equal(ft.Utc))
		if i > 0 {
			require.True(t, ft.Utc.After(next[i-1].Utc))
		}
	}

	// A merge patch: what is set changes, what is reset goes back to its
	// default, the rest is kept.
	cron, zone, body, newHeader := "30 8 * * 1-5", "America/New_York", `{"report":"v2"}`, "2"
	updated, err := l.client.UpdateSchedule(ctx, s.ID, hookwheel.ScheduleUpdate{Cron: &cron, Timezone: &zone, Body: &body,
		Headers: map[string]*string{"X-Version": &newHeader}, Reset: []string{"method", "retry"}})
	require.NoError(t, err)
	require.Equal(t, cron, updated.Cron)
	require.Equal(t, zone, updated.Timezone)
	require.Equal(t, body, updated.Body)
	require.Equal(t, map[string]string{"X-Version": "2"}, updated.Headers)
	require.Equal(t, s.URL, updated.URL)
	require.True(t, updated.Paused, "still paused")
	next, err = l.client.NextScheduleTimes(ctx, s.ID, 1)
	require.NoError(t, err)
	require.Equal(t, 8, next[0].Local.Hour(), "08:30 in New York")
	bad := "61 * * * *"
	_, err = l.client.UpdateSchedule(ctx, s.ID, hookwheel.ScheduleUpdate{Cron: &bad})
	require.ErrorIs(t, err, hookwheel.ErrInvalid)
	var apiErr *hookwheel.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "cron", apiErr.Fields[0].Field)
	_, err = l.client.UpdateSchedule(ctx, uuid.New(), hookwheel.ScheduleUpdate{Cron: &cron})
	require.ErrorIs(t, err, hookwheel.ErrNotFound)

	resumed, err := l.client.ResumeSchedule(ctx, s.ID)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.NotNil(t, resumed.NextRunAt)
	paused, err := l.client.PauseSchedule(ctx, s.ID)
	require.NoError(t, err)
	require.True(t, paused.Paused)

	deleted, err := l.client.DeleteSchedule(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, s.ID, deleted.ID)
	_, err = l.client.GetSchedule(ctx, s.ID)
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
}

func TestLiveCallerAndErrors(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()

	me, err := l.client.Me(ctx)
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, me.Tenant.ID)
	require.NotEmpty(t, me.Key.ID)

	stats, err := l.client.Stats(ctx, 30*time.Minute)
	require.NoError(t, err)
	require.Equal(t, "30m", stats.Window)
	require.NotEmpty(t, stats.Minutes)

	usage, err := l.client.Usage(ctx, time.Time{}, time.Time{})
	require.NoError(t, err)
	require.NotEmpty(t, usage.Days, "every day of the month so far")
	require.Equal(t, usage.To.Time, usage.Days[len(usage.Days)-1].Date.Time)

	stranger, err := hookwheel.New(os.Getenv("HOOKWHEEL_URL"), "hw_nosuchkey_nosuchsecret")
	require.NoError(t, err)
	_, err = stranger.Me(ctx)
	require.ErrorIs(t, err, hookwheel.ErrUnauthorized)
}

// TestLiveWebhooks follows webhooks to the receiver and verifies what it got:
// a delivery, a replay, an edited replay, and dead letters replayed in bulk.
func TestLiveWebhooks(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	l.needReceiver(t)
	ctx := context.Background()
	secrets := []string{l.secret}

	task, err := l.client.CreateTask(ctx, hookwheel.TaskRequest{URL: l.base + "/deliver", Body: `{"hello":"sdk"}`,
		Headers: map[string]string{"Content-Type": "application/json"}})
	require.NoError(t, err)
	l.waitStatus(t, ctx, task.ID, hookwheel.StatusDelivered)
	ds := l.waitDeliveries(t, ctx, task.ID, 1)
	require.Equal(t, `{"hello":"sdk"}`, string(ds[0].Body))
	require.NoError(t, webhook.Verify(secrets, ds[0].Header, ds[0].Body, webhook.WithURL(task.URL)))
	require.NotEmpty(t, ds[0].Header.Get("Hookwheel-Signature"), "the JWT was verified too")
	// The same request fails under another secret, another URL or body.
	other := "whsec_" + strings.Repeat("A", 43) + "="
	require.ErrorIs(t, webhook.Verify([]string{other}, ds[0].Header, ds[0].Body), webhook.ErrSignature)
	require.ErrorIs(t, webhook.Verify(secrets, ds[0].Header, ds[0].Body, webhook.WithURL(l.base+"/elsewhere")), webhook.ErrToken)
	require.ErrorIs(t, webhook.Verify(secrets, ds[0].Header, []byte(`{"hello":"forged"}`)), webhook.ErrSignature)

	// Replayed as it is: the same webhook-id, the next attempt.
	replayed, err := l.client.ReplayTask(ctx, task.ID, nil)
	require.NoError(t, err)
	require.Equal(t, hookwheel.StatusScheduled, replayed.Status)
	ds = l.waitDeliveries(t, ctx, task.ID, 2)
	require.Equal(t, "2", ds[1].Header.Get("Hookwheel-Attempt"))
	require.NoError(t, webhook.Verify(secrets, ds[1].Header, ds[1].Body, webhook.WithURL(task.URL)))
	l.waitStatus(t, ctx, task.ID, hookwheel.StatusDelivered)

	// Edited and replayed: the new URL and body, signed for them.
	edited := `{"hello":"edited"}`
	replayed, err = l.client.ReplayTask(ctx, task.ID, &hookwheel.ReplayEdit{URL: l.base + "/moved", Body: &edited})
	require.NoError(t, err)
	require.Equal(t, l.base+"/moved", replayed.URL)
	ds = l.waitDeliveries(t, ctx, task.ID, 3)
	require.True(t, strings.HasSuffix(ds[2].URL, "/moved"), ds[2].URL)
	require.Equal(t, edited, string(ds[2].Body))
	require.NoError(t, webhook.Verify(secrets, ds[2].Header, ds[2].Body, webhook.WithURL(l.base+"/moved")))
	// The receiver sees a webhook before its attempt is recorded: wait for
	// the record rather than reading it as the delivery arrives.
	var attempts []hookwheel.Attempt
	poll(t, 30*time.Second, "three attempts of "+task.ID.String(), func() bool {
		attempts, err = l.client.TaskAttempts(ctx, task.ID)
		require.NoError(t, err)
		return len(attempts) == 3
	})

	// A receiver answering 410 kills the task at once; ReplayDead sends it
	// again.
	deadURL := l.base + "/status/410/dead"
	dead, err := l.client.CreateTask(ctx, hookwheel.TaskRequest{URL: deadURL})
	require.NoError(t, err)
	l.waitStatus(t, ctx, dead.ID, hookwheel.StatusDead)
	count, err := l.client.ReplayDead(ctx, hookwheel.DeadFilter{URLPrefix: deadURL, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, hookwheel.ReplayResult{Matched: 1, Replayed: 0}, *count)
	count, err = l.client.ReplayDead(ctx, hookwheel.DeadFilter{URLPrefix: deadURL})
	require.NoError(t, err)
	require.Equal(t, hookwheel.ReplayResult{Matched: 1, Replayed: 1}, *count)
	l.waitDeliveries(t, ctx, dead.ID, 2)
	poll(t, 30*time.Second, "two failed attempts of "+dead.ID.String(), func() bool {
		attempts, err = l.client.TaskAttempts(ctx, dead.ID)
		require.NoError(t, err)
		return len(attempts) == 2
	})
	for _, a := range attempts {
		require.Equal(t, hookwheel.OutcomeFail, a.Outcome)
		require.Equal(t, http.StatusGone, *a.StatusCode)
	}
}
