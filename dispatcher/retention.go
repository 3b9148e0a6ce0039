package dispatcher

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/store"
)

// The kinds of rows hookwheel_retention_purged_total counts.
const (
	purgedTasks    = "tasks"
	purgedAttempts = "attempts"
	// purgedKeys are remembered idempotency keys forgotten once their
	// window passed.
	purgedKeys = "idempotency_keys"
)

// purgerStore is what the purger needs of Postgres.
type purgerStore interface {
	PurgeFinished(ctx context.Context, p store.PurgeParams) (store.PurgeResult, error)
	OldestFinished(ctx context.Context) (time.Time, bool, error)
	ExpireIdempotencyKeys(ctx context.Context, createdBefore time.Time, limit int) (int, error)
}

// purgerConfig configures newPurger. Every field is required.
type purgerConfig struct {
	Store   purgerStore
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Retention is how long finished tasks are kept when their tenant has
	// no retention of its own; 0 keeps them (tenants with their own are
	// still purged).
	Retention time.Duration
	// Interval is the wait after a pass that left nothing to purge.
	Interval time.Duration
	// Batch caps the tasks deleted by one statement, and the remembered
	// idempotency keys forgotten by another.
	Batch int
	// IdempotencyWindow is how long after their creation the keys of
	// purged tasks and publishes are remembered; 0 remembers none.
	IdempotencyWindow time.Duration
	// Leader says whether this node purges now: one node at a time does,
	// the others only measure.
	Leader func() bool
}

// purger deletes finished tasks, with their attempts, once their tenant's
// retention has passed, and measures the oldest finished task kept.
type purger struct {
	cfg purgerConfig
	// oldest is when the oldest finished task kept finished, in Unix
	// nanoseconds as last measured; 0 when none is kept.
	oldest atomic.Int64
}

func newPurger(cfg purgerConfig) *purger { return &purger{cfg: cfg} }

// Run purges until ctx ends. While a batch comes back full there is more
// to purge, and the next follows after a pause as long as the batch took:
// the purger then holds Postgres at most half of the time on one
// connection, and slows down by itself when Postgres slows down (a loaded
// database makes batches slower), so a backlog after downtime or a lowered
// retention drains without taking the claims' and attempts' share of the
// database. Once a batch is short, the purger measures the oldest finished
// task and waits Interval.
func (p *purger) Run(ctx context.Context) {
	t := p.cfg.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if p.cfg.Leader() {
			if more, took := p.pass(ctx); more {
				t.Reset(took)
				continue
			}
		}
		p.measure(ctx)
		t.Reset(p.cfg.Interval)
	}
}

// pass deletes one batch; more says it was full, took how long it took.
func (p *purger) pass(ctx context.Context) (more bool, took time.Duration) {
	start := p.cfg.Clock.Now()
	r, err := p.cfg.Store.PurgeFinished(ctx, store.PurgeParams{
		Now: start, DefaultRetention: p.cfg.Retention, Limit: p.cfg.Batch, IdempotencyWindow: p.cfg.IdempotencyWindow,
	})
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Metrics.storeErrors.WithLabelValues("purge").Inc()
			p.cfg.Logger.Error("purging finished tasks failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false, 0
	}
	p.cfg.Metrics.purged.WithLabelValues(purgedTasks).Add(float64(r.Tasks))
	p.cfg.Metrics.purged.WithLabelValues(purgedAttempts).Add(float64(r.Attempts))
	if r.Tasks > 0 {
		p.cfg.Logger.Debug("purged finished tasks", "tasks", r.Tasks, "attempts", r.Attempts, "keys_remembered", r.Remembered)
	}
	// Keys whose window has passed are forgotten by the same passes, in
	// batches as bounded.
	expired, err := p.cfg.Store.ExpireIdempotencyKeys(ctx, start.Add(-p.cfg.IdempotencyWindow), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Metrics.storeErrors.WithLabelValues("purge").Inc()
			p.cfg.Logger.Error("forgetting expired idempotency keys failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		expired = 0
	}
	p.cfg.Metrics.purged.WithLabelValues(purgedKeys).Add(float64(expired))
	return r.Tasks >= p.cfg.Batch || expired >= p.cfg.Batch, p.cfg.Clock.Now().Sub(start)
}

// measure reads when the oldest finished task kept finished. Every node
// measures, not only the one purging, so that the gauge is current wherever
// it is scraped, also after the purging moved to another node.
func (p *purger) measure(ctx context.Context) {
	at, ok, err := p.cfg.Store.OldestFinished(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			p.cfg.Metrics.storeErrors.WithLabelValues("oldest_finished").Inc()
			p.cfg.Logger.Warn("reading the oldest finished task failed", "err", err)
		}
	case ok:
		p.oldest.Store(at.UnixNano())
	default:
		p.oldest.Store(0)
	}
}

// oldestAge is the age in seconds of the oldest finished task kept, as of
// the last measure; 0 when none is.
func (p *purger) oldestAge() float64 {
	at := p.oldest.Load()
	if at == 0 {
		return 0
	}
	return max(0, p.cfg.Clock.Now().Sub(time.Unix(0, at)).Seconds())
}
