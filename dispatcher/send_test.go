package dispatcher

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestSenderDelivers sends one attempt per receiver answer and checks the
// request the receiver got and the outcome handed to the recorder.
func TestSenderDelivers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		status      int
		lastAttempt bool
		want        model.TaskStatus
		outcome     string
	}{
		{name: "success", status: http.StatusOK, want: model.StatusDelivered, outcome: "success"},
		{name: "retryable", status: http.StatusServiceUnavailable, want: model.StatusRetrying, outcome: "retry"},
		{name: "retryable, no attempt left", status: http.StatusServiceUnavailable, lastAttempt: true, want: model.StatusDead, outcome: "fail"},
		{name: "refused", status: http.StatusBadRequest, want: model.StatusDead, outcome: "fail"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{})
			b.status.Store(int32(tc.status))
			c := b.claim()
			if tc.lastAttempt {
				c.Attempt = c.MaxAttempts
			}
			b.claimed <- c

			req := receive(t, b.requests)
			require.Equal(t, `{"order":42}`, req.body)
			require.Equal(t, c.ID.String(), req.header.Get("Webhook-Id"))
			require.NotEmpty(t, req.header.Get("Webhook-Signature"))
			require.Equal(t, c.ID.String(), req.header.Get("Idempotency-Key"))
			require.Equal(t, strconv.Itoa(c.Attempt), req.header.Get("Hookwheel-Attempt"))
			require.Equal(t, "hookwheel-test", req.header.Get("User-Agent"))

			r := receive(t, b.records)
			require.Equal(t, c.ID, r.TaskID)
			require.Equal(t, c.ClaimToken, r.ClaimToken)
			require.Equal(t, tc.want, r.Status)
			require.Equal(t, tc.outcome, r.Outcome)
			require.Equal(t, tc.status, *r.StatusCode)
			require.Equal(t, "thanks", *r.ResponseBody)
			require.Equal(t, c.ID, receive(t, b.settled))
			// Sent at its instant on the fake clock: not late at all.
			var want model.MinuteStats
			want.Add(tc.want, 0)
			require.Equal(t, want, b.stats.pendingFor(c.TenantID, b.clock.Now()), "counted as recorded")
			if tc.want == model.StatusRetrying {
				require.NotNil(t, r.NextAttemptAt)
				require.True(t, r.NextAttemptAt.After(b.clock.Now()))
				next := receive(t, b.scheduled)
				require.True(t, r.NextAttemptAt.Equal(next.at), "the retry is armed")
			} else {
				require.Nil(t, r.NextAttemptAt)
				require.Empty(t, b.scheduled)
			}
		})
	}
}

// TestSenderFence: a claim the fence refuses at the moment of sending is
// given back unsent, due as it was, with no attempt recorded; once the
// fence lets claims through again they are sent.
func TestSenderFence(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	b.fenced.Store(true)
	c := b.claim()
	b.claimed <- c
	back := receive(t, b.deferred)
	require.Equal(t, c.ID, back.id)
	require.True(t, back.at.IsZero(), "given back due as it was")
	require.Empty(t, b.requests, "nothing sent")
	require.Empty(t, b.records, "no attempt recorded")

	b.fenced.Store(false)
	next := b.claim()
	b.claimed <- next
	require.Equal(t, next.ID.String(), receive(t, b.requests).header.Get("Webhook-Id"))
	require.Equal(t, next.ID, receive(t, b.records).TaskID)
	require.Empty(t, b.deferred)
}

// TestSenderFenceRecheckedWhenReady: the fence is checked again once the
// request is built and signed, so a node that froze in between (here: the
// fence lets the claim through at first and refuses it at the second
// check) gives the claim back unsent, with no attempt recorded.
func TestSenderFenceRecheckedWhenReady(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	b.fencedFromCheck.Store(2)
	c := b.claim()
	b.claimed <- c
	back := receive(t, b.deferred)
	require.Equal(t, c.ID, back.id)
	require.True(t, back.at.IsZero(), "given back due as it was")
	require.EqualValues(t, 2, b.fenceChecks.Load(), "passed once, refused once")
	require.Empty(t, b.requests, "nothing sent")
	require.Empty(t, b.records, "no attempt recorded")
}

// TestSenderHeldTenant: a claim of a tenant suspended or deleted since it
// was claimed is given back unsent, due as it was, and no attempt is
// recorded.
func TestSenderHeldTenant(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	b.held.Store(true)
	c := b.claim()
	b.claimed <- c
	back := receive(t, b.deferred)
	require.Equal(t, c.ID, back.id)
	require.True(t, back.at.IsZero(), "given back due as it was")
	require.Empty(t, b.requests, "nothing sent")
	require.Empty(t, b.records, "no attempt recorded")

	b.held.Store(false)
	next := b.claim()
	b.claimed <- next
	require.Equal(t, next.ID, receive(t, b.records).TaskID)
}

// TestSenderMaxTimeout: a task's timeout is capped by the node's MaxTimeout
// and by its tenant's max_timeout, whichever is lower.
func TestSenderMaxTimeout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                   string
		nodeMax, tenants, dflt time.Duration
		want                   string
	}{
		{"the node's", 100 * time.Millisecond, 0, 0, "100ms"},
		{"the tenant's, lower", time.Hour, 150 * time.Millisecond, 0, "150ms"},
		{"the node's, lower than the tenant's", 100 * time.Millisecond, time.Minute, 0, "100ms"},
		{"the node's default for a tenant without its own", time.Hour, 0, 120 * time.Millisecond, "120ms"},
		{"the tenant's over the default", time.Hour, 150 * time.Millisecond, 120 * time.Millisecond, "150ms"},
		{"the tenant's lifting the default", 100 * time.Millisecond, model.Unlimited, 50 * time.Millisecond, "100ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{hold: true, maxTimeout: tc.nodeMax, defaultMaxTimeout: tc.dflt})
			t.Cleanup(func() { close(b.hold) })
			c := b.claim()
			c.Timeout = 2 * time.Hour
			c.TenantMaxTimeout = tc.tenants
			b.claimed <- c
			r := receive(t, b.records)
			require.Equal(t, model.StatusRetrying, r.Status)
			require.NotNil(t, r.Error)
			require.Equal(t, "no response within the "+tc.want+" timeout", *r.Error)
		})
	}
}

// TestSenderEmptyBody: a task without a body goes out with Content-Length: 0,
// not chunked.
func TestSenderEmptyBody(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	c := b.claim()
	c.Body = []byte{}
	b.claimed <- c
	req := receive(t, b.requests)
	require.Empty(t, req.body)
	require.Equal(t, int64(0), req.contentLength)
	require.Empty(t, req.transferEncoding)
	require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
}
