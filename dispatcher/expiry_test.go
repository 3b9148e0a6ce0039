package dispatcher

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// slowLimits admits every claim after a wait of after on the fake clock, as
// a tenant's concurrency limit makes a claim wait for a slot; admitted
// counts the claims it let through.
type slowLimits struct {
	clock    *clock.Fake
	after    time.Duration
	admitted atomic.Int32
}

func (l *slowLimits) admit(*model.ClaimedTask) (func(), bool) {
	l.clock.Advance(l.after)
	l.admitted.Add(1)
	return func() {}, true
}

// expiringClaim is b's claim of a task that expires in, with a failure
// callback.
func expiringClaim(b *senderBundle, in time.Duration) *model.ClaimedTask {
	c := b.claim()
	expires := b.clock.Now().Add(in)
	c.ExpiresAt = &expires
	failed := b.receiver.URL + "/failed"
	c.FailureCallback = &failed
	return c
}

// requireExpiredUnsent checks that c was not sent and that its expiry was
// recorded, without an attempt, with its failure callback reporting it.
func requireExpiredUnsent(t *testing.T, b *senderBundle, c *model.ClaimedTask) {
	t.Helper()
	r := receive(t, b.records)
	require.Equal(t, c.ID, r.TaskID)
	require.Equal(t, c.ClaimToken, r.ClaimToken, "recorded under its claim")
	require.Equal(t, c.Attempt, r.Attempt.Attempt)
	require.Equal(t, model.StatusExpired, r.Status)
	require.True(t, r.Unattempted, "no attempt is recorded")
	require.Nil(t, r.NextAttemptAt)
	require.Nil(t, r.StatusCode)
	require.NotNil(t, r.Error)
	require.Contains(t, *r.Error, "expired at")
	require.False(t, r.StartedAt.Before(*c.ExpiresAt), "ended at or after its expiry, never before")

	require.NotNil(t, r.Callback, "the failure callback hears of it")
	require.Equal(t, *c.FailureCallback, r.Callback.URL)
	var payload callbackPayload
	require.NoError(t, json.Unmarshal(r.Callback.Body, &payload))
	require.Equal(t, model.StatusExpired, payload.Status)
	require.Equal(t, c.Attempt-1, payload.Attempt, "the attempt before the one that never started")
	require.Equal(t, r.Error, payload.Error)
	require.Nil(t, payload.Response.StatusCode)

	require.Equal(t, c.ID, receive(t, b.settled))
	require.Equal(t, r.Callback.ID, receive(t, b.scheduled).id, "the callback is armed")
	require.Empty(t, b.requests, "nothing was sent")
	require.Empty(t, b.deferred)
	require.Equal(t, model.MinuteStats{}, b.stats.pendingFor(c.TenantID, r.StartedAt), "no attempt counted")
}

// TestSenderExpiresLateSend: a claim taken before its task's expiry whose
// send would start after it, once the wait for a dispatch limit's slot is
// over, is not sent: its task ends expired, with no attempt, at the
// instant the send would have started.
func TestSenderExpiresLateSend(t *testing.T) {
	t.Parallel()
	var limits slowLimits
	b := setupSender(t, senderOptions{limits: &limits})
	limits.clock, limits.after = b.clock, 2*time.Second
	c := expiringClaim(b, time.Second)
	b.claimed <- c

	requireExpiredUnsent(t, b, c)
	require.EqualValues(t, 1, limits.admitted.Load(), "it was claimed and admitted in time")

	// A claim whose expiry is past the wait is sent as ever.
	in := expiringClaim(b, time.Minute)
	b.claimed <- in
	require.Equal(t, in.ID.String(), receive(t, b.requests).header.Get("Webhook-Id"))
	r := receive(t, b.records)
	require.Equal(t, model.StatusDelivered, r.Status)
	require.False(t, r.Unattempted)
	require.True(t, r.StartedAt.Before(*in.ExpiresAt))
}

// TestSenderExpiresOnArrival: a claim whose task expired before it reached
// the sender ends expired before any limit or slot is spent on it.
func TestSenderExpiresOnArrival(t *testing.T) {
	t.Parallel()
	var limits slowLimits
	b := setupSender(t, senderOptions{limits: &limits})
	limits.clock = b.clock
	c := expiringClaim(b, 0) // expires the instant it is due
	b.claimed <- c

	requireExpiredUnsent(t, b, c)
	require.Zero(t, limits.admitted.Load(), "no limit was asked")
}

