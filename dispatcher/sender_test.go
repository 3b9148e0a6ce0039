package dispatcher

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/store"
)

// openLimits lets every send through, as a tenant without dispatch limits.
type openLimits struct{}

func (openLimits) admit(*model.ClaimedTask) (func(), bool) { return func() {}, true }

// received is one request the receiver got.
type received struct {
	header http.Header
	body   string
}

type senderBundle struct {
	clock    *clock.Fake
	metrics  *metrics
	targets  *targets
	receiver *httptest.Server
	// status is what the receiver answers; hold, when set, makes it wait
	// until closed.
	status atomic.Int32
	hold   chan struct{}
	// requests receives what the receiver got; inflight counts the requests
	// it is answering, maxInflight the most at once.
	requests              chan received
	inflight, maxInflight atomic.Int32

	claimed   chan *model.ClaimedTask
	records   chan store.AttemptResult
	settled   chan uuid.UUID
	scheduled chan dueAt
	deferred  chan dueAt
	stopping  atomic.Bool
}

type senderOptions struct {
	senders      int
	maxPerTarget int
	breaker      BreakerConfig
	// guard defaults to one that lets the test receiver on loopback through.
	guard *netguard.Guard
	hold  bool
}

// setupSender runs senders that send to a real HTTP receiver, recording
// every attempt at once as written.
func setupSender(t *testing.T, opts senderOptions) *senderBundle {
	t.Helper()
	b := &senderBundle{
		clock: clock.NewFake(time.Now()), metrics: testMetrics(t),
		requests: make(chan received, 16), claimed: make(chan *model.ClaimedTask, 16),
		records: make(chan store.AttemptResult, 16), settled: make(chan uuid.UUID, 16),
		scheduled: make(chan dueAt, 16), deferred: make(chan dueAt, 16),
	}
	b.status.Store(http.StatusOK)
	if opts.hold {
		b.hold = make(chan struct{})
	}
	b.receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.inflight.Add(1)
		defer b.inflight.Add(-1)
		for {
			m := b.maxInflight.Load()
			if n <= m || b.maxInflight.CompareAndSwap(m, n) {
				break
			}
		}
		body, _ := io.ReadAll(r.Body)
		b.requests <- received{header: r.Header.Clone(), body: string(body)}
		if b.hold != nil {
			<-b.hold
		}
		w.WriteHeader(int(b.status.Load()))
		_, _ = io.WriteString(w, "thanks")
	}))
	t.Cleanup(b.receiver.Close)
	guard := opts.guard
	if guard == nil {
		guard = netguard.New(netguard.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	}
	b.targets = newTargets(opts.breaker, max(opts.maxPerTarget, 1), 100, nil)
	s := newSender(senderConfig{
		Claimed: b.claimed, Targets: b.targets, Limits: openLimits{},
		Transport: newTransport(newHTTPClient(guard), b.metrics.transportRetries),
		Signer:    signing.NewSigner(signing.SignerConfig{}),
		Record: func(r store.AttemptResult, then func(error)) {
			b.records <- r
			then(nil)
		},
		Defer: func(claims []*model.ClaimedTask, until func(int) time.Time) {
			for i, c := range claims {
				b.deferred <- dueAt{c.ID, until(i)}
			}
		},
		Settle:   func(id uuid.UUID) { b.settled <- id },
		Clock:    b.clock,
		Logger:   quietLogger(),
		Metrics:  b.metrics,
		Schedule: func(id uuid.UUID, at time.Time) { b.scheduled <- dueAt{id, at} },
		Stopping: b.stopping.Load, LeaseMargin: 30 * time.Second, UserAgent: "hookwheel-test",
		MaxResponseBody: 4 << 10, Rand: func() float64 { return 0.5 },
	})
	var wg sync.WaitGroup
	for range max(opts.senders, 1) {
		wg.Add(1)
		go func() { defer wg.Done(); s.Run() }()
	}
	t.Cleanup(func() {
		close(b.claimed)
		wg.Wait()
	})
	return b
}

