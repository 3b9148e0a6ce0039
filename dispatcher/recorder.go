package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/hookwheel/hookwheel/store"
)

// recordRequest is one attempt waiting to be written, and what to do once
// it is durable (err nil) or known lost.
type recordRequest struct {
	result store.AttemptResult
	then   func(err error)
}

// record hands an attempt to the recorders; then runs on a recorder once it
// is written or known lost. The sender does not wait: it is free for the
// next send (and its target's slot with it) while the batch gathers and
// commits, which otherwise held every send slot for a commit's time on top
// of the request's. Attempts sent and not yet written are bounded all the
// same, by the claim budget, since a task's budget returns only in then.
func (d *Dispatcher) record(r store.AttemptResult, then func(err error)) {
	d.records <- recordRequest{result: r, then: then}
}

// runRecorder writes attempts in batches: one statement and one commit for
// up to RecordBatch attempts, gathered for at most RecordDelay after the
// first. Under load the batches fill by themselves while the previous one
// commits, which is what lets a node record thousands of attempts a second.
func (d *Dispatcher) runRecorder() {
	batch := make([]recordRequest, 0, d.cfg.RecordBatch)
	timer := d.clock.NewTimer(time.Hour)
	timer.Stop()
	for first := range d.records {
		batch = append(batch[:0], first)
		timer.Reset(d.cfg.RecordDelay)
	gather:
		for len(batch) < cap(batch) {
			select {
			case r, ok := <-d.records:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			case <-timer.C():
				break gather
			}
		}
		timer.Stop()
		d.flush(batch)
	}
}

// flush writes one batch. Postgres being away is waited out (the receivers
// already have these webhooks: giving up would mean sending them twice); a
// batch that keeps failing for another reason is written row by row so one
// bad row cannot sink the others.
func (d *Dispatcher) flush(batch []recordRequest) {
	d.metrics.recordBatch.Observe(float64(len(batch)))
	results := make([]store.AttemptResult, len(batch))
	for i, r := range batch {
		results[i] = r.result
	}
	deadline := d.clock.Now().Add(d.cfg.LeaseMargin)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs, err := d.db.RecordAttempts(ctx, results)
		cancel()
		if err == nil {
			for i, r := range batch {
				r.then(errs[i])
			}
			return
		}
		d.metrics.storeErrors.WithLabelValues("record").Inc()
		if d.clock.Now().After(deadline) {
			break
		}
		d.logger.Warn("recording attempts failed; retrying", "attempts", len(batch), "err", err, "in", backoff)
		t := d.clock.NewTimer(backoff)
		<-t.C()
		backoff = min(2*backoff, 2*time.Second)
	}
	for _, r := range batch {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := d.db.RecordAttempt(ctx, r.result)
		cancel()
		if err != nil && !errors.Is(err, store.ErrClaimLost) {
			d.metrics.storeErrors.WithLabelValues("record").Inc()
		}
		r.then(err)
	}
}
