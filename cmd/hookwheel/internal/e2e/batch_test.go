package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
)

// TestBatchThousandWithInvalidItems sends one batch of 1,000 items, a few of
// them invalid, through a real node: every valid item fires exactly once,
// never early; every invalid one gets a problem naming what is wrong, and
// nothing is sent for it.
func TestBatchThousandWithInvalidItems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)

	const count = 1000
	// The bad items, by index, and the field each problem must name.
	invalid := map[int]struct {
		edit  func(*openapi.BatchTaskRequest)
		field string
	}{
		0:   {func(r *openapi.BatchTaskRequest) { r.URL = "ftp://example.com/x" }, "url"},
		17:  {func(r *openapi.BatchTaskRequest) { r.RunAt, r.Delay = nil, ptr("soon") }, "delay"},
		500: {func(r *openapi.BatchTaskRequest) { r.Retry = &openapi.RetryPolicy{MaxAttempts: ptr(0)} }, "retry.max_attempts"},
		998: {func(r *openapi.BatchTaskRequest) { r.Headers = map[string]string{"Host": "evil.example"} }, "headers.Host"},
		999: {func(r *openapi.BatchTaskRequest) { r.IdempotencyKey = ptr(strings.Repeat("k", 256)) }, "idempotency_key"},
	}
	// Due over one second from 2 s ahead, one every millisecond: in the
	// loader's window already, so the batch's announcement is what arms them.
	start := time.Now().Add(2 * time.Second)
	items := make([]openapi.BatchTaskRequest, count)
	for i := range items {
		at := start.Add(time.Duration(i) * time.Millisecond)
		items[i] = openapi.BatchTaskRequest{
			URL:            fmt.Sprintf("%s/batch/%d", recv.URL, i),
			Body:           fmt.Sprintf(`{"item": %d}`, i),
			RunAt:          &at,
			IdempotencyKey: ptr(fmt.Sprintf("item-%d", i)),
		}
		if bad, ok := invalid[i]; ok {
			bad.edit(&items[i])
		}
	}
	resp, err := acme.client.CreateTasksBatchWithResponse(context.Background(), openapi.BatchRequest{Tasks: items})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	results := resp.JSON200.Data
	require.Len(t, results, count)

	want := map[string]int{} // webhook-id to item index
	for i, res := range results {
		if bad, ok := invalid[i]; ok {
			require.Nil(t, res.Task, "item %d is invalid", i)
			require.NotNil(t, res.Error, "item %d", i)
			require.Equal(t, http.StatusUnprocessableEntity, res.Error.Status)
			require.Len(t, res.Error.Errors, 1, "item %d: %+v", i, res.Error)
			require.Equal(t, bad.field, res.Error.Errors[0].Field, "item %d", i)
			require.NotEmpty(t, res.Error.Errors[0].Message)
			require.Contains(t, res.Error.Detail, bad.field)
			continue
		}
		require.Nil(t, res.Error, "item %d: %+v", i, res.Error)
		require.NotNil(t, res.Task)
		require.Equal(t, openapi.TaskStatusScheduled, res.Task.Status)
		require.True(t, res.Task.RunAt.Equal(items[i].RunAt.Truncate(time.Microsecond)) ||
			res.Task.RunAt.Equal(items[i].RunAt.Truncate(time.Microsecond).Add(time.Microsecond)))
		want[res.Task.ID.String()] = i
	}
	valid := count - len(invalid)
	require.Len(t, want, valid)

	recv.waitFor(t, 30*time.Second, "every valid item", func(ds []delivery) bool { return len(distinctIDs(ds)) == valid })
	// A task is delivered once its attempt is recorded: by then a duplicate
	// would have had its chance to show.
	waitAllDelivered(t, acme, valid)
	ds := recv.snapshot()
	require.Len(t, ds, valid, "no item may arrive twice")
	for _, d := range ds {
		i, ok := want[d.webhookID()]
		require.True(t, ok, "unknown webhook-id %s", d.webhookID())
		require.Equal(t, fmt.Sprintf("/batch/%d", i), d.path, "item %d went to its own URL", i)
		require.Equal(t, fmt.Sprintf(`{"item": %d}`, i), string(d.body))
		require.Equal(t, fmt.Sprintf("item-%d", i), d.header.Get("Idempotency-Key"), "the item's key goes out with it")
		at, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
		require.NoError(t, err)
		require.False(t, d.arrived.Before(at), "item %d arrived %s early", i, at.Sub(d.arrived))
	}

	// The same batch again creates nothing: every valid item is a replay.
	again, err := acme.client.CreateTasksBatchWithResponse(context.Background(), openapi.BatchRequest{Tasks: items})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode(), string(again.Body))
	for i, res := range again.JSON200.Data {
		if _, bad := invalid[i]; bad {
			require.NotNil(t, res.Error)
			continue
		}
		require.Equal(t, results[i].Task.ID, res.Task.ID)
		require.Equal(t, ptr(true), res.Replayed)
		require.Equal(t, openapi.TaskStatusDelivered, res.Task.Status, "a replay shows the task as it is now")
	}
}

