package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// listAll lists every task of tn matching params, page after page.
func (tn *tenant) listAll(t *testing.T, params openapi.ListTasksParams) []openapi.Task {
	t.Helper()
	var all []openapi.Task
	params.Limit = ptr(2) // small pages: the label filter must hold across cursors
	for {
		resp, err := tn.client.ListTasksWithResponse(context.Background(), &params)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
		all = append(all, resp.JSON200.Data...)
		if resp.JSON200.NextCursor == nil {
			return all
		}
		params.Cursor = resp.JSON200.NextCursor
	}
}

// TestLabels: tasks labelled when created alone, in a batch and as a
// schedule's occurrences are listed by their labels, and the dead ones
// among them are replayed by label, keeping their labels, while a dead task
// without them and another tenant's with the same labels stay dead.
func TestLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	n := e.startNode()
	tn := e.createTenant(n, "labels")
	other := e.createTenant(n, "labels-other")

	// Until fixed, the receiver answers 410 under /gone/: the task is dead
	// at once.
	var fixed atomic.Bool
	rcv := newReceiver(t)
	rcv.setRespond(func(d delivery, _ int) (int, http.Header) {
		if strings.Contains(d.path, "/gone/") && !fixed.Load() {
			return http.StatusGone, nil
		}
		return http.StatusOK, nil
	})
	run := "r" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	labels := func(via string) openapi.Labels { return openapi.Labels{"run": run, "via": via} }

	single := tn.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/gone/single", Labels: labels("single")})
	require.Equal(t, labels("single"), single.Labels)
	bare := tn.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/gone/bare"})
	othersTask := other.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/gone/other", Labels: labels("single")})

	batch, err := tn.client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: []openapi.BatchTaskRequest{
		{URL: rcv.URL + "/gone/batch", Labels: labels("batch")},
		{URL: rcv.URL + "/ok/batch", Labels: labels("batch")},
	}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, batch.StatusCode(), string(batch.Body))
	var batchIDs []uuid.UUID
	for i, r := range batch.JSON200.Data {
		require.NotNil(t, r.Task, "item %d: %+v", i, r.Error)
		require.Equal(t, labels("batch"), r.Task.Labels)
		batchIDs = append(batchIDs, r.Task.ID)
	}

	sched, err := tn.client.CreateScheduleWithResponse(ctx, openapi.ScheduleRequest{
		Cron: "@every 1s", URL: rcv.URL + "/gone/schedule", Labels: labels("schedule"),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, sched.StatusCode(), string(sched.Body))
	require.Equal(t, labels("schedule"), sched.JSON201.Labels)
	scheduleID := sched.JSON201.ID

	// Two occurrences sent (and dead), then the schedule paused: what was
	// materialised ahead of time is canceled, so the set stops growing.
	rcv.waitFor(t, 30*time.Second, "two occurrences of the schedule", func(ds []delivery) bool {
		n := 0
		for _, d := range ds {
			if d.path == "/gone/schedule" {
				n++
			}
		}
		return n >= 2
	})
	paused, err := tn.client.PauseScheduleWithResponse(ctx, scheduleID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, paused.StatusCode(), string(paused.Body))

	for _, id := range []uuid.UUID{single.ID, bare.ID, batchIDs[0]} {
		tn.waitStatus(t, id, openapi.TaskStatusDead, 30*time.Second)
	}
	other.waitStatus(t, othersTask.ID, openapi.TaskStatusDead, 30*time.Second)
	tn.waitStatus(t, batchIDs[1], openapi.TaskStatusDelivered, 30*time.Second)

	// Every labelled task of the run settles (dead, delivered or canceled).
	var labelled []openapi.Task
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		labelled = tn.listAll(t, openapi.ListTasksParams{Label: []string{"run:" + run}})
		settled := true
		for _, task := range labelled {
			switch task.Status {
			case openapi.TaskStatusDead, openapi.TaskStatusDelivered, openapi.TaskStatusCanceled:
			default:
				settled = false
			}
		}
		if settled {
			break
		}
		require.False(t, time.Now().After(deadline), "the labelled tasks did not settle: %+v", labelled)
		<-poll.C
	}

	// The listing holds exactly the labelled tasks of this tenant: the
	// single one, both of the batch and every occurrence.
	byVia := map[string][]openapi.Task{}
	for _, task := range labelled {
		require.Equal(t, run, task.Labels["run"])
		byVia[task.Labels["via"]] = append(byVia[task.Labels["via"]], task)
	}
	require.Len(t, byVia["single"], 1)
	require.Equal(t, single.ID, byVia["single"][0].ID)
	require.Len(t, byVia["batch"], 2)
	require.GreaterOrEqual(t, len(byVia["schedule"]), 2)
	require.Len(t, labelled, 3+len(byVia["schedule"]))
	var deadOccurrences []uuid.UUID
	for _, task := range byVia["schedule"] {
		require.Equal(t, &scheduleID, task.ScheduleID)
		if task.Status == openapi.TaskStatusDead {
			deadOccurrences = append(deadOccurrences, task.ID)
		}
	}
	require.GreaterOrEqual(t, len(deadOccurrences), 2)

	// Labels AND, and combine with the other filters.
	occurrences := tn.listAll(t, openapi.ListTasksParams{Label: []string{"run:" + run, "via:schedule"}, ScheduleID: &scheduleID})
	require.Len(t, occurrences, len(byVia["schedule"]))
	deadBatch := tn.listAll(t, openapi.ListTasksParams{Label: []string{"via:batch", "run:" + run}, Status: ptr(openapi.TaskStatusDead)})
	require.Len(t, deadBatch, 1)
	require.Equal(t, batchIDs[0], deadBatch[0].ID)

	// The receiver is fixed: replay the run's dead tasks by label, after
	// a dry run.
	fixed.Store(true)
	wantReplayed := 2 + len(deadOccurrences)
	dry, err := tn.client.ReplayTasksWithResponse(ctx, openapi.ReplayFilter{Labels: openapi.Labels{"run": run}, DryRun: ptr(true)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dry.StatusCode(), string(dry.Body))
	require.Equal(t, openapi.ReplayResult{Matched: wantReplayed}, *dry.JSON200)
	replayed, err := tn.client.ReplayTasksWithResponse(ctx, openapi.ReplayFilter{Labels: openapi.Labels{"run": run}})
	require.NoError(t, err)
	require.Equal(t, openapi.ReplayResult{Matched: wantReplayed, Replayed: wantReplayed}, *replayed.JSON200)

	for _, id := range append([]uuid.UUID{single.ID, batchIDs[0]}, deadOccurrences...) {
		task := tn.waitStatus(t, id, openapi.TaskStatusDelivered, 30*time.Second)
		require.Equal(t, run, task.Labels["run"], "a replay keeps the labels")
	}
	require.Equal(t, openapi.TaskStatusDead, tn.task(t, bare.ID).Status, "no labels, not replayed")
	require.Equal(t, openapi.TaskStatusDead, other.task(t, othersTask.ID).Status, "another tenant's, not replayed")
}
