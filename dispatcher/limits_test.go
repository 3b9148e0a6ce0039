package dispatcher

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

type limitsBundle struct {
	clock   *clock.Fake
	metrics *metrics
	limits  *dispatchLimits
	tenant  uuid.UUID
	// deferred, held and sent receive what the limits hand on.
	deferred chan dueAt
	held     chan dueAt
	sent     chan *model.ClaimedTask
	stopping atomic.Bool
}

// setupLimits builds the dispatch limits of one tenant with the given
// limits, read from a fresh database, decided by limiter (real Redis when
// nil).
func setupLimits(t *testing.T, tenantLimits model.Limits, limiter dispatchLimiter) *limitsBundle {
	t.Helper()
	return setupLimitsDefaults(t, tenantLimits, model.Limits{}, limiter)
}

// setupLimitsDefaults is setupLimits on a node whose default limits are
// defaults.
func setupLimitsDefaults(t *testing.T, tenantLimits, defaults model.Limits, limiter dispatchLimiter) *limitsBundle {
	t.Helper()
	db := storetest.DB(t)
	if limiter == nil {
		limiter = storetest.Redis(t)
	}
	b := &limitsBundle{
		clock: clock.NewFake(time.Now()), metrics: testMetrics(t),
		deferred: make(chan dueAt, 16), held: make(chan dueAt, 16), sent: make(chan *model.ClaimedTask, 16),
	}
	b.tenant = storetest.CreateTenant(t, db, tenantLimits)
	b.limits = newDispatchLimits(limitsConfig{
		Limiter: limiter, Limits: db, Defaults: defaults, Down: failopen.New(failopen.Config{Clock: b.clock}),
		Clock: b.clock, Logger: quietLogger(), Metrics: b.metrics,
		Defer: func(claims []*model.ClaimedTask, until func(int) time.Time) {
			for i, c := range claims {
				b.deferred <- dueAt{c.ID, until(i)}
			}
		},
		HoldUntil: func(c *model.ClaimedTask, at time.Time) bool {
			if b.stopping.Load() {
				return false
			}
			b.held <- dueAt{c.ID, at}
			return true
		},
		Send:                b.sent,
		SendTime:            func(uuid.UUID, string) time.Duration { return 10 * time.Millisecond },
		LeaseMargin:         30 * time.Second,
		MaxWaitingPerTarget: 100,
	})
	return b
}

// claim is a claim of the bundle's tenant to host, due now.
func (b *limitsBundle) claim(host string) *model.ClaimedTask {
	now := b.clock.Now()
	return &model.ClaimedTask{
		Task: model.Task{ID: uuid.New(), TenantID: b.tenant, URL: "https://" + host + "/hook", RunAt: now,
			NextAttemptAt: &now, Timeout: 5 * time.Second},
		Attempt: 1, ClaimToken: uuid.New(), ClaimedAt: now,
	}
}

// runWaker runs the waker until the test ends or stop is called.
func (b *limitsBundle) runWaker(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.limits.run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// TestLimitsRateAtClaim: claims of a rate-limited tenant get slots one
// interval apart: the first goes now, one within holdWithin is held for its
// slot, one further off is given back due at its slot.
func TestLimitsRateAtClaim(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{DispatchRate: 1}, nil)
	now := b.clock.Now()
	claims := []*model.ClaimedTask{b.claim("a.example"), b.claim("a.example"), b.claim("a.example")}

	kept := b.limits.rateLimitClaims(claims)
	require.Len(t, kept, 2)
	var ats []time.Time
	for _, c := range kept {
		ats = append(ats, *c.NextAttemptAt)
	}
	require.ElementsMatch(t, []time.Time{now, now.Add(time.Second)}, ats)
	back := receive(t, b.deferred)
	require.True(t, now.Add(2*time.Second).Equal(back.at), "given back due at its slot: %s", back.at.Sub(now))
	require.Equal(t, 2.0, counterValue(t, b.metrics.deferrals.WithLabelValues("rate_limit")))

	// Each kept claim uses the slot it was given without asking again.
	for _, c := range kept {
		b.clock.Set(*c.NextAttemptAt)
		release, ok := b.limits.admit(c)
		require.True(t, ok)
		release()
	}
	require.Empty(t, b.deferred)
	require.Empty(t, b.held)
}

// TestLimitsRateAtSend: a claim without a slot of its own asks for one as it
// is about to be sent, and waits in memory for a near one.
func TestLimitsRateAtSend(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{DispatchRate: 1}, nil)
	now := b.clock.Now()
	first, second := b.claim("a.example"), b.claim("a.example")

	release, ok := b.limits.admit(first)
	require.True(t, ok)
	release()
	_, ok = b.limits.admit(second)
	require.False(t, ok)
	held := receive(t, b.held)
	require.Equal(t, second.ID, held.id)
	require.True(t, now.Add(time.Second).Equal(held.at))

	// Stopping: the same wait is given back instead.
	b.stopping.Store(true)
	third := b.claim("a.example")
	_, ok = b.limits.admit(third)
	require.False(t, ok)
	back := receive(t, b.deferred)
	require.Equal(t, third.ID, back.id)
	require.True(t, now.Add(2*time.Second).Equal(back.at))
}

