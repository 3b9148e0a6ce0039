package dispatcher

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
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
	header           http.Header
	body             string
	contentLength    int64
	transferEncoding []string
}

type senderBundle struct {
	// tenant is the tenant of every claim: a target's breaker and slots
	// are its tenant's.
	tenant   uuid.UUID
	clock    *clock.Fake
	metrics  *metrics
	targets  *targets
	shares   *shares
	receiver *httptest.Server
	// status is what the receiver answers; hold, when set, makes it wait
	// until closed.
	status atomic.Int32
	hold   chan struct{}
	// header, when set, is added to the receiver's answers.
	header atomic.Pointer[http.Header]
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
	// fenced makes the fence refuse every claim (fence.go).
	fenced atomic.Bool
	// cancelSends interrupts the sends in flight, as the shutdown bound does.
	cancelSends context.CancelFunc
	transports  *transports
	// stats counts the attempts; nothing writes them.
	stats *statsRecorder
}

type senderOptions struct {
	senders      int
	perTenant    int
	maxWaiting   int
	maxPerTarget int
	maxTimeout   time.Duration
	// defaultMaxTimeout is the node's max_timeout for tenants without one.
	defaultMaxTimeout time.Duration
	breaker           BreakerConfig
	// guard defaults to one that lets the test receiver on loopback through.
	guard *netguard.Guard
	hold  bool
	// secrets defaults to one that knows the tenants' signing secrets to be
	// testSigningSecrets.
	secrets secretStore
	// keyring defaults to the empty keyring (plaintext secrets).
	keyring *keyring.Keyring
}

// testBodies is a bodyStore that holds no long body.
type testBodies struct{}

func (testBodies) ClaimedBody(context.Context, uuid.UUID, uuid.UUID) ([]byte, error) {
	return nil, model.ErrNotFound
}

// testSecrets is a secretStore that holds one list of signing secrets for
// every tenant.
type testSecrets struct {
	mu      sync.Mutex
	secrets []model.SigningSecret
	reads   int
}

func (b *testSecrets) SigningSecrets(context.Context, uuid.UUID) ([]model.SigningSecret, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	return b.secrets, nil
}

// setupSender runs senders that send to a real HTTP receiver, recording
// every attempt at once as written.
func setupSender(t testing.TB, opts senderOptions) *senderBundle {
	t.Helper()
	b := &senderBundle{
		tenant: uuid.New(), clock: clock.NewFake(time.Now()), metrics: testMetrics(t),
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
		b.requests <- received{header: r.Header.Clone(), body: string(body), contentLength: r.ContentLength, transferEncoding: r.TransferEncoding}
		if b.hold != nil {
			<-b.hold
		}
		if h := b.header.Load(); h != nil {
			for name, values := range *h {
				w.Header()[name] = values
			}
		}
		w.WriteHeader(int(b.status.Load()))
		_, _ = io.WriteString(w, "thanks")
	}))
	t.Cleanup(b.receiver.Close)
	guard := opts.guard
	if guard == nil {
		guard = netguard.New(netguard.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	}
	b.targets = newTargets(targetsConfig{Breaker: opts.breaker, MaxInflight: max(opts.maxPerTarget, 1), MaxWaiting: 100, Clock: b.clock})
	perTenant := opts.perTenant
	if perTenant == 0 {
		perTenant = max(opts.senders, 1)
	}
	maxWaiting := opts.maxWaiting
	if maxWaiting == 0 {
		maxWaiting = 100
	}
	b.shares = newShares(sharesConfig{
		MaxTotal: max(opts.senders, 1), MaxPerTenant: perTenant,
		MaxBytes: 1 << 30, MaxBytesPerTenant: 1 << 30, MaxWaitingPerTenant: maxWaiting,
	})
	maxTimeout := opts.maxTimeout
	if maxTimeout == 0 {
		maxTimeout = time.Hour
	}
	sends, cancelSends := context.WithCancel(context.Background())
	b.cancelSends = cancelSends
	t.Cleanup(cancelSends)
	b.transports = newTransports(newHTTPClient(guard, maxTimeout), guard, b.metrics.transportRetries, maxTimeout)
	secrets := opts.secrets
	if secrets == nil {
		secrets = &testSecrets{secrets: testSigningSecrets()}
	}
	keys := opts.keyring
	if keys == nil {
		keys = &keyring.Keyring{}
	}
	b.stats = newStatsRecorder(statsConfig{Clock: b.clock, Logger: quietLogger(), Metrics: b.metrics})
	s := newSender(senderConfig{
		Claimed: b.claimed, Sends: sends, Shares: b.shares, Targets: b.targets, Limits: openLimits{},
		Transports: b.transports, Bodies: testBodies{}, Secrets: secrets, Keyring: keys,
		Signer: signing.NewSigner(signing.SignerConfig{}),
		Record: func(r store.AttemptResult, then func(error)) {
			b.records <- r
			then(nil)
		},
		Stats: b.stats.add,
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
		Fence:           func(*model.ClaimedTask, time.Time) bool { return !b.fenced.Load() },
		MaxResponseBody: 4 << 10, Rand: func() float64 { return 0.5 }, MaxTimeout: maxTimeout,
		DefaultMaxTimeout: opts.defaultMaxTimeout,
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Run() }()
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
		Task: model.Task{ID: uuid.New(), TenantID: b.tenant, URL: b.receiver.URL + "/hook", Method: "POST",
			Body: []byte(`{"order":42}`), RunAt: now, NextAttemptAt: &now, Timeout: 5 * time.Second,
			MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute},
		Attempt: 1, ClaimToken: uuid.New(), ClaimedAt: now, SigningSecrets: testSigningSecrets(),
	}
}

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

