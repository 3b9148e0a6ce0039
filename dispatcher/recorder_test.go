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
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

type recorderBundle struct {
	db       *store.DB
	clock    *clock.Fake
	metrics  *metrics
	recorder *recorder
	tenant   uuid.UUID
	// done is closed once the recorder's Run has returned.
	done chan struct{}
}

// setupRecorder runs one recorder goroutine on a fresh database; it is
// closed when the test ends. Store, when set, stands in for Postgres.
func setupRecorder(t *testing.T, cfg recorderConfig) *recorderBundle {
	t.Helper()
	db := storetest.DB(t)
	b := &recorderBundle{db: db, clock: clock.NewFake(time.Now()), metrics: testMetrics(t), done: make(chan struct{})}
	b.tenant = storetest.CreateTenant(t, db, model.Limits{})
	if cfg.Store == nil {
		cfg.Store = db
	}
	cfg.Clock, cfg.Logger, cfg.Metrics = b.clock, quietLogger(), b.metrics
	cfg.Queue = max(cfg.Queue, 16)
	if cfg.GiveUpAfter == 0 {
		cfg.GiveUpAfter = 30 * time.Second
	}
	b.recorder = newRecorder(cfg)
	go func() { defer close(b.done); b.recorder.Run() }()
	t.Cleanup(func() {
		b.recorder.close()
		<-b.done
	})
	return b
}

// result is the outcome of one attempt of a claim.
func result(c *model.ClaimedTask, status model.TaskStatus, code int, next *time.Time) model.AttemptResult {
	body := "ok"
	return model.AttemptResult{
		Attempt: model.Attempt{TaskID: c.ID, Attempt: c.Attempt, StartedAt: time.Now(), Duration: time.Millisecond,
			StatusCode: &code, Outcome: "success", ResponseBody: &body},
		ClaimToken: c.ClaimToken, Status: status, NextAttemptAt: next,
	}
}

// recordAndWait records r and returns what the recorder reported.
func (b *recorderBundle) recordAndWait(t *testing.T, r model.AttemptResult) error {
	t.Helper()
	done := make(chan error, 1)
	b.recorder.record(r, func(err error) { done <- err })
	return receive(t, done)
}

// TestRecorderWritesOutcomes records each kind of outcome and reads the task
// back: the recorder moves it to its new status and stores the attempt.
func TestRecorderWritesOutcomes(t *testing.T) {
	t.Parallel()
	next := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	cases := []struct {
		name   string
		status model.TaskStatus
		code   int
		next   *time.Time
	}{
		{name: "delivered", status: model.StatusDelivered, code: 200},
		{name: "retrying", status: model.StatusRetrying, code: 503, next: &next},
		{name: "dead", status: model.StatusDead, code: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRecorder(t, recorderConfig{Batch: 1, Delay: time.Hour})
			task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", time.Now())
			c := storetest.ClaimNow(t, b.db, task.ID)[0]

			require.NoError(t, b.recordAndWait(t, result(c, tc.status, tc.code, tc.next)))

			got := taskOf(t, b.db, b.tenant, task.ID)
			require.Equal(t, tc.status, got.Status)
			require.Equal(t, tc.code, *got.LastStatusCode)
			if tc.next != nil {
				require.True(t, tc.next.Equal(*got.NextAttemptAt))
			}
			attempts, err := b.db.ListAttempts(context.Background(), b.tenant, task.ID, 0, 1000)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			require.Equal(t, c.Attempt, attempts[0].Attempt)
		})
	}
}

// TestRecorderClaimLost: an attempt whose claim another node took is not
// written, and its sender hears so.
func TestRecorderClaimLost(t *testing.T) {
	t.Parallel()
	b := setupRecorder(t, recorderConfig{Batch: 1, Delay: time.Hour})
	task := storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", time.Now())
	c := storetest.ClaimNow(t, b.db, task.ID)[0]
	c.ClaimToken = uuid.New() // not the token Postgres holds

	require.ErrorIs(t, b.recordAndWait(t, result(c, model.StatusDelivered, 200, nil)), model.ErrClaimLost)
	require.Equal(t, model.StatusDispatching, taskOf(t, b.db, b.tenant, task.ID).Status)
}

