package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestSenderBlockedTarget: a target the guard refuses fails for good, with
// nothing sent.
func TestSenderBlockedTarget(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{guard: netguard.New(netguard.Config{})})
	b.claimed <- b.claim()
	r := receive(t, b.records)
	require.Equal(t, model.StatusDead, r.Status)
	require.NotNil(t, r.Error)
	require.Nil(t, r.StatusCode)
	require.Nil(t, r.ResponseHeaders, "no response, no headers")
	require.Empty(t, b.requests)
}

// TestSenderResponseHeaders: an attempt keeps the receiver's response
// headers, bounded and without credentials, and a non-2xx answer carrying
// Hookwheel-Retry: stop kills the task at its first attempt, where the
// status alone would be retried.
func TestSenderResponseHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  int
		stop    bool
		want    model.TaskStatus
		outcome string
		err     string
	}{
		{name: "503 retried", status: http.StatusServiceUnavailable, want: model.StatusRetrying, outcome: "retry",
			err: "receiver answered 503 Service Unavailable"},
		{name: "503 with stop is dead", status: http.StatusServiceUnavailable, stop: true, want: model.StatusDead, outcome: "fail",
			err: "receiver answered 503 Service Unavailable with Hookwheel-Retry: stop; not retried"},
		{name: "429 with stop is dead", status: http.StatusTooManyRequests, stop: true, want: model.StatusDead, outcome: "fail",
			err: "receiver answered 429 Too Many Requests with Hookwheel-Retry: stop; not retried"},
		{name: "200 with stop is delivered", status: http.StatusOK, stop: true, want: model.StatusDelivered, outcome: "success"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One consecutive failure opens the breaker: a stop is the
			// receiver's word on the webhook, not a failing target.
			b := setupSender(t, senderOptions{breaker: BreakerConfig{ConsecutiveFailures: 1, Cooldown: time.Minute}})
			b.status.Store(int32(tc.status))
			header := http.Header{
				"Content-Type":     {"text/plain; charset=utf-8"},
				"X-Request-Id":     {"req-42"},
				"Vary":             {"Accept", "Origin"},
				"Set-Cookie":       {"session=secret"},
				"X-Auth-Token":     {"token"},
				"X-Large":          {strings.Repeat("l", 10_000)},
				"Www-Authenticate": {`Bearer realm="hooks"`},
			}
			if tc.stop {
				header.Set("Hookwheel-Retry", "Stop")
			}
			b.header.Store(&header)
			c := b.claim()
			b.claimed <- c
			receive(t, b.requests)

			r := receive(t, b.records)
			require.Equal(t, tc.want, r.Status)
			require.Equal(t, tc.outcome, r.Outcome)
			require.Equal(t, tc.status, *r.StatusCode)
			if tc.err == "" {
				require.Nil(t, r.Error)
			} else {
				require.Equal(t, tc.err, *r.Error)
			}
			require.NotNil(t, r.ResponseHeaders)
			var got map[string]string
			require.NoError(t, json.Unmarshal([]byte(*r.ResponseHeaders), &got), *r.ResponseHeaders)
			require.Equal(t, "req-42", got["X-Request-Id"])
			require.Equal(t, "Accept, Origin", got["Vary"])
			require.Equal(t, "text/plain; charset=utf-8", got["Content-Type"])
			require.Equal(t, `Bearer realm="hooks"`, got["Www-Authenticate"])
			require.NotEmpty(t, got["Date"], "the headers as the receiver's server sent them")
			require.NotContains(t, got, "Set-Cookie")
			require.NotContains(t, got, "X-Auth-Token")
			require.Len(t, got["X-Large"], store.MaxResponseHeaderValue)
			if tc.stop {
				require.Equal(t, "Stop", got["Hookwheel-Retry"], "the attempt shows why it was not retried")
			} else {
				require.NotContains(t, got, "Hookwheel-Retry")
			}
			require.Equal(t, c.ID, receive(t, b.settled))
			if tc.want == model.StatusRetrying {
				require.NotNil(t, r.NextAttemptAt)
				receive(t, b.scheduled)
				return
			}
			require.Nil(t, r.NextAttemptAt)
			require.Empty(t, b.scheduled)

			// The breaker would have opened at one failure and deferred the
			// next claim: it is sent, so the target was not counted failing.
			// (One share: the next claim starts once this send has ended.)
			b.claimed <- b.claim()
			receive(t, b.requests)
			require.Empty(t, b.deferred)
		})
	}
}

