package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestExpiry follows tasks with an expiry through a whole node: one whose
// receiver fails, so that its retry would start past its expires_at, ends
// expired after its one attempt; one held past its expiry (its tenant
// suspended) ends expired with no attempt at all once it is claimed. Each
// time the failure callback hears of it, signed, with status expired, and
// the task is listed and counted as expired.
func TestExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	targets, callbacks := newReceiver(t), newReceiver(t)
	targets.setRespond(func(delivery, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	wh, err := standardwebhooks.NewWebhook(acme.signingSecret)
	require.NoError(t, err)

	// reported waits for the callback at path, verifies it and decodes it.
	reported := func(t *testing.T, path string) callbackBody {
		t.Helper()
		ds := callbacks.waitFor(t, 20*time.Second, "a callback at "+path, func(ds []delivery) bool {
			return len(deliveriesAt(ds, path)) > 0
		})
		d := deliveriesAt(ds, path)[0]
		require.NoError(t, wh.Verify(d.body, d.header), "signed as every webhook")
		var p callbackBody
		require.NoError(t, json.Unmarshal(d.body, &p))
		return p
	}

	t.Run("retry past the expiry", func(t *testing.T) {
		// The first attempt fails at once; its retry would come 5 s later,
		// after the task expires.
		source := acme.schedule(t, openapi.TaskRequest{
			URL: targets.URL + "/code", ExpiresIn: ptr("3s"),
			Retry:           &openapi.RetryPolicy{MaxAttempts: ptr(5), MinBackoff: ptr("5s"), MaxBackoff: ptr("5s")},
			FailureCallback: ptr(callbacks.URL + "/code-expired"),
		})
		require.NotNil(t, source.ExpiresAt)

		p := reported(t, "/code-expired")
		require.Equal(t, source.ID.String(), p.TaskID)
		require.Equal(t, "expired", p.Status)
		require.Equal(t, 1, p.Attempt, "the attempt made before the expiry")
		require.Equal(t, ptr(http.StatusServiceUnavailable), p.Response.StatusCode, "with that attempt's answer")
		require.NotNil(t, p.Error)
		require.Contains(t, *p.Error, "not retried")

		task := acme.waitStatus(t, source.ID, openapi.TaskStatusExpired, 5*time.Second)
		require.Equal(t, 1, task.Attempts)
		require.Nil(t, task.NextAttemptAt)
		require.NotNil(t, task.CallbackTaskID)
		attempts := acme.attemptsOf(t, source.ID)
		require.Len(t, attempts, 1)
		require.Equal(t, openapi.AttemptOutcome("fail"), attempts[0].Outcome)
		require.True(t, attempts[0].StartedAt.Before(*source.ExpiresAt))
		require.Len(t, deliveriesAt(targets.snapshot(), "/code"), 1, "no attempt after the expiry")
	})

	t.Run("held past the expiry", func(t *testing.T) {
		due := time.Now().Add(2 * time.Second)
		expires := due.Add(time.Second)
		source := acme.schedule(t, openapi.TaskRequest{
			URL: targets.URL + "/held", RunAt: &due, ExpiresAt: &expires,
			FailureCallback: ptr(callbacks.URL + "/held-expired"),
		})
		admin := func(op string) {
			t.Helper()
			resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/admin/tenants/"+acme.id.String()+"/"+op, "admin-token", nil, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", op, body)
		}
		admin("suspend")
		require.True(t, time.Now().Before(due), "suspending took until the task was due")
		// Held while it falls due and while it expires: nothing is sent.
		<-time.After(time.Until(expires.Add(500 * time.Millisecond)))
		require.Empty(t, deliveriesAt(targets.snapshot(), "/held"), "a held task was sent")
		admin("resume")

		p := reported(t, "/held-expired")
		require.Equal(t, source.ID.String(), p.TaskID)
		require.Equal(t, "expired", p.Status)
		require.Zero(t, p.Attempt, "no attempt was ever made")
		require.Nil(t, p.Response.StatusCode)
		require.NotNil(t, p.Error)
		require.Contains(t, *p.Error, "expired at")

		task := acme.waitStatus(t, source.ID, openapi.TaskStatusExpired, 5*time.Second)
		require.Zero(t, task.Attempts, "the claim's attempt was given back")
		require.Empty(t, acme.attemptsOf(t, source.ID))
		require.Empty(t, deliveriesAt(targets.snapshot(), "/held"), "no attempt started after the expiry")
	})

	t.Run("listed and counted", func(t *testing.T) {
		status := openapi.TaskStatusExpired
		resp, err := acme.client.ListTasksWithResponse(context.Background(), &openapi.ListTasksParams{Status: &status})
		require.NoError(t, err)
		require.Len(t, resp.JSON200.Data, 2)
		_, stats := acme.statsTotals(t)
		require.Equal(t, 2, stats.TasksByStatus.Expired)
	})
}