// TestSenderTenantShare: a tenant whose receiver never answers holds its
// own share of the senders and no more; another tenant's webhook goes out
// at once meanwhile, and the waiting claims go as the share frees.
func TestSenderTenantShare(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{senders: 4, perTenant: 2, maxPerTarget: 10, hold: true})
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(fast.Close)

	noisy := uuid.New()
	var noisyClaims []*model.ClaimedTask
	for range 5 {
		c := b.claim()
		c.TenantID = noisy
		noisyClaims = append(noisyClaims, c)
		b.claimed <- c
	}
	receive(t, b.requests)
	receive(t, b.requests)
	require.Eventually(t, func() bool {
		tenants, sending, _ := b.shares.statuses()
		return len(tenants) == 1 && tenants[0].Sending == 2 && tenants[0].Waiting == 3 && sending == 2
	}, 10*time.Second, time.Millisecond)

	quiet := b.claim()
	quiet.URL = fast.URL + "/hook"
	b.claimed <- quiet
	r := receive(t, b.records)
	require.Equal(t, quiet.ID, r.TaskID, "the quiet tenant's webhook is not held up")
	require.Equal(t, model.StatusDelivered, r.Status)
	require.Equal(t, int32(2), b.maxInflight.Load(), "the noisy tenant never had more than its share")

	close(b.hold)
	var delivered []uuid.UUID
	for range noisyClaims {
		delivered = append(delivered, receive(t, b.records).TaskID)
	}
	var want []uuid.UUID
	for _, c := range noisyClaims {
		want = append(want, c.ID)
	}
	require.ElementsMatch(t, want, delivered)
	require.Equal(t, int32(2), b.maxInflight.Load())
}

