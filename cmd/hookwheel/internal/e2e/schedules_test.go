package e2e_test

// Recurring schedules across real `hookwheel serve` processes.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// tick is one webhook of a schedule as the receiver saw it.
type tick struct {
	webhookID   string
	scheduleID  string
	scheduledAt time.Time
	attempt     int
	arrived     time.Time
}

// tickReceiver records every webhook with the headers that tell which
// occurrence of which schedule it is.
type tickReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	ticks []tick
	bad   []string
}

func newTickReceiver(t *testing.T) *tickReceiver {
	r := &tickReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tk := tick{arrived: time.Now(), webhookID: req.Header.Get("webhook-id"), scheduleID: req.Header.Get("Hookwheel-Schedule-Id")}
		_, _ = io.Copy(io.Discard, req.Body)
		var err error
		tk.scheduledAt, err = time.Parse(time.RFC3339Nano, req.Header.Get("Hookwheel-Scheduled-At"))
		if err == nil {
			tk.attempt, err = strconv.Atoi(req.Header.Get("Hookwheel-Attempt"))
		}
		r.mu.Lock()
		if err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%v: %v", req.Header, err))
		} else {
			r.ticks = append(r.ticks, tk)
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *tickReceiver) snapshot() ([]tick, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ticks), slices.Clone(r.bad)
}

// scheduleState is the part of a schedule the test reads.
type scheduleState struct {
	ID        string     `json:"id"`
	Paused    bool       `json:"paused"`
	NextRunAt *time.Time `json:"next_run_at"`
}

// scheduleCall makes a schedule API call and requires want.
func scheduleCall(t *testing.T, method, url, apiKey string, body any, want int) scheduleState {
	t.Helper()
	status, out, err := apiCall(context.Background(), method, url, apiKey, body, nil)
	require.NoError(t, err)
	require.Equal(t, want, status, "%s %s: %s", method, url, out)
	var s scheduleState
	require.NoError(t, json.Unmarshal(out, &s))
	return s
}

// evenSeconds lists the whole even seconds in (from, to]: the occurrences
// of "*/2 * * * * *".
func evenSeconds(from, to time.Time) []time.Time {
	var out []time.Time
	for at := from.Truncate(2 * time.Second).Add(2 * time.Second); !at.After(to); at = at.Add(2 * time.Second) {
		if at.After(from) {
			out = append(out, at.UTC())
		}
	}
	return out
}

