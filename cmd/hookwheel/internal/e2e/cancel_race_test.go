package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestCancelAndRescheduleRaceTheClaimUnderLoad: while thousands of tasks
// fall due, tasks are canceled or moved an hour later from three seconds
// before their due time to a third of a second after it, across the instant
// the node claims them (50–60 ms before). Whatever the timing, an answer of
// 200 means the webhook is never sent, and a 409 (it is dispatching or done)
// means it is sent; and no attempt of any task is sent twice.
func TestCancelAndRescheduleRaceTheClaimUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	ctx := context.Background()

	const (
		load   = 4000
		racers = 200
		spread = 2 * time.Second
		// Acting from this long before due reaches some tasks before their
		// claim even when every request on a fully loaded machine takes
		// seconds to answer.
		earliest = 3 * time.Second
		latest   = 300 * time.Millisecond
	)
	// Far enough ahead that making the 4,200 tasks on a loaded machine ends
	// before the first racer is acted on: a racer made after its due time is
	// claimed before anyone can cancel it.
	start := time.Now().Add(15 * time.Second)
	batch := func(path string, count int, each time.Duration) []openapi.Task {
		var made []openapi.Task
		for len(made) < count {
			items := make([]openapi.BatchTaskRequest, min(1000, count-len(made)))
			for i := range items {
				at := start.Add(time.Duration(len(made)+i) * each)
				items[i] = openapi.BatchTaskRequest{URL: recv.URL + path, RunAt: &at}
			}
			resp, err := acme.client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: items})
			require.NoError(t, err)
			require.NotNil(t, resp.JSON200, "batch: %s", resp.Body)
			for _, r := range resp.JSON200.Data {
				require.NotNil(t, r.Task, "batch item: %+v", r.Error)
				made = append(made, *r.Task)
			}
		}
		return made
	}
	batch("/load", load, spread/load)
	racedTasks := batch("/raced", racers, spread/racers)
	// How long before the first was due the tasks were all made: reported
	// with the outcome, since on a machine too loaded to make them in time
	// no racer can come before its claim.
	madeBy := time.Until(start)

	type race struct {
		task       openapi.Task
		reschedule bool
		ahead      time.Duration // how long before its due time it is acted on
		answered   time.Duration // how long before its due time the answer came (from the request's intended start)
		status     int
	}
	races := make([]*race, racers)
	for i := range races {
		races[i] = &race{
			task:       racedTasks[i],
			reschedule: i%2 == 1,
			ahead:      earliest - time.Duration(rand.Int64N(int64(earliest+latest))),
		}
	}
	var wg sync.WaitGroup
	for _, r := range races {
		wg.Go(func() {
			time.Sleep(time.Until(r.task.RunAt.Add(-r.ahead)))
			defer func() { r.answered = time.Until(r.task.RunAt) }()
			if r.reschedule {
				resp, err := acme.client.RescheduleTaskWithResponse(ctx, r.task.ID, openapi.RescheduleRequest{Delay: ptr("1h")})
				if err == nil {
					r.status = resp.StatusCode()
				}
				return
			}
			resp, err := acme.client.CancelTaskWithResponse(ctx, r.task.ID)
			if err == nil {
				r.status = resp.StatusCode()
			}
		})
	}
	wg.Wait()

	// Every task that may be sent is: the load, and the raced tasks refused.
	expected := load
	for _, r := range races {
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, r.status,
			"task %s acted on %s before due", r.task.ID, r.ahead)
		if r.status == http.StatusConflict {
			expected++
		}
	}
	recv.waitFor(t, 60*time.Second, fmt.Sprintf("%d tasks", expected), func(ds []delivery) bool {
		return len(distinctIDs(ds)) >= expected
	})
	// Every task due is sent by now. What a 200 answered stands: the task
	// was never claimed (a claim counts the attempt) and is canceled, or
	// waits at its new time.
	for _, r := range races {
		if r.status != http.StatusOK {
			continue
		}
		got := acme.task(t, r.task.ID)
		require.Zero(t, got.Attempts, "task %s answered 200 %s before due", r.task.ID, r.ahead)
		if r.reschedule {
			require.Equal(t, openapi.TaskStatusScheduled, got.Status)
			require.True(t, got.RunAt.After(time.Now().Add(50*time.Minute)), "task %s runs at %s", r.task.ID, got.RunAt)
		} else {
			require.Equal(t, openapi.TaskStatusCanceled, got.Status)
		}
	}

	// A task may arrive more than once only as separate attempts: a first
	// attempt that failed on a loaded machine is retried, as documented. The
	// same attempt twice would be a double send.
	ds := recv.snapshot()
	sent := distinctIDs(ds)
	perAttempt := map[string]int{}
	for _, d := range ds {
		perAttempt[d.webhookID()+" attempt "+d.header.Get("Hookwheel-Attempt")]++
	}
	for attempt, count := range perAttempt {
		require.Equal(t, 1, count, "task %s sent %d times", attempt, count)
	}
	var accepted, refused int
	for _, r := range races {
		id := r.task.ID.String()
		what := map[bool]string{false: "canceled", true: "rescheduled"}[r.reschedule]
		switch r.status {
		case http.StatusOK:
			accepted++
			require.Zero(t, sent[id], "task %s was %s %s before due (200) and still sent", id, what, r.ahead)
		case http.StatusConflict:
			refused++
			require.Positive(t, sent[id], "task %s: %s refused %s before due (409), so sent", id, what, r.ahead)
		}
	}
	for id, count := range sent {
		if count > 1 {
			var recorded []string
			if attempts, err := acme.client.ListTaskAttemptsWithResponse(ctx, uuid.MustParse(id), nil); err == nil && attempts.JSON200 != nil {
				for _, a := range attempts.JSON200.Data {
					why := ""
					if a.Error != nil {
						why = *a.Error
					}
					recorded = append(recorded, fmt.Sprintf("attempt %d %s %q", a.Attempt, a.Outcome, why))
				}
			}
			t.Logf("task %s arrived in %d attempts: %v", id, count, recorded)
		}
	}
	require.Len(t, sent, expected)
	// Both sides of the claim were reached, or the test proved nothing.
	// The slowest answer, counted from when its request was meant to start.
	slowest := time.Duration(0)
	for _, r := range races {
		slowest = max(slowest, r.ahead-r.answered)
	}
	require.Positive(t, accepted, "no cancel or reschedule came before a claim; the tasks were made %s before due, the slowest answer took %s", madeBy, slowest)
	require.Positive(t, refused, "no cancel or reschedule came after a claim")
	t.Logf("%d raced: %d answered 200 and were never sent, %d answered 409 and were sent; made %s before due, slowest answer %s",
		racers, accepted, refused, madeBy.Round(time.Millisecond), slowest.Round(time.Millisecond))
}