// TestRecorderBatches: attempts are gathered into one statement up to Batch,
// and a partial batch is written once Delay has passed, not before.
func TestRecorderBatches(t *testing.T) {
	t.Parallel()
	b := setupRecorder(t, recorderConfig{Batch: 3, Delay: 50 * time.Millisecond})
	var tasks []uuid.UUID
	for range 4 {
		tasks = append(tasks, storetest.InsertTask(t, b.db, b.tenant, "https://receiver.example/x", time.Now()).ID)
	}
	claims := storetest.ClaimNow(t, b.db, tasks...)

	var written atomic.Int32
	done := make(chan error, len(claims))
	for _, c := range claims[:3] {
		b.recorder.record(result(c, model.StatusDelivered, 200, nil), func(err error) { written.Add(1); done <- err })
	}
	for range 3 {
		require.NoError(t, receive(t, done))
	}
	count, sum := histogramCount(t, b.metrics.recordBatch)
	require.Equal(t, uint64(1), count, "a full batch, in one statement, without waiting for the delay")
	require.Equal(t, 3.0, sum)

	// A lone attempt waits for the delay, on the recorder's clock.
	b.recorder.record(result(claims[3], model.StatusDelivered, 200, nil), func(err error) { written.Add(1); done <- err })
	waitTimers(t, b.clock, 1)
	require.Equal(t, int32(3), written.Load(), "written before its delay")
	b.clock.Advance(50 * time.Millisecond)
	require.NoError(t, receive(t, done))
	count, sum = histogramCount(t, b.metrics.recordBatch)
	require.Equal(t, uint64(2), count)
	require.Equal(t, 4.0, sum)
}

// failingBatches fails every batch statement and writes rows one by one
// through the real store.
type failingBatches struct {
	*store.DB
	batches atomic.Int32
}

func (f *failingBatches) RecordAttempts(context.Context, []model.AttemptResult) ([]error, error) {
	f.batches.Add(1)
	return nil, errors.New("statement failed")
}

// TestRecorderFallsBackToRows: a batch that keeps failing past GiveUpAfter is
// retried with backoff, then written row by row so that one bad row cannot
// sink the others.
func TestRecorderFallsBackToRows(t *testing.T) {
	t.Parallel()
	db := storetest.DB(t)
	failing := &failingBatches{DB: db}
	b := setupRecorder(t, recorderConfig{Store: failing, Batch: 1, Delay: time.Hour, GiveUpAfter: 120 * time.Millisecond})
	b.db = db
	b.tenant = storetest.CreateTenant(t, db, model.Limits{})
	task := storetest.InsertTask(t, db, b.tenant, "https://receiver.example/x", time.Now())
	c := storetest.ClaimNow(t, db, task.ID)[0]

	done := make(chan error, 1)
	b.recorder.record(result(c, model.StatusDelivered, 200, nil), func(err error) { done <- err })
	// Backoffs of 50 ms then 100 ms, each waited out on the fake clock:
	// the third failure is past the 120 ms deadline. Each wait begins once
	// the batch has failed: before that, the timer armed may be the
	// gathering's (Delay), stopped again before the flush, and moving the
	// clock then would leave the backoff's timer never to fire.
	for i := range 2 {
		require.Eventually(t, func() bool { return failing.batches.Load() > int32(i) }, 10*time.Second, time.Millisecond)
		waitTimers(t, b.clock, 1)
		b.clock.Advance(100 * time.Millisecond)
	}
	require.NoError(t, receive(t, done))
	require.Equal(t, int32(3), failing.batches.Load())
	require.Equal(t, model.StatusDelivered, taskOf(t, db, b.tenant, task.ID).Status)
	require.Equal(t, 3.0, counterValue(t, b.metrics.storeErrors.WithLabelValues("record")))
}
