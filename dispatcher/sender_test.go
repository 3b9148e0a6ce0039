package dispatcher

import (
	"context"
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
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/store/storetest"
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
	records   chan model.AttemptResult
	settled   chan uuid.UUID
	scheduled chan dueAt
	deferred  chan dueAt
	stopping  atomic.Bool
	// fenced makes the fence refuse every claim (fence.go).
	fenced atomic.Bool
	// fencedFromCheck, when set, makes the fence refuse claims from its
	// nth check on, counted in fenceChecks.
	fencedFromCheck, fenceChecks atomic.Int32
	// held holds every tenant's tasks (held.go).
	held atomic.Bool
	// cancelSends interrupts the sends in flight, as the shutdown bound does.
	cancelSends context.CancelFunc
	transports  *transports
	// stats counts the attempts as the sender reports them.
	stats *countedStats
}

// countedStats counts what the sender reports of each attempt, per tenant
// and minute, as the statistics recorder would before writing it.
type countedStats struct {
	mu     sync.Mutex
	counts map[countedStatsKey]*model.MinuteStats
}

type countedStatsKey struct {
	tenant uuid.UUID
	minute int64 // since the Unix epoch
}

func (s *countedStats) add(tenant uuid.UUID, started time.Time, status model.TaskStatus, lateness time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := countedStatsKey{tenant: tenant, minute: started.Unix() / 60}
	if s.counts[key] == nil {
		s.counts[key] = &model.MinuteStats{}
	}
	s.counts[key].Add(status, lateness)
}

// pendingFor is what was counted of tenant's minute at at.
func (s *countedStats) pendingFor(tenant uuid.UUID, at time.Time) model.MinuteStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.counts[countedStatsKey{tenant: tenant, minute: at.Unix() / 60}]; m != nil {
		return *m
	}
	return model.MinuteStats{}
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
	// journal, when set, keeps the deliveries' answers (journal.go).
	journal answerStore
	// limits defaults to openLimits.
	limits limitsGate
	// tracer makes the sends' spans; nil makes none (tracing_test.go).
	tracer trace.TracerProvider
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
		records: make(chan model.AttemptResult, 16), settled: make(chan uuid.UUID, 16),
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
		secrets = &testSecrets{secrets: storetest.SigningSecrets()}
	}
	keys := opts.keyring
	if keys == nil {
		keys = &keyring.Keyring{}
	}
	b.stats = &countedStats{counts: make(map[countedStatsKey]*model.MinuteStats)}
	var journal *answerJournal
	if opts.journal != nil {
		journal = newAnswerJournal(answerJournalConfig{Store: opts.journal,
			TTL: time.Minute, Logger: quietLogger(), Metrics: b.metrics})
	}
	limits := opts.limits
	if limits == nil {
		limits = openLimits{}
	}
	s := newSender(senderConfig{
		Claimed: b.claimed, Sends: sends, Shares: b.shares, Targets: b.targets, Limits: limits,
		Transports: b.transports, Bodies: testBodies{}, Secrets: secrets, Keyring: keys,
		Signer: signing.NewSigner(signing.SignerConfig{}), Journal: journal,
		Record: func(r model.AttemptResult, then func(error)) {
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
		Fence: func(*model.ClaimedTask, time.Time) bool {
			n, from := b.fenceChecks.Add(1), b.fencedFromCheck.Load()
			return !b.fenced.Load() && (from == 0 || n < from)
		},
		Held:            func(uuid.UUID) bool { return b.held.Load() },
		MaxResponseBody: 4 << 10, Rand: func() float64 { return 0.5 }, MaxTimeout: maxTimeout,
		DefaultMaxTimeout: opts.defaultMaxTimeout, Spans: newSpans(opts.tracer),
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Run() }()
	// The journal runs as in a node: started before the senders, stopped
	// after them.
	journalDone := make(chan struct{})
	go func() { defer close(journalDone); journal.Run(context.Background()) }()
	t.Cleanup(func() {
		close(b.claimed)
		wg.Wait()
		journal.close()
		<-journalDone
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
		Attempt: 1, ClaimToken: uuid.New(), ClaimedAt: now, SigningSecrets: storetest.SigningSecrets(),
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
