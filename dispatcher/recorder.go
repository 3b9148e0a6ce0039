package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// recordStore is what the recorder needs of Postgres.
type recordStore interface {
	RecordAttempts(ctx context.Context, results []model.AttemptResult) ([]error, error)
	RecordAttempt(ctx context.Context, r model.AttemptResult) error
}

// recorderConfig configures newRecorder. Every field is required.
type recorderConfig struct {
	Store   recordStore
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Queue is how many attempts may wait for a recorder before record
	// blocks.
	Queue int
	// Batch and Delay shape the batches: up to Batch attempts gathered for
	// at most Delay after the first.
	Batch int
	Delay time.Duration
	// GiveUpAfter is how long a batch is retried while Postgres is away
	// before it is written row by row.
	GiveUpAfter time.Duration
	// Spans makes a span per write of a batch (tracing.go).
	Spans spans
}

// recorder writes finished attempts to Postgres in batches.
type recorder struct {
	cfg recorderConfig
	// records carries finished attempts from the senders to the recorders.
	records chan recordRequest
}

func newRecorder(cfg recorderConfig) *recorder {
	return &recorder{cfg: cfg, records: make(chan recordRequest, cfg.Queue)}
}

// recordRequest is one attempt waiting to be written, and what to do once
// it is durable (err nil) or known lost.
type recordRequest struct {
	result model.AttemptResult
	then   func(err error)
}

// record hands an attempt to the recorders; then runs on a recorder once it
// is written or known lost. The sender does not wait: it is free for the
// next send (and its target's slot with it) while the batch gathers and
// commits, which otherwise held every send slot for a commit's time on top
// of the request's. Attempts sent and not yet written are bounded all the
// same, by the claim budget, since a task's budget returns only in then.
func (rec *recorder) record(r model.AttemptResult, then func(err error)) {
	rec.records <- recordRequest{result: r, then: then}
}

// close tells the recorders that no more attempts come: Run returns once
// the last are written.
func (rec *recorder) close() { close(rec.records) }

// Run writes attempts in batches until close: one statement and one commit
// for up to Batch attempts, gathered for at most Delay after the first;
// several goroutines run it together. Under load the batches fill by themselves while the previous one
// commits, which is what lets a node record thousands of attempts a second.
func (rec *recorder) Run() {
	batch := make([]recordRequest, 0, rec.cfg.Batch)
	timer := rec.cfg.Clock.NewTimer(time.Hour)
	timer.Stop()
	for first := range rec.records {
		batch = append(batch[:0], first)
		timer.Reset(rec.cfg.Delay)
	gather:
		for len(batch) < cap(batch) {
			select {
			case r, ok := <-rec.records:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			case <-timer.C():
				break gather
			}
		}
		timer.Stop()
		rec.flush(batch)
	}
}

// flush writes one batch. Postgres being away is waited out (the receivers
// already have these webhooks: giving up would mean sending them twice); a
// batch that keeps failing for another reason is written row by row so one
// bad row cannot sink the others.
func (rec *recorder) flush(batch []recordRequest) {
	rec.cfg.Metrics.recordBatch.Observe(float64(len(batch)))
	results := make([]model.AttemptResult, len(batch))
	for i, r := range batch {
		results[i] = r.result
	}
	deadline := rec.cfg.Clock.Now().Add(rec.cfg.GiveUpAfter)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		span := rec.cfg.Spans.record(len(results))
		errs, err := rec.cfg.Store.RecordAttempts(ctx, results)
		cancel()
		endBatch(span, recordedCount(errs, err), err)
		if err == nil {
			for i, r := range batch {
				r.then(errs[i])
			}
			return
		}
		rec.cfg.Metrics.storeErrors.WithLabelValues("record").Inc()
		if rec.cfg.Clock.Now().After(deadline) {
			break
		}
		rec.cfg.Logger.Warn("recording attempts failed; retrying", "attempts", len(batch), "err", err, "in", backoff)
		t := rec.cfg.Clock.NewTimer(backoff)
		<-t.C()
		backoff = min(2*backoff, 2*time.Second)
	}
	for _, r := range batch {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := rec.cfg.Store.RecordAttempt(ctx, r.result)
		cancel()
		if err != nil && !errors.Is(err, model.ErrClaimLost) {
			rec.cfg.Metrics.storeErrors.WithLabelValues("record").Inc()
		}
		r.then(err)
	}
}

// recordedCount is how many attempts of a batch RecordAttempts wrote: those
// without an error of their own (a claim lost), none when it failed.
func recordedCount(errs []error, err error) int {
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range errs {
		if e == nil {
			n++
		}
	}
	return n
}
