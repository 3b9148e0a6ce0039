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

type fireOnceBundle struct {
	clock    *clock.Fake
	metrics  *metrics
	fireOnce *fireOnce
	deferred chan dueAt
}

func setupFireOnce(t *testing.T, redis fireOnceStore) *fireOnceBundle {
	t.Helper()
	b := &fireOnceBundle{clock: clock.NewFake(time.Now()), metrics: testMetrics(t), deferred: make(chan dueAt, 16)}
	b.fireOnce = newFireOnce(fireOnceConfig{
		Redis: redis, Down: failopen.New(failopen.Config{Clock: b.clock}), LeaseMargin: 30 * time.Second,
		Logger: quietLogger(), Metrics: b.metrics, Clock: b.clock,
		Defer: func(claims []*model.ClaimedTask, until func(int) time.Time) {
			for i, c := range claims {
				b.deferred <- dueAt{c.ID, until(i)}
			}
		},
	})
	return b
}

func testClaim() *model.ClaimedTask {
	return &model.ClaimedTask{Task: model.Task{ID: uuid.New(), Timeout: 5 * time.Second}, Attempt: 1, ClaimToken: uuid.New()}
}

// TestFireOnceOneSenderPerAttempt: two nodes holding a Postgres claim of the
// same attempt (one whose lease expired) cannot both send it: the second is
// deferred until the first's Redis claim lapses.
func TestFireOnceOneSenderPerAttempt(t *testing.T) {
	t.Parallel()
	redis := storetest.Redis(t)
	first, second := setupFireOnce(t, redis), setupFireOnce(t, redis)
	c := testClaim()
	again := *c
	again.ClaimToken = uuid.New()

	require.Equal(t, []*model.ClaimedTask{c}, first.fireOnce.claim(context.Background(), []*model.ClaimedTask{c}))
	require.Empty(t, second.fireOnce.claim(context.Background(), []*model.ClaimedTask{&again}))
	got := receive(t, second.deferred)
	require.Equal(t, c.ID, got.id)
	require.True(t, second.clock.Now().Add(c.Timeout+2*30*time.Second).Equal(got.at))
	require.Equal(t, 1.0, counterValue(t, second.metrics.claimConflicts))
	require.Empty(t, first.deferred)
}

// failingRedis fails every fire-once claim, counting the calls.
type failingRedis struct{ calls atomic.Int32 }

func (f *failingRedis) ClaimAttempts(context.Context, []model.AttemptClaim) ([]bool, error) {
	f.calls.Add(1)
	return nil, errors.New("connection refused")
}

// TestFireOnceFailsOpen: with Redis failing, claims go ahead on Postgres
// alone, and Redis is not asked again until the fail-open window has passed.
func TestFireOnceFailsOpen(t *testing.T) {
	t.Parallel()
	redis := &failingRedis{}
	b := setupFireOnce(t, redis)
	claims := []*model.ClaimedTask{testClaim(), testClaim()}

	require.Equal(t, claims, b.fireOnce.claim(context.Background(), claims))
	require.Equal(t, int32(1), redis.calls.Load())
	require.Equal(t, 1.0, counterValue(t, b.metrics.redisDegraded))
	require.Equal(t, 1.0, counterValue(t, b.metrics.redisErrors))

	b.clock.Advance(failopen.DefaultSkip - time.Millisecond)
	require.Equal(t, claims, b.fireOnce.claim(context.Background(), claims))
	require.Equal(t, int32(1), redis.calls.Load(), "skipped within the window")

	b.clock.Advance(time.Millisecond)
	require.Equal(t, claims, b.fireOnce.claim(context.Background(), claims))
	require.Equal(t, int32(2), redis.calls.Load(), "asked again once it passed")
	require.Empty(t, b.deferred)
}
