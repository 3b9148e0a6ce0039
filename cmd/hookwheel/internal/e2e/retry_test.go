package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestRetryRules checks each retry rule of the contract against a real
// receiver: which answers are retried, which are final, and how Retry-After
// moves the next attempt.
func TestRetryRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")

	fast := &openapi.RetryPolicy{MaxAttempts: ptr(3), MinBackoff: ptr("100ms"), MaxBackoff: ptr("200ms")}
	statusTests := []struct {
		status  int
		retried bool
	}{
		{http.StatusRequestTimeout, true},
		{http.StatusTooEarly, true},
		{http.StatusTooManyRequests, true},
		{http.StatusInternalServerError, true},
		{http.StatusBadGateway, true},
		{http.StatusServiceUnavailable, true},
		{http.StatusGatewayTimeout, true},
		{http.StatusMovedPermanently, false},
		{http.StatusFound, false},
		{http.StatusBadRequest, false},
		{http.StatusUnauthorized, false},
		{http.StatusForbidden, false},
		{http.StatusNotFound, false},
		{http.StatusGone, false},
		{http.StatusUnprocessableEntity, false},
	}
	for _, tt := range statusTests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			recv := newReceiver(t)
			recv.setRespond(func(_ delivery, nth int) (int, http.Header) {
				if nth == 1 {
					return tt.status, nil
				}
				return http.StatusOK, nil
			})
			task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/r", Retry: fast})
			if !tt.retried {
				dead := acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
				require.Equal(t, 1, dead.Attempts, "%d is final", tt.status)
				require.Equal(t, tt.status, *dead.LastStatusCode)
				require.Len(t, recv.snapshot(), 1)
				return
			}
			done := acme.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 10*time.Second)
			require.Equal(t, 2, done.Attempts, "%d is retried", tt.status)
			ds := recv.snapshot()
			require.Len(t, ds, 2)
			gap := ds[1].arrived.Sub(ds[0].arrived)
			// Backoff after attempt 1 is min_backoff, ±20 %, clamped to [100ms, 200ms].
			require.GreaterOrEqual(t, gap, 100*time.Millisecond)
			require.Less(t, gap, 2*time.Second, "the retry came far later than its backoff")
		})
	}

	t.Run("network error is retried", func(t *testing.T) {
		t.Parallel()
		recv := newReceiver(t)
		url := recv.URL
		recv.Close() // nothing listens there any more
		task := acme.schedule(t, openapi.TaskRequest{URL: url + "/gone", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(2), MinBackoff: ptr("100ms"), MaxBackoff: ptr("100ms")}})
		dead := acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
		require.Equal(t, 2, dead.Attempts, "a network error is retried until the attempts run out")
		require.Nil(t, dead.LastStatusCode)
		require.NotEmpty(t, *dead.LastError)
	})

	t.Run("Retry-After seconds on 429 is honoured", func(t *testing.T) {
		t.Parallel()
		recv := newReceiver(t)
		recv.setRespond(func(_ delivery, nth int) (int, http.Header) {
			if nth == 1 {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
			}
			return http.StatusOK, nil
		})
		task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/slow-down", Retry: fast})
		acme.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 10*time.Second)
		ds := recv.snapshot()
		require.Len(t, ds, 2)
		require.GreaterOrEqual(t, ds[1].arrived.Sub(ds[0].arrived), time.Second, "Retry-After: 1 beats the 200ms max_backoff")
	})

	t.Run("Retry-After is honoured up to one hour, past max_backoff", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			header string
			want   time.Duration
		}{
			{"120", 2 * time.Minute},
			{"86400", time.Hour},
			{time.Now().Add(10 * time.Minute).UTC().Format(http.TimeFormat), 10 * time.Minute},
		} {
			recv := newReceiver(t)
			recv.setRespond(func(delivery, int) (int, http.Header) {
				return http.StatusServiceUnavailable, http.Header{"Retry-After": {tc.header}}
			})
			task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/later", Retry: fast})
			waiting := acme.waitStatus(t, task.ID, openapi.TaskStatusRetrying, 10*time.Second)
			require.NotNil(t, waiting.NextAttemptAt)
			first := recv.snapshot()[0].arrived
			wait := waiting.NextAttemptAt.Sub(first)
			require.InDelta(t, tc.want.Seconds(), wait.Seconds(), 2, fmt.Sprintf("Retry-After %q", tc.header))
		}
	})

	t.Run("Hookwheel-Retry: stop on a 503 kills the task at once", func(t *testing.T) {
		t.Parallel()
		recv := newReceiver(t)
		recv.setRespond(func(delivery, int) (int, http.Header) {
			return http.StatusServiceUnavailable, http.Header{
				"Hookwheel-Retry": {"stop"},
				"X-Request-Id":    {"req-503"},
				"Set-Cookie":      {"session=abc"},
			}
		})
		task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/never", Retry: fast})
		dead := acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
		require.Equal(t, 1, dead.Attempts, "no retry once the receiver said stop")
		require.Equal(t, http.StatusServiceUnavailable, *dead.LastStatusCode)
		require.Contains(t, *dead.LastError, "Hookwheel-Retry: stop")
		require.Len(t, recv.snapshot(), 1)

		attempts, err := acme.client.ListTaskAttemptsWithResponse(context.Background(), task.ID, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, attempts.StatusCode(), "%s", attempts.Body)
		require.Len(t, attempts.JSON200.Data, 1)
		a := attempts.JSON200.Data[0]
		require.Equal(t, openapi.AttemptOutcomeFail, a.Outcome)
		require.Equal(t, "receiver answered 503 Service Unavailable with Hookwheel-Retry: stop; not retried", *a.Error)
		require.Equal(t, "stop", a.ResponseHeaders["Hookwheel-Retry"])
		require.Equal(t, "req-503", a.ResponseHeaders["X-Request-Id"])
		require.NotEmpty(t, a.ResponseHeaders["Date"])
		require.NotContains(t, a.ResponseHeaders, "Set-Cookie", "credentials are never kept")
	})

	t.Run("Hookwheel-Retry: stop on a 2xx changes nothing", func(t *testing.T) {
		t.Parallel()
		recv := newReceiver(t)
		recv.setRespond(func(delivery, int) (int, http.Header) {
			return http.StatusOK, http.Header{"Hookwheel-Retry": {"stop"}, "Content-Type": {"application/json"}}
		})
		task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/fine", Retry: fast})
		done := acme.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 10*time.Second)
		require.Equal(t, 1, done.Attempts)
		attempts, err := acme.client.ListTaskAttemptsWithResponse(context.Background(), task.ID, nil)
		require.NoError(t, err)
		require.Len(t, attempts.JSON200.Data, 1)
		a := attempts.JSON200.Data[0]
		require.Equal(t, openapi.AttemptOutcomeSuccess, a.Outcome)
		require.Nil(t, a.Error)
		require.Equal(t, "application/json", a.ResponseHeaders["Content-Type"])
	})

	t.Run("an attempt with no response has no headers", func(t *testing.T) {
		t.Parallel()
		recv := newReceiver(t)
		url := recv.URL
		recv.Close()
		task := acme.schedule(t, openapi.TaskRequest{URL: url + "/gone", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
		acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
		attempts, err := acme.client.ListTaskAttemptsWithResponse(context.Background(), task.ID, nil)
		require.NoError(t, err)
		require.Len(t, attempts.JSON200.Data, 1)
		require.Nil(t, attempts.JSON200.Data[0].StatusCode)
		require.Nil(t, attempts.JSON200.Data[0].ResponseHeaders)
		require.NotContains(t, string(attempts.Body), "response_headers", "absent, not null")
	})

	t.Run("the last attempt's failure kills the task", func(t *testing.T) {
		t.Parallel()
		recv := newReceiver(t)
		recv.setRespond(func(delivery, int) (int, http.Header) { return http.StatusInternalServerError, nil })
		task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/always-500", Retry: fast})
		dead := acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
		require.Equal(t, 3, dead.Attempts, "max_attempts counts every attempt, the first included")
		require.Len(t, recv.snapshot(), 3)
	})
}
