package dispatcher

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

type deferrerBundle struct {
	db        *store.DB
	redis     *store.Redis
	deferrer  *deferrer
	tenant    uuid.UUID
	settled   chan uuid.UUID
	scheduled chan dueAt
	stopping  atomic.Bool
}

func setupDeferrer(t *testing.T) *deferrerBundle {
	t.Helper()
	b := &deferrerBundle{db: storetest.DB(t), redis: storetest.Redis(t), settled: make(chan uuid.UUID, 16), scheduled: make(chan dueAt, 16)}
	b.tenant = storetest.CreateTenant(t, b.db, model.Limits{})
	b.deferrer = newDeferrer(deferrerConfig{
		Store: b.db, FireOnce: b.redis, Logger: quietLogger(), Metrics: testMetrics(t),
		Settle:   func(id uuid.UUID) { b.settled <- id },
		Schedule: func(id uuid.UUID, at time.Time) { b.scheduled <- dueAt{id, at} },
		Stopping: b.stopping.Load,
	})
	return b
}

// TestDeferrer gives claims back, due as they were or later, and checks that
// each waits again in Postgres without an attempt spent, is free in Redis for
// the next sender, has its budget settled, and is armed again here unless
// the node is stopping.
func TestDeferrer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		until    time.Duration // from the task's due time; 0: due as it was
		stopping bool
	}{
		{name: "due as it was"},
		{name: "later", until: time.Minute},
		{name: "earlier than due keeps its due time", until: -time.Minute},
		{name: "stopping: left to the next owner", stopping: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setupDeferrer(t)
			b.stopping.Store(tc.stopping)
			due := time.Now().Add(-time.Second).Truncate(time.Microsecond)
			task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", due)
			c := storetest.ClaimNow(t, b.db, task.ID)[0]
			fireOnce := model.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken, TTL: time.Minute}
			held, err := b.redis.ClaimAttempts(ctx, []model.AttemptClaim{fireOnce})
			require.NoError(t, err)
			require.True(t, held[0])

			var until time.Time
			if tc.until != 0 {
				until = due.Add(tc.until)
			}
			b.deferrer.Defer([]*model.ClaimedTask{c}, func(int) time.Time { return until })

			want := due
			if until.After(due) {
				want = until
			}
			got := taskOf(t, b.db, b.tenant, task.ID)
			require.Equal(t, model.StatusScheduled, got.Status)
			require.Zero(t, got.Attempts, "no attempt spent")
			require.True(t, want.Equal(*got.NextAttemptAt), "due %s, want %s", got.NextAttemptAt, want)
			require.Equal(t, c.ID, receive(t, b.settled))
			if tc.stopping {
				require.Empty(t, b.scheduled)
			} else {
				armed := receive(t, b.scheduled)
				require.Equal(t, c.ID, armed.id)
				require.True(t, want.Equal(armed.at))
			}
			fireOnce.Token = uuid.New()
			held, err = b.redis.ClaimAttempts(ctx, []model.AttemptClaim{fireOnce})
			require.NoError(t, err)
			require.True(t, held[0], "the attempt is free in Redis for the next sender")
		})
	}
}

// heldDeferStore reports the size of each batch it is given as the call
// starts, and holds the call until release yields (a value, or its close).
type heldDeferStore struct {
	deferStore
	batches chan int
	release chan struct{}
}

func (s *heldDeferStore) DeferClaims(ctx context.Context, claims []model.DeferredClaim) error {
	s.batches <- len(claims)
	<-s.release
	return s.deferStore.DeferClaims(ctx, claims)
}

// setupHeldDeferrer is setupDeferrer with its writes held, and n claimed
// tasks.
func setupHeldDeferrer(t *testing.T, n int) (*deferrerBundle, *heldDeferStore, []*model.ClaimedTask) {
	t.Helper()
	b := setupDeferrer(t)
	held := &heldDeferStore{deferStore: b.db, batches: make(chan int, 8), release: make(chan struct{})}
	b.deferrer.cfg.Store = held
	due := time.Now().Add(-time.Second)
	claims := make([]*model.ClaimedTask, n)
	for i := range claims {
		task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", due)
		claims[i] = storetest.ClaimNow(t, b.db, task.ID)[0]
	}
	return b, held, claims
}

// requireGivenBack checks that each claim's task waits again, its budget
// settled, in the order given.
func requireGivenBack(t *testing.T, b *deferrerBundle, claims []*model.ClaimedTask) {
	t.Helper()
	for _, c := range claims {
		got := taskOf(t, b.db, b.tenant, c.ID)
		require.Zero(t, got.Attempts, "task %s given back", c.ID)
		require.Equal(t, c.ID, receive(t, b.settled))
	}
}

// TestDeferrerGathersConcurrentCalls gives a claim back while another is
// being written: the call returns at once, and the claims given back
// meanwhile are written together, in one statement, by the caller that was
// writing, before its call returns.
func TestDeferrerGathersConcurrentCalls(t *testing.T) {
	t.Parallel()
	b, held, claims := setupHeldDeferrer(t, 4)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		b.deferrer.Defer(claims[:1], asDue)
	}()
	require.Equal(t, 1, receive(t, held.batches))
	// While the first write is held open, these return without writing.
	b.deferrer.Defer(claims[1:3], asDue)
	b.deferrer.Defer(claims[3:], asDue)
	select {
	case <-firstDone:
		t.Fatal("the writing call returned before writing what was given back meanwhile")
	default:
	}

	close(held.release)
	require.Equal(t, 3, receive(t, held.batches), "the three claims given back meanwhile go in one statement")
	receive(t, firstDone)
	requireGivenBack(t, b, claims)
	require.Empty(t, held.batches)
}

// TestDeferrerHandsOnWhatKeepsComing: a caller writes its own claims and
// what gathered during that write, then returns, leaving what gathered
// since to a goroutine of the deferrer's, which wait waits for.
func TestDeferrerHandsOnWhatKeepsComing(t *testing.T) {
	t.Parallel()
	b, held, claims := setupHeldDeferrer(t, 3)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		b.deferrer.Defer(claims[:1], asDue)
	}()
	require.Equal(t, 1, receive(t, held.batches))
	b.deferrer.Defer(claims[1:2], asDue)
	held.release <- struct{}{}
	require.Equal(t, 1, receive(t, held.batches), "the caller's second write: what gathered during its first")
	b.deferrer.Defer(claims[2:], asDue)
	held.release <- struct{}{}
	require.Equal(t, 1, receive(t, held.batches), "the third write, handed on")
	// The third write is held open, yet the caller has returned: it is not
	// the one writing.
	receive(t, firstDone)
	close(held.release)
	b.deferrer.wait()
	requireGivenBack(t, b, claims)
	require.Empty(t, held.batches)
}