// claim is a claimed first attempt to the receiver, due now.
func (b *senderBundle) claim() *model.ClaimedTask {
	now := b.clock.Now()
	return &model.ClaimedTask{
		Task: model.Task{ID: uuid.New(), TenantID: uuid.New(), URL: b.receiver.URL + "/hook", Method: "POST",
			Body: []byte(`{"order":42}`), RunAt: now, NextAttemptAt: &now, Timeout: 5 * time.Second,
			MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute},
		Attempt: 1, ClaimToken: uuid.New(), ClaimedAt: now, SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	}
}

// TestSenderDelivers sends one attempt per receiver answer and checks the
// request the receiver got and the outcome handed to the recorder.
func TestSenderDelivers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		want   model.TaskStatus
	}{
		{name: "success", status: http.StatusOK, want: model.StatusDelivered},
		{name: "retryable", status: http.StatusServiceUnavailable, want: model.StatusRetrying},
		{name: "refused", status: http.StatusBadRequest, want: model.StatusDead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{})
			b.status.Store(int32(tc.status))
			c := b.claim()
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
			require.Equal(t, tc.status, *r.StatusCode)
			require.Equal(t, "thanks", *r.ResponseBody)
			require.Equal(t, c.ID, receive(t, b.settled))
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

// TestSenderBlockedTarget: a target the guard refuses fails for good, with
// nothing sent.
func TestSenderBlockedTarget(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{guard: netguard.New(netguard.Config{})})
	b.claimed <- b.claim()
	r := receive(t, b.records)
	require.Equal(t, model.StatusDead, r.Status)
	require.NotNil(t, r.Error)
	require.Empty(t, b.requests)
}

// TestSenderBreaker: once a target's breaker opens, its tasks are deferred
// to the breaker's next probe instead of sent.
func TestSenderBreaker(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{breaker: BreakerConfig{ConsecutiveFailures: 1, Cooldown: time.Minute}})
	b.status.Store(http.StatusInternalServerError)
	b.claimed <- b.claim()
	receive(t, b.requests)
	require.Equal(t, model.StatusRetrying, receive(t, b.records).Status)

	c := b.claim()
	b.claimed <- c
	back := receive(t, b.deferred)
	require.Equal(t, c.ID, back.id)
	require.WithinDuration(t, time.Now().Add(time.Minute), back.at, 5*time.Second, "at the next probe")
	require.Equal(t, 1.0, counterValue(t, b.metrics.deferrals.WithLabelValues("breaker")))
	require.Empty(t, b.requests)
}

// TestSenderSlotsPerTarget: with a target's send slots taken, its next task
// parks with the target instead of holding a second sender, and goes when
// the slot frees; when the dispatcher is stopping, it is given back instead.
func TestSenderSlotsPerTarget(t *testing.T) {
	t.Parallel()
	for _, stopping := range []bool{false, true} {
		t.Run("stopping="+strconv.FormatBool(stopping), func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{senders: 2, maxPerTarget: 1, hold: true})
			first, second := b.claim(), b.claim()
			b.claimed <- first
			receive(t, b.requests)
			b.claimed <- second
			require.Eventually(t, func() bool {
				s := b.targets.statuses()
				return len(s) == 1 && s[0].Parked == 1 && s[0].InFlight == 1
			}, 10*time.Second, time.Millisecond)

			b.stopping.Store(stopping)
			close(b.hold)
			require.Equal(t, first.ID, receive(t, b.records).TaskID)
			if stopping {
				back := receive(t, b.deferred)
				require.Equal(t, second.ID, back.id)
				require.True(t, back.at.IsZero())
				require.Empty(t, b.requests)
			} else {
				receive(t, b.requests)
				require.Equal(t, second.ID, receive(t, b.records).TaskID)
			}
			require.Equal(t, int32(1), b.maxInflight.Load())
		})
	}
}