// TestLimitsUnlimited: claims of a tenant without limits, or to a host its
// limits exempt, pass untouched.
func TestLimitsUnlimited(t *testing.T) {
	t.Parallel()
	zero := 0.0
	cases := []struct {
		name   string
		limits model.Limits
	}{
		{name: "no limits", limits: model.Limits{}},
		{name: "host exempt", limits: model.Limits{DispatchRate: 1, Targets: map[string]model.TargetLimits{"a.example": {DispatchRate: &zero}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			limiter := &failingLimiter{}
			b := setupLimits(t, tc.limits, limiter)
			claims := []*model.ClaimedTask{b.claim("a.example"), b.claim("a.example")}
			require.Equal(t, claims, b.limits.rateLimitClaims(claims))
			release, ok := b.limits.admit(claims[0])
			require.True(t, ok)
			release()
			require.Zero(t, limiter.calls.Load())
		})
	}
}

// failingLimiter fails every decision, counting the calls.
type failingLimiter struct{ calls atomic.Int32 }

func (f *failingLimiter) AdmitDispatches(context.Context, []model.DispatchRequest) ([]model.DispatchAdmission, error) {
	f.calls.Add(1)
	return nil, errors.New("connection refused")
}

func (f *failingLimiter) AdmitDispatch(context.Context, model.DispatchRequest) (model.DispatchAdmission, error) {
	f.calls.Add(1)
	return model.DispatchAdmission{}, errors.New("connection refused")
}

func (f *failingLimiter) ReleaseDispatch(context.Context, model.DispatchLimit, uuid.UUID, uuid.UUID) error {
	return errors.New("connection refused")
}

// TestLimitsFailOpen: with Redis failing, sends go ahead unchecked, counted,
// and the limiter is not asked again until the fail-open window has passed.
func TestLimitsFailOpen(t *testing.T) {
	t.Parallel()
	limiter := &failingLimiter{}
	b := setupLimits(t, model.Limits{DispatchRate: 1, DispatchConcurrency: 1}, limiter)
	claims := []*model.ClaimedTask{b.claim("a.example"), b.claim("a.example")}

	require.Equal(t, claims, b.limits.rateLimitClaims(claims))
	require.Equal(t, int32(1), limiter.calls.Load())
	require.Equal(t, 2.0, counterValue(t, b.metrics.limitUnchecked))

	_, ok := b.limits.admit(claims[0])
	require.True(t, ok)
	require.Equal(t, int32(1), limiter.calls.Load(), "skipped within the window")
	require.Equal(t, 3.0, counterValue(t, b.metrics.limitUnchecked))

	b.clock.Advance(failopen.DefaultSkip)
	_, ok = b.limits.admit(claims[1])
	require.True(t, ok)
	require.Equal(t, int32(2), limiter.calls.Load(), "asked again once it passed")
	require.Empty(t, b.deferred)
}

// TestLimitsConcurrency: with every slot of a host taken, a claim waits here
// and is handed back to the senders when a send to the host finishes; at
// shutdown the claims still waiting are given back.
func TestLimitsConcurrency(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{DispatchConcurrency: 1}, nil)
	stop := b.runWaker(t)
	first, second, third := b.claim("a.example"), b.claim("a.example"), b.claim("a.example")

	releaseFirst, ok := b.limits.admit(first)
	require.True(t, ok)
	for _, c := range []*model.ClaimedTask{second, third} {
		_, ok = b.limits.admit(c)
		require.False(t, ok)
	}
	require.Equal(t, 2.0, b.limits.waitingCount())
	require.Empty(t, b.sent)

	releaseFirst()
	require.Equal(t, second.ID, receive(t, b.sent).ID, "first in line first")
	releaseSecond, ok := b.limits.admit(second)
	require.True(t, ok, "the slot the first gave back")
	// A slot was free, so the next in line is let through to try too; it
	// finds none and waits at the front again.
	require.Equal(t, third.ID, receive(t, b.sent).ID)
	_, ok = b.limits.admit(third)
	require.False(t, ok)
	require.Equal(t, 1.0, b.limits.waitingCount())

	stop()
	back := receive(t, b.deferred)
	require.Equal(t, third.ID, back.id)
	require.True(t, back.at.IsZero(), "due as it was")
	require.Zero(t, b.limits.waitingCount())
	releaseSecond()

	// Once stopped, a claim finding no slot is given back at once.
	blocker, ok := b.limits.admit(b.claim("a.example"))
	require.True(t, ok)
	defer blocker()
	late := b.claim("a.example")
	_, ok = b.limits.admit(late)
	require.False(t, ok)
	require.Equal(t, late.ID, receive(t, b.deferred).id)
	require.Equal(t, 1.0, counterValue(t, b.metrics.deferrals.WithLabelValues("concurrency")))
}

// TestLimitsNodeDefaults: a tenant that set no dispatch limit of its own is
// held to the node's default; one that lifted it (model.Unlimited) is not.
func TestLimitsNodeDefaults(t *testing.T) {
	t.Parallel()
	defaults := model.Limits{DispatchConcurrency: 1}
	tests := []struct {
		name       string
		own        model.Limits
		secondSent bool
	}{
		{"no limits of its own: the default", model.Limits{}, false},
		{"its own lifts the default", model.Limits{DispatchConcurrency: model.Unlimited}, true},
		{"its own replaces the default", model.Limits{DispatchConcurrency: 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupLimitsDefaults(t, tt.own, defaults, nil)
			release, ok := b.limits.admit(b.claim("a.example"))
			require.True(t, ok)
			defer release()
			second, ok := b.limits.admit(b.claim("a.example"))
			require.Equal(t, tt.secondSent, ok)
			if ok {
				second()
			}
		})
	}
}