// TestScheduleThreeNodes: three `hookwheel serve` processes, one schedule
// firing every 2 seconds. For 12 s every occurrence is delivered exactly
// once, carrying the schedule's id; pause stops it (what was materialised
// ahead is canceled); resume goes on from the next tick, with no burst of
// the ticks missed while paused.
func TestScheduleThreeNodes(t *testing.T) {
	t.Parallel()
	const (
		run    = 12 * time.Second
		quiet  = 4 * time.Second
		resume = 8 * time.Second
		// slack: the claim is taken 50 ms before an occurrence is due, so
		// one due right after the pause returned may still go out.
		slack = 250 * time.Millisecond
		// lateBound: an occurrence due this long before a phase ends must
		// have been sent by then, on a loaded machine too (the delete at
		// the end cancels what is still waiting).
		lateBound = 2500 * time.Millisecond
	)
	c := startCluster(t, 3)
	rcv := newTickReceiver(t)

	createStart := time.Now()
	created := scheduleCall(t, http.MethodPost, c.bases[0]+"/v1/schedules", c.apiKey,
		map[string]any{"url": rcv.URL + "/tick", "cron": "*/2 * * * * *", "body": `{"tick":true}`}, http.StatusCreated)
	createEnd := time.Now()
	require.NotNil(t, created.NextRunAt)
	base := c.bases[0] + "/v1/schedules/" + created.ID
	<-time.After(time.Until(createEnd.Add(run)))

	pauseStart := time.Now()
	paused := scheduleCall(t, http.MethodPost, c.bases[1]+"/v1/schedules/"+created.ID+"/pause", c.apiKey, nil, http.StatusOK)
	pauseEnd := time.Now()
	require.True(t, paused.Paused)
	require.Nil(t, paused.NextRunAt)
	// What was materialised ahead of time (up to 30 s of ticks) is canceled.
	pending, err := countTasks(context.Background(), c.bases[2], c.apiKey, "scheduled")
	require.NoError(t, err)
	require.Zero(t, pending, "no occurrence waits while paused")
	canceled, err := countTasks(context.Background(), c.bases[2], c.apiKey, "canceled")
	require.NoError(t, err)
	require.Positive(t, canceled, "the occurrences materialised ahead were canceled")
	<-time.After(quiet)

	resumeStart := time.Now()
	resumed := scheduleCall(t, http.MethodPost, c.bases[2]+"/v1/schedules/"+created.ID+"/resume", c.apiKey, nil, http.StatusOK)
	resumeEnd := time.Now()
	require.False(t, resumed.Paused)
	require.NotNil(t, resumed.NextRunAt)
	require.True(t, resumed.NextRunAt.After(resumeStart), "resumed from the next tick after now, %s", resumed.NextRunAt)
	<-time.After(time.Until(resumeEnd.Add(resume)))

	stopStart := time.Now()
	scheduleCall(t, http.MethodDelete, base, c.apiKey, nil, http.StatusOK)
	stopEnd := time.Now()
	<-time.After(time.Second) // a late duplicate would arrive now
	ticks, bad := rcv.snapshot()
	require.Empty(t, bad, "every webhook carries Hookwheel-Scheduled-At and Hookwheel-Attempt")

	// Each occurrence and each webhook-id exactly once, all of this schedule.
	byOccurrence := map[time.Time]int{}
	byWebhook := map[string]int{}
	for _, tk := range ticks {
		require.Equal(t, created.ID, tk.scheduleID, "Hookwheel-Schedule-Id")
		require.Equal(t, 1, tk.attempt)
		require.Zero(t, tk.scheduledAt.UnixNano()%int64(2*time.Second), "occurrence %s is a tick of */2", tk.scheduledAt)
		require.False(t, tk.arrived.Before(tk.scheduledAt), "occurrence %s arrived early", tk.scheduledAt)
		byOccurrence[tk.scheduledAt.UTC()]++
		byWebhook[tk.webhookID]++
	}
	for at, n := range byOccurrence {
		require.Equal(t, 1, n, "occurrence %s delivered %d times", at.Format(time.RFC3339), n)
	}
	for id, n := range byWebhook {
		require.Equal(t, 1, n, "webhook %s delivered %d times", id, n)
	}

	// Running: every tick from creation to the pause arrived.
	running := evenSeconds(createEnd, pauseStart.Add(-lateBound))
	require.GreaterOrEqual(t, len(running), 4)
	for _, at := range running {
		require.Contains(t, byOccurrence, at, "occurrence %s while running", at.Format(time.RFC3339))
	}
	// Paused: nothing due after the pause, up to the resume. Resumed:
	// every tick after the resume, up to the delete.
	for _, tk := range ticks {
		at := tk.scheduledAt
		switch {
		case !at.After(createStart):
			t.Errorf("occurrence %s is before the schedule was created", at)
		case at.After(pauseEnd.Add(slack)) && !at.After(resumeStart):
			t.Errorf("occurrence %s (arrived %s) was due while the schedule was paused (%s to %s)",
				at.Format(time.RFC3339), tk.arrived.Format(time.RFC3339Nano), pauseEnd.Format(time.RFC3339Nano), resumeStart.Format(time.RFC3339Nano))
		case at.After(stopEnd.Add(slack)):
			t.Errorf("occurrence %s was due after the schedule was deleted", at.Format(time.RFC3339))
		}
	}
	after := evenSeconds(resumeEnd, stopStart.Add(-lateBound))
	require.GreaterOrEqual(t, len(after), 2)
	for _, at := range after {
		require.Contains(t, byOccurrence, at, "occurrence %s after the resume", at.Format(time.RFC3339))
	}
	// No burst: nothing due while paused was sent (above), so in the first
	// second after the resume came at most the ticks due in it.
	burst := 0
	for _, tk := range ticks {
		if tk.arrived.After(resumeStart) && !tk.arrived.After(resumeEnd.Add(time.Second)) {
			burst++
		}
	}
	require.LessOrEqual(t, burst, len(evenSeconds(resumeStart, resumeEnd.Add(time.Second))), "a burst after the resume")

	var (
		lateness      []string
		before, since int
	)
	for _, tk := range ticks {
		lateness = append(lateness, tk.arrived.Sub(tk.scheduledAt).Round(100*time.Microsecond).String())
		if tk.scheduledAt.Before(pauseEnd) {
			before++
		} else {
			since++
		}
	}
	t.Logf("%d occurrences delivered once each, %d before the pause and %d after the resume; lateness %s",
		len(ticks), before, since, strings.Join(lateness, " "))
	c.termAll(t)
}

// TestSchedulesHoldThePendingQuota: five schedules firing every second, to a
// receiver that always fails, never take their tenant past its
// max_pending_tasks of 5; the occurrences over it are skipped and counted on
// their schedules and in a metric. Before, the tenant reached 150 pending
// tasks while POST /v1/tasks answered 429.
func TestSchedulesHoldThePendingQuota(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	setLimits(t, n, acme, `{"max_pending_tasks":5}`)
	failing := newReceiver(t)
	failing.setRespond(func(delivery, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })

	var ids []string
	for range 5 {
		s := scheduleCall(t, http.MethodPost, n.base+"/v1/schedules", acme.apiKey, map[string]any{
			"url": failing.URL + "/tick", "cron": "@every 1s",
			"retry": map[string]any{"max_attempts": 100, "min_backoff": "1m", "max_backoff": "1h"},
		}, http.StatusCreated)
		ids = append(ids, s.ID)
	}
	// Five occurrences a second: the quota is full within a second or two,
	// and every occurrence after that is skipped.
	waitMetric(t, n, "hookwheel_schedule_occurrences_skipped_total", "", 30*time.Second, func(v float64) bool { return v >= 10 })

	// Counted in one statement: three counts on three connections could
	// count a task twice, once unclaimed and again claimed a moment later.
	require.LessOrEqual(t, countPending(t, e.databaseURL), 5, "the tenant's pending tasks stay within its quota")
	var skipped int64
	for _, id := range ids {
		resp, body := rawRequest(t, http.MethodGet, n.base+"/v1/schedules/"+id, acme.apiKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var s openapi.Schedule
		require.NoError(t, json.Unmarshal(body, &s))
		skipped += s.SkippedOccurrences
		if s.SkippedOccurrences > 0 {
			require.NotNil(t, s.LastSkippedAt)
		}
	}
	require.GreaterOrEqual(t, skipped, int64(10), "each schedule counts what it skipped")

	// The API refuses tasks over the same quota.
	resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey, []byte(`{"url":"`+failing.URL+`/x"}`), nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
}