// TestSenderInterrupted: a send cut off by the shutdown bound is recorded as
// interrupted and due again at once, even after the task's last attempt,
// and says nothing against the target.
func TestSenderInterrupted(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{hold: true})
	t.Cleanup(func() { close(b.hold) })
	c := b.claim()
	c.Attempt = c.MaxAttempts
	b.claimed <- c
	receive(t, b.requests)
	b.cancelSends()

	r := receive(t, b.records)
	require.Equal(t, c.ID, r.TaskID)
	require.Equal(t, model.StatusRetrying, r.Status)
	require.Equal(t, "retry", r.Outcome)
	require.NotNil(t, r.NextAttemptAt)
	require.True(t, r.NextAttemptAt.Equal(b.clock.Now()), "due again at once")
	require.NotNil(t, r.Error)
	require.Contains(t, *r.Error, "interrupted")
	require.EqualValues(t, 1, b.stats.pendingFor(c.TenantID, b.clock.Now()).Retried, "counted as retried, as recorded")
	status := b.targets.statuses()[0]
	require.Equal(t, uint32(0), status.Counts.TotalFailures)
}

// TestSenderErrorNamesNoResolvedAddress: an attempt's error names the host
// the tenant wrote, never the address it resolved to (the tenant could map
// the operator's internal DNS with it), whether the guard refused the
// address or the dial failed; an address written in the URL stays named.
// Before, they read "dial tcp 127.0.0.1:1: connect: connection refused" and
// "target address 127.0.0.1 is blocked (loopback 127.0.0.0/8)".
func TestSenderErrorNamesNoResolvedAddress(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		guard *netguard.Guard
		url   string
		want  string
		// named must appear in the error; secret must not. {port} is the
		// test receiver's port.
		named, secret []string
	}{
		{name: "refused by the guard", guard: netguard.New(netguard.Config{}), url: "http://localhost:{port}/hook",
			want: "target host resolves to a blocked address range (loopback)", named: []string{"localhost:{port}"}, secret: []string{"127.0.0.1", "127.0.0.0"}},
		{name: "connection refused", url: "http://localhost:1/hook",
			want: "connection refused", named: []string{"localhost:1"}, secret: []string{"127.0.0.1"}},
		{name: "an address the tenant wrote", url: "http://127.0.0.1:1/hook",
			want: "connection refused", named: []string{"127.0.0.1:1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{guard: tc.guard})
			port := b.receiver.URL[strings.LastIndex(b.receiver.URL, ":")+1:]
			c := b.claim()
			c.URL = strings.ReplaceAll(tc.url, "{port}", port)
			b.claimed <- c
			r := receive(t, b.records)
			require.NotNil(t, r.Error)
			t.Log(*r.Error)
			require.Contains(t, *r.Error, tc.want)
			for _, s := range tc.named {
				require.Contains(t, *r.Error, strings.ReplaceAll(s, "{port}", port))
			}
			for _, s := range tc.secret {
				require.NotContains(t, *r.Error, s)
			}
		})
	}
}