// TestSenderTenantShareFull: past the claims a tenant may have waiting for
// its share, the surplus is given back until the share is likely free.
func TestSenderTenantShareFull(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{senders: 4, perTenant: 1, maxWaiting: 1, hold: true})
	t.Cleanup(func() { close(b.hold) })
	tenant := uuid.New()
	claims := []*model.ClaimedTask{b.claim(), b.claim(), b.claim()}
	for _, c := range claims {
		c.TenantID = tenant
		b.claimed <- c
	}
	receive(t, b.requests)
	back := receive(t, b.deferred)
	require.Equal(t, claims[2].ID, back.id)
	require.False(t, back.at.Before(b.clock.Now().Add(time.Second)), "not before its share is likely free")
	require.Equal(t, 1.0, counterValue(t, b.metrics.deferrals.WithLabelValues("tenant_busy")))
	tenants, _, _ := b.shares.statuses()
	require.Equal(t, []ShareStatus{{TenantID: tenant, Sending: 1, Bytes: int64(len(claims[0].Body)), Waiting: 1}}, tenants)
}

// TestSenderStuckSendsTripBreaker: sends that wait StuckAfter for an answer
// count as failures of their target then, not when their timeout ends, and
// trip its breaker; the answers that come later are not counted again.
func TestSenderStuckSendsTripBreaker(t *testing.T) {
	t.Parallel()
	for _, trip := range []uint32{2, 3} {
		t.Run(fmt.Sprintf("trip after %d", trip), func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{senders: 4, maxPerTarget: 4, hold: true,
				breaker: BreakerConfig{ConsecutiveFailures: trip, StuckAfter: 5 * time.Second, Cooldown: time.Minute}})
			b.claimed <- b.claim()
			b.claimed <- b.claim()
			receive(t, b.requests)
			receive(t, b.requests)

			b.clock.Advance(4 * time.Second)
			b.targets.watch()
			status := b.targets.statuses()[0]
			require.Equal(t, "closed", status.State, "not stuck yet")
			require.Zero(t, status.Counts.TotalFailures)
			b.clock.Advance(time.Second)
			b.targets.watch()
			status = b.targets.statuses()[0]
			require.Equal(t, 2, status.InFlight)
			if trip == 2 {
				require.Equal(t, "open", status.State)
				c := b.claim()
				b.claimed <- c
				require.Equal(t, c.ID, receive(t, b.deferred).id, "deferred to the next probe")
			} else {
				require.Equal(t, "closed", status.State)
				require.Equal(t, uint32(2), status.Counts.ConsecutiveFailures)
			}

			close(b.hold)
			require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
			require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
			require.Eventually(t, func() bool { return b.targets.statuses()[0].InFlight == 0 }, 10*time.Second, time.Millisecond)
			status = b.targets.statuses()[0]
			if trip == 2 {
				require.Equal(t, "open", status.State)
			} else {
				require.Equal(t, uint32(2), status.Counts.TotalFailures, "the late answers are not counted again")
				require.Zero(t, status.Counts.TotalSuccesses)
			}
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

// TestTargetsForgetIdle: a target unused for IdleAfter is forgotten, unless
// it has sends in flight or its breaker is open; an open one is forgotten
// after ForgetOpenAfter.
func TestTargetsForgetIdle(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	ts := newTargets(targetsConfig{
		Breaker:     BreakerConfig{ConsecutiveFailures: 1, IdleAfter: time.Minute, ForgetOpenAfter: time.Hour, Cooldown: 2 * time.Hour},
		MaxInflight: 1, MaxWaiting: 1, Clock: clk,
	})
	tenant := uuid.New()
	idle, open, busy := ts.get("http://idle:80", tenant), ts.get("http://open:80", tenant), ts.get("http://busy:80", tenant)
	require.NotNil(t, idle)
	report, err := open.breaker.Allow()
	require.NoError(t, err)
	report(errTargetFailed)
	decision, _ := ts.admit(busy, &model.ClaimedTask{}, true)
	require.Equal(t, sendNow, decision)

	remaining := func() []string {
		var left []string
		for _, s := range ts.statuses() {
			left = append(left, s.Target)
		}
		return left
	}
	clk.Advance(time.Minute)
	ts.watch()
	require.Equal(t, []string{"http://busy:80", "http://open:80"}, remaining())

	clk.Advance(time.Hour - time.Minute - time.Second)
	ts.watch()
	require.Equal(t, []string{"http://busy:80", "http://open:80"}, remaining(), "an open breaker outlives IdleAfter")
	clk.Advance(time.Second)
	ts.watch()
	require.Equal(t, []string{"http://busy:80"}, remaining(), "but not ForgetOpenAfter")
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

// TestSenderTenantGrants: a private range granted to one tenant lets its
// webhooks through and no one else's, even to the same host right after,
// when a connection to it sits in a pool.
func TestSenderTenantGrants(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{guard: netguard.New(netguard.Config{})})

	granted := b.claim()
	granted.TargetAllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	b.claimed <- granted
	receive(t, b.requests)
	require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)

	other := b.claim()
	b.claimed <- other
	r := receive(t, b.records)
	require.Equal(t, model.StatusDead, r.Status, "a blocked address is final")
	require.NotNil(t, r.Error)
	require.Contains(t, *r.Error, "blocked")
	select {
	case req := <-b.requests:
		t.Fatalf("the receiver got a request of the tenant without the grant: %v", req.header)
	default:
	}

	// The same grants, spelled otherwise, share a client.
	require.Same(t, b.transports.forClaim(granted), b.transports.forClaim(&model.ClaimedTask{
		TargetAllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.1.2.3/8"), netip.MustParsePrefix("127.0.0.0/8")}}))
	require.NotSame(t, b.transports.forClaim(granted), b.transports.forClaim(other))
}

// TestSenderSecretUnreadable: a claim whose signing secret this node's
// keyring cannot open is given back without an attempt, a request or a
// failure of its target.
func TestSenderSecretUnreadable(t *testing.T) {
	t.Parallel()
	sealer, err := keyring.Parse("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	require.NoError(t, err)
	other, err := keyring.Parse("k2:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 32))))
	require.NoError(t, err)
	b := setupSender(t, senderOptions{keyring: other, breaker: BreakerConfig{ConsecutiveFailures: 1}})

	c := b.claim()
	secret := testSigningSecrets()[0]
	secret.Value, err = sealer.Seal(secret.Value, secret.SealContext(c.TenantID))
	require.NoError(t, err)
	c.SigningSecrets = []model.SigningSecret{secret}
	b.claimed <- c
	d := receive(t, b.deferred)
	require.Equal(t, c.ID, d.id)
	require.Equal(t, b.clock.Now().Add(secretUnreadableRetry), d.at)
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.deferrals.WithLabelValues("secret_unreadable")))

	// Nothing was sent or recorded, and the target's breaker is still
	// closed: the next claim to it goes out.
	ok := b.claim()
	b.claimed <- ok
	receive(t, b.requests)
	require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
	require.Empty(t, b.records)
}

// TestSenderRereadsSecretsOfOldClaims: a claim that waited longer than
// secretsFreshFor is signed with its tenant's secrets as they are now, so a
// rotation meanwhile reaches it.
func TestSenderRereadsSecretsOfOldClaims(t *testing.T) {
	t.Parallel()
	rotated := append([]model.SigningSecret{{ID: "ss_new", Value: "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("n", 32)))}},
		testSigningSecrets()...)
	secrets := &testSecrets{secrets: rotated}
	b := setupSender(t, senderOptions{secrets: secrets})

	fresh := b.claim()
	b.claimed <- fresh
	req := receive(t, b.requests)
	receive(t, b.records)
	require.Len(t, strings.Fields(req.header.Get("webhook-signature")), 1, "a fresh claim signs with the secrets it was taken with")

	old := b.claim()
	b.clock.Advance(secretsFreshFor + time.Millisecond)
	b.claimed <- old
	req = receive(t, b.requests)
	receive(t, b.records)
	require.Len(t, strings.Fields(req.header.Get("webhook-signature")), 2, "an old claim signs with the rotated secrets, both")
	token, _, err := jwt.NewParser().ParseUnverified(req.header.Get("Hookwheel-Signature"), jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, "ss_new", token.Header["kid"])
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	require.Equal(t, 1, secrets.reads)
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