// TestSenderRetryPastExpiry: a failed attempt whose retry would start after
// the task's expiry is its final one: recorded as failed, the task expired,
// no retry armed, the failure callback told with the attempt's answer.
func TestSenderRetryPastExpiry(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	b.status.Store(http.StatusServiceUnavailable)
	c := expiringClaim(b, 500*time.Millisecond) // the retry waits a second at least
	b.claimed <- c

	require.Equal(t, c.ID.String(), receive(t, b.requests).header.Get("Webhook-Id"), "the attempt in time is made")
	r := receive(t, b.records)
	require.Equal(t, model.StatusExpired, r.Status)
	require.False(t, r.Unattempted)
	require.Equal(t, "fail", r.Outcome)
	require.Equal(t, http.StatusServiceUnavailable, *r.StatusCode)
	require.Nil(t, r.NextAttemptAt)
	require.Contains(t, *r.Error, "not retried")
	require.NotNil(t, r.Callback)
	var payload callbackPayload
	require.NoError(t, json.Unmarshal(r.Callback.Body, &payload))
	require.Equal(t, model.StatusExpired, payload.Status)
	require.Equal(t, c.Attempt, payload.Attempt)
	require.Equal(t, http.StatusServiceUnavailable, *payload.Response.StatusCode)

	require.Equal(t, c.ID, receive(t, b.settled))
	require.Equal(t, r.Callback.ID, receive(t, b.scheduled).id, "only the callback is armed, no retry")
	var want model.MinuteStats
	want.Add(model.StatusDead, 0)
	require.Equal(t, want, b.stats.pendingFor(c.TenantID, r.StartedAt), "counted as a final failure")

	// One that expires after its retry's time is retried as ever.
	later := expiringClaim(b, time.Hour)
	b.claimed <- later
	receive(t, b.requests)
	require.Equal(t, model.StatusRetrying, receive(t, b.records).Status)
}

// fakeDeferStore keeps what DeferClaims is given.
type fakeDeferStore struct{ deferred chan []model.DeferredClaim }

func (s *fakeDeferStore) DeferClaims(_ context.Context, claims []model.DeferredClaim) error {
	s.deferred <- claims
	return nil
}

// TestDeferrerExpires: a claim given back to come due at or after its
// task's expiry ends expired instead; the others in the same call are
// given back as asked. While stopping, every claim is given back.
func TestDeferrerExpires(t *testing.T) {
	t.Parallel()
	now := time.Now()
	fake := clock.NewFake(now)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	claim := func(expires *time.Time) *model.ClaimedTask {
		return &model.ClaimedTask{Task: model.Task{ID: uuid.New(), NextAttemptAt: at(-time.Second), ExpiresAt: expires},
			ClaimToken: uuid.New(), Attempt: 1}
	}
	var stopping atomic.Bool
	store := &fakeDeferStore{deferred: make(chan []model.DeferredClaim, 4)}
	expired := make(chan uuid.UUID, 8)
	d := newDeferrer(deferrerConfig{
		Store: store, Logger: quietLogger(), Metrics: testMetrics(t),
		Settle: func(uuid.UUID) {}, Schedule: func(uuid.UUID, time.Time) {}, Stopping: stopping.Load,
		Expire: func(c *model.ClaimedTask, at time.Time) {
			require.Equal(t, now, at)
			expired <- c.ID
		},
		Clock: fake,
	})

	never, late, past, inTime := claim(nil), claim(at(time.Minute)), claim(at(-time.Millisecond)), claim(at(time.Hour))
	claims := []*model.ClaimedTask{never, late, past, inTime}
	until := []time.Time{now.Add(time.Hour), now.Add(2 * time.Minute), time.Time{}, now.Add(time.Minute)}
	d.Defer(claims, func(i int) time.Time { return until[i] })

	got := []uuid.UUID{receive(t, expired), receive(t, expired)}
	require.ElementsMatch(t, []uuid.UUID{late.ID, past.ID}, got,
		"back only after its expiry, or expired already: ended")
	back := receive(t, store.deferred)
	require.Equal(t, []model.DeferredClaim{
		{ID: never.ID, Token: never.ClaimToken, NotBefore: until[0]},
		{ID: inTime.ID, Token: inTime.ClaimToken, NotBefore: until[3]},
	}, back, "the others go back as asked, each with its own time")

	stopping.Store(true)
	d.Defer([]*model.ClaimedTask{late}, func(int) time.Time { return until[1] })
	require.Len(t, receive(t, store.deferred), 1, "while stopping it is given back for the next owner")
	require.Empty(t, expired)
}