// TestSenderResponseHeadersBounded: an answer whose headers exceed 64 KiB
// is not read: the attempt fails and says why. Before, net/http read up to
// 10 MiB of them per answer, and the attempt was delivered.
func TestSenderResponseHeadersBounded(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{})
	h := http.Header{}
	for i := range 100 {
		h.Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("h", 1<<10))
	}
	b.header.Store(&h)
	b.claimed <- b.claim()
	r := receive(t, b.records)
	require.Equal(t, model.StatusRetrying, r.Status)
	require.Equal(t, "retry", r.Outcome)
	require.NotNil(t, r.Error)
	require.Equal(t, "the receiver's response headers exceed 64 KiB; the answer was not read", *r.Error)
	require.Nil(t, r.StatusCode)
}

// countingTransport counts the bytes read of the answers' bodies.
type countingTransport struct {
	inner http.RoundTripper
	read  *atomic.Int64
}

func (ct countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := ct.inner.RoundTrip(req)
	if err == nil {
		resp.Body = countingBody{ReadCloser: resp.Body, read: ct.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	read *atomic.Int64
}

func (cb countingBody) Read(p []byte) (int, error) {
	n, err := cb.ReadCloser.Read(p)
	cb.read.Add(int64(n))
	return n, err
}

// TestSenderReadsAnswerWithinBound: of a receiver's 8 MB answer, a send
// reads at most 64 KiB (and one byte, for a task with a callback, to tell
// a longer body), whether it keeps 4 KiB or the callback's 64 KiB. Before,
// it drained 64 KiB more past what it kept.
func TestSenderReadsAnswerWithinBound(t *testing.T) {
	t.Parallel()
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := []byte(strings.Repeat("b", 64<<10))
		for range 128 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(big.Close)
	for _, callback := range []bool{false, true} {
		t.Run(fmt.Sprintf("callback=%t", callback), func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{})
			var read atomic.Int64
			client := b.transports.base.HTTPClient
			client.Transport = countingTransport{inner: client.Transport, read: &read}
			c := b.claim()
			c.URL = big.URL + "/hook"
			if callback {
				c.Callback = ptr(big.URL + "/callback")
			}
			b.claimed <- c
			r := receive(t, b.records)
			require.Equal(t, model.StatusDelivered, r.Status)
			require.NotNil(t, r.ResponseBody)
			require.Len(t, *r.ResponseBody, 4<<10, "the attempt keeps MaxResponseBody")
			if callback {
				require.NotNil(t, r.Callback)
			}
			require.LessOrEqual(t, read.Load(), int64(ResponseBodyReadMax+1))
			t.Logf("read %d bytes of an 8 MiB answer", read.Load())
		})
	}
}

// TestSenderJournalsDeliveries: a delivery's answer is journaled under
// its claim's token, so that a node stopping before the attempt is
// recorded leaves it for the recovery to record; a failed attempt is not
// journaled (it is sent again, as a retry would be).
func TestSenderJournalsDeliveries(t *testing.T) {
	t.Parallel()
	redis := storetest.Redis(t)
	b := setupSender(t, senderOptions{senders: 1, journal: redis})
	answers := func(c *model.ClaimedTask) []model.AnsweredAttempt {
		t.Helper()
		got, err := redis.AnsweredAttempts(context.Background(),
			[]model.AttemptClaim{{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken}})
		require.NoError(t, err)
		return got
	}

	b.status.Store(http.StatusServiceUnavailable)
	failed := b.claim()
	b.claimed <- failed
	receive(t, b.requests)
	require.Equal(t, http.StatusServiceUnavailable, *receive(t, b.records).StatusCode)

	b.status.Store(http.StatusNoContent)
	delivered := b.claim()
	b.claimed <- delivered
	receive(t, b.requests)
	r := receive(t, b.records)
	require.Equal(t, http.StatusNoContent, *r.StatusCode)
	var got []model.AnsweredAttempt
	require.Eventually(t, func() bool { got = answers(delivered); return len(got) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, http.StatusNoContent, got[0].StatusCode)
	require.Equal(t, r.StartedAt.UnixMicro(), got[0].StartedAt.UnixMicro())
	// The journal writes its marks in order, and the delivery's came after
	// the failure's answer: had the failure been marked, it would be there.
	require.Empty(t, answers(failed))
}
