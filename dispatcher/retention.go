package dispatcher

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// The kinds of rows hookwheel_retention_purged_total counts.
const (
	purgedTasks    = "tasks"
	purgedAttempts = "attempts"
	purgedAudit    = "audit_entries"
	// purgedKeys are remembered idempotency keys forgotten once their
	// window passed.
	purgedKeys = "idempotency_keys"
)

// purgerStore is what the purger needs of Postgres.
type purgerStore interface {
	PurgeFinished(ctx context.Context, p model.PurgeParams) (model.PurgeResult, error)
	OldestFinished(ctx context.Context) (time.Time, bool, error)
	PurgeAudit(ctx context.Context, before time.Time, limit int) (int, error)
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
	// AuditRetention is how long audit entries are kept; 0 keeps them.
	AuditRetention time.Duration
	// Interval is the wait after a pass that left nothing to purge.
	Interval time.Duration
	// Batch caps the tasks, the audit entries or the remembered idempotency
	// keys deleted by one statement.
	Batch int
	// IdempotencyWindow is how long after their creation the keys of
	// purged tasks and publishes are remembered; 0 remembers none.
	IdempotencyWindow time.Duration
	// Leader says whether this node purges now: one node at a time does,
	// the others only measure.
	Leader func() bool
}

// purger deletes finished tasks, with their attempts, once their tenant's
// retention has passed, and audit entries older than AuditRetention; it
// measures the oldest finished task kept.
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

// pass deletes one batch of tasks, one of expired idempotency keys and one of
// audit entries; more says any was full, took how long it took.
func (p *purger) pass(ctx context.Context) (more bool, took time.Duration) {
	start := p.cfg.Clock.Now()
	more = p.purgeTasks(ctx, start)
	if p.expireKeys(ctx, start) {
		more = true
	}
	if p.purgeAudit(ctx, start) {
		more = true
	}
	return more, p.cfg.Clock.Now().Sub(start)
}

// purgeTasks deletes one batch of finished tasks; it says whether it was
// full.
func (p *purger) purgeTasks(ctx context.Context, now time.Time) bool {
	r, err := p.cfg.Store.PurgeFinished(ctx, model.PurgeParams{
		Now: now, DefaultRetention: p.cfg.Retention, Limit: p.cfg.Batch, IdempotencyWindow: p.cfg.IdempotencyWindow,
	})
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Metrics.storeErrors.WithLabelValues("purge").Inc()
			p.cfg.Logger.Error("purging finished tasks failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.cfg.Metrics.purged.WithLabelValues(purgedTasks).Add(float64(r.Tasks))
	p.cfg.Metrics.purged.WithLabelValues(purgedAttempts).Add(float64(r.Attempts))
	if r.Tasks > 0 {
		p.cfg.Logger.Debug("purged finished tasks", "tasks", r.Tasks, "attempts", r.Attempts, "keys_remembered", r.Remembered)
	}
	return r.Tasks >= p.cfg.Batch
}

// expireKeys forgets one batch of remembered idempotency keys whose window
// has passed; it says whether it was full.
func (p *purger) expireKeys(ctx context.Context, now time.Time) bool {
	expired, err := p.cfg.Store.ExpireIdempotencyKeys(ctx, now.Add(-p.cfg.IdempotencyWindow), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Metrics.storeErrors.WithLabelValues("purge").Inc()
			p.cfg.Logger.Error("forgetting expired idempotency keys failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.cfg.Metrics.purged.WithLabelValues(purgedKeys).Add(float64(expired))
	return expired >= p.cfg.Batch
}

// purgeAudit deletes one batch of audit entries past AuditRetention; it
// says whether it was full.
func (p *purger) purgeAudit(ctx context.Context, now time.Time) bool {
	if p.cfg.AuditRetention <= 0 {
		return false
	}
	n, err := p.cfg.Store.PurgeAudit(ctx, now.Add(-p.cfg.AuditRetention), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Metrics.storeErrors.WithLabelValues("purge_audit").Inc()
			p.cfg.Logger.Error("purging old audit entries failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.cfg.Metrics.purged.WithLabelValues(purgedAudit).Add(float64(n))
	if n > 0 {
		p.cfg.Logger.Debug("purged old audit entries", "entries", n)
	}
	return n >= p.cfg.Batch
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