// TestRescheduleMovesDelivery moves tasks sooner and later, on one node and
// through an API-only node whose dispatcher is elsewhere (so that only the
// Postgres announcement can tell it): each arrives once, at its new time and
// never before, with Hookwheel-Scheduled-At naming the new time.
func TestRescheduleMovesDelivery(t *testing.T) {
	t.Parallel()
	setups := []struct {
		name  string
		start func(e *env) (api *node)
	}{
		{"one node", func(e *env) *node { return e.startNode() }},
		{"API and dispatcher apart", func(e *env) *node {
			e.startNode(func(c *app.Config) { c.DisableAPI = true })
			return e.startNode(func(c *app.Config) { c.DisableDispatcher = true })
		}},
	}
	for _, setup := range setups {
		t.Run(setup.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			api := setup.start(e)
			acme := e.createTenant(api, "acme")
			recv := newReceiver(t)
			ctx := context.Background()

			// Sooner: an hour ahead, past the loader's window, brought to a
			// second from now.
			sooner := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/sooner", Delay: ptr("1h")})
			// Later: due in 1.5 s, its timer already armed, moved to 3 s.
			later := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/later", Delay: ptr("1500ms")})

			reschedule := func(id openapi.TaskID, delay string) openapi.Task {
				t.Helper()
				resp, err := acme.client.RescheduleTaskWithResponse(ctx, id, openapi.RescheduleRequest{Delay: ptr(delay)})
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
				return *resp.JSON200
			}
			movedLater := reschedule(later.ID, "3s")
			movedSooner := reschedule(sooner.ID, "1s")
			require.True(t, movedLater.RunAt.After(later.RunAt))
			require.True(t, movedSooner.RunAt.Before(sooner.RunAt))

			recv.waitFor(t, 20*time.Second, "both tasks", func(ds []delivery) bool { return len(distinctIDs(ds)) == 2 })
			acme.waitStatus(t, sooner.ID, openapi.TaskStatusDelivered, 10*time.Second)
			acme.waitStatus(t, later.ID, openapi.TaskStatusDelivered, 10*time.Second)
			ds := recv.snapshot()
			require.Len(t, ds, 2, "each task arrives once")
			for _, d := range ds {
				want := movedSooner
				if d.webhookID() == later.ID.String() {
					want = movedLater
				}
				at, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
				require.NoError(t, err)
				require.True(t, at.Equal(want.RunAt), "Hookwheel-Scheduled-At %s, want the new run_at %s", at, want.RunAt)
				require.False(t, d.arrived.Before(want.RunAt), "%s arrived %s before its new time", d.path, want.RunAt.Sub(d.arrived))
				// The sooner one arrives long before its old time; a second
				// of slack covers a slow machine under -race.
				require.Less(t, d.arrived.Sub(want.RunAt), time.Second, "%s arrived late", d.path)
			}

			// Once sent, a task cannot be moved.
			resp, err := acme.client.RescheduleTaskWithResponse(ctx, sooner.ID, openapi.RescheduleRequest{Delay: ptr("1h")})
			require.NoError(t, err)
			require.Equal(t, http.StatusConflict, resp.StatusCode(), string(resp.Body))
		})
	}
}
