package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// The kinds of rows hookwheel_retention_purged_total counts.
const (
	purgedTasks    = "tasks"
	purgedAttempts = "attempts"
	purgedAudit    = "audit_entries"
	purgedUsage    = "usage_days"
	purgedHealth   = "target_health"
	// purgedKeys are remembered idempotency keys forgotten once their
	// window passed.
	purgedKeys = "idempotency_keys"
)

// DefaultPurgeInterval and DefaultPurgeBatch are PurgerConfig's defaults.
const (
	DefaultPurgeInterval = 10 * time.Second
	DefaultPurgeBatch    = 1000
)

// PurgerStore is what the purger needs of Postgres.
type PurgerStore interface {
	PurgeFinished(ctx context.Context, p model.PurgeParams) (model.PurgeResult, error)
	OldestFinished(ctx context.Context) (time.Time, bool, error)
	PurgeAudit(ctx context.Context, before time.Time, limit int) (int, error)
	ExpireIdempotencyKeys(ctx context.Context, createdBefore time.Time, limit int) (int, error)
	PurgeUsage(ctx context.Context, before time.Time, limit int) (int, error)
	FoldUsage(ctx context.Context, day time.Time, limit int) (int, error)
	PruneTargetHealth(ctx context.Context, before time.Time, limit int) (int, error)
}

// PurgerConfig configures NewPurger.
type PurgerConfig struct {
	// Store is where the purger deletes and measures. Required.
	Store PurgerStore
	// Leader says whether this node purges now: one node at a time does,
	// the others only measure. Required.
	Leader func() bool
	// Clock times the passes and dates what is purged. Default clock.Real().
	Clock clock.Clock
	// Logger is where failed passes are reported. Default slog.Default().
	Logger *slog.Logger
	// Registerer takes the purger's own series,
	// hookwheel_retention_purged_total and
	// hookwheel_retention_oldest_finished_age_seconds. Default: a registry
	// of its own, which nothing scrapes.
	Registerer prometheus.Registerer
	// StoreError counts a failed Postgres operation by its name (purge,
	// purge_audit, oldest_finished). The counter is the dispatcher's, shared
	// by all its parts, so it is passed in rather than registered here.
	// Default: counts nothing.
	StoreError func(op string)
	// Retention is how long finished tasks are kept when their tenant has
	// no retention of its own. Default 0: they are kept (tenants with their
	// own are still purged).
	Retention time.Duration
	// AuditRetention is how long audit entries are kept. Default 0: they
	// are kept.
	AuditRetention time.Duration
	// Interval is the wait after a pass that left nothing to purge.
	// Default DefaultPurgeInterval (10s).
	Interval time.Duration
	// Batch caps the tasks, the audit entries or the remembered idempotency
	// keys deleted by one statement. Default DefaultPurgeBatch (1000).
	Batch int
	// IdempotencyWindow is how long after their creation the keys of
	// purged tasks and publishes are remembered. Default 0: none is.
	IdempotencyWindow time.Duration
	// TargetHealthIdle is how long a target's record of failures is kept
	// once no attempt to it is reported. Default 0: kept.
	TargetHealthIdle time.Duration
}

// Purger deletes finished tasks, with their attempts, once their tenant's
// retention has passed, audit entries older than AuditRetention, usage
// older than model.UsageKeepDays days (whatever the retention), and the
// failure records of targets left alone for TargetHealthIdle; it folds
// the usage rows of the day before yesterday into one per tenant; it
// measures the oldest finished task kept.
type Purger struct {
	cfg PurgerConfig
	// folded is the last day whose usage rows were all folded: each day is
	// folded once, by the node purging then.
	folded time.Time
	// purged counts the rows deleted, by kind.
	purged *prometheus.CounterVec
	// oldest is when the oldest finished task kept finished, in Unix
	// nanoseconds as last measured; 0 when none is kept.
	oldest atomic.Int64
}

// NewPurger returns a Purger with its series registered; nothing runs
// until Run.
func NewPurger(cfg PurgerConfig) (*Purger, error) {
	if cfg.Store == nil || cfg.Leader == nil {
		return nil, errors.New("maintenance: PurgerConfig.Store and Leader are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.StoreError == nil {
		cfg.StoreError = func(string) {}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPurgeInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultPurgeBatch
	}
	p := &Purger{cfg: cfg}
	p.purged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookwheel_retention_purged_total",
		Help: "Rows deleted by retention on this node, by kind: tasks (finished ones past their retention), their attempts, audit_entries (past HOOKWHEEL_AUDIT_RETENTION), usage_days (past 400 days), target_health (targets no attempt went to for HOOKWHEEL_TARGET_DISABLE_AFTER), and idempotency_keys (keys of purged tasks remembered until HOOKWHEEL_IDEMPOTENCY_WINDOW passed).",
	}, []string{"kind"})
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookwheel_retention_oldest_finished_age_seconds",
		Help: "Age of the oldest finished task still kept, from when it finished (0 when none is); measured every retention interval. Well above the retention means purging falls behind.",
	}, p.oldestAge)
	for _, c := range []prometheus.Collector{p.purged, oldest} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("maintenance: register purger metrics: %w", err)
		}
	}
	for _, kind := range []string{purgedTasks, purgedAttempts, purgedAudit, purgedUsage, purgedHealth} {
		p.purged.WithLabelValues(kind)
	}
	return p, nil
}

// Run purges until ctx ends. While a batch comes back full there is more
// to purge, and the next follows after a pause as long as the batch took:
// the purger then holds Postgres at most half of the time on one
// connection, and slows down by itself when Postgres slows down (a loaded
// database makes batches slower), so a backlog after downtime or a lowered
// retention drains without taking the claims' and attempts' share of the
// database. Once a batch is short, the purger measures the oldest finished
// task and waits Interval.
func (p *Purger) Run(ctx context.Context) {
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
func (p *Purger) pass(ctx context.Context) (more bool, took time.Duration) {
	start := p.cfg.Clock.Now()
	more = p.purgeTasks(ctx, start)
	if p.expireKeys(ctx, start) {
		more = true
	}
	if p.purgeAudit(ctx, start) {
		more = true
	}
	if p.purgeUsage(ctx, start) {
		more = true
	}
	if p.pruneTargetHealth(ctx, start) {
		more = true
	}
	return more, p.cfg.Clock.Now().Sub(start)
}

// purgeUsage deletes one batch of usage rows past model.UsageKeepDays days,
// then folds one batch of the day before yesterday's; it says whether
// either was full.
func (p *Purger) purgeUsage(ctx context.Context, now time.Time) bool {
	y, m, d := now.UTC().Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	n, err := p.cfg.Store.PurgeUsage(ctx, today.AddDate(0, 0, -model.UsageKeepDays), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.StoreError("purge_usage")
			p.cfg.Logger.Error("purging old usage failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.purged.WithLabelValues(purgedUsage).Add(float64(n))
	more := n >= p.cfg.Batch
	// Two days back: no statement counts on it any more but one of a
	// transaction opened then, which readers sum anyway.
	day := today.AddDate(0, 0, -2)
	if p.folded.Equal(day) {
		return more
	}
	folded, err := p.cfg.Store.FoldUsage(ctx, day, p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.StoreError("fold_usage")
			p.cfg.Logger.Error("folding a day's usage failed; will retry", "day", day.Format(time.DateOnly), "err", err)
		}
		return more
	}
	if folded < p.cfg.Batch {
		p.folded = day
		return more
	}
	return true
}

// purgeTasks deletes one batch of finished tasks; it says whether it was
// full.
func (p *Purger) purgeTasks(ctx context.Context, now time.Time) bool {
	r, err := p.cfg.Store.PurgeFinished(ctx, model.PurgeParams{
		Now: now, DefaultRetention: p.cfg.Retention, Limit: p.cfg.Batch, IdempotencyWindow: p.cfg.IdempotencyWindow,
	})
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.StoreError("purge")
			p.cfg.Logger.Error("purging finished tasks failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.purged.WithLabelValues(purgedTasks).Add(float64(r.Tasks))
	p.purged.WithLabelValues(purgedAttempts).Add(float64(r.Attempts))
	if r.Tasks > 0 {
		p.cfg.Logger.Debug("purged finished tasks", "tasks", r.Tasks, "attempts", r.Attempts, "keys_remembered", r.Remembered)
	}
	return r.Tasks >= p.cfg.Batch
}

// expireKeys forgets one batch of remembered idempotency keys whose window
// has passed; it says whether it was full.
func (p *Purger) expireKeys(ctx context.Context, now time.Time) bool {
	expired, err := p.cfg.Store.ExpireIdempotencyKeys(ctx, now.Add(-p.cfg.IdempotencyWindow), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.StoreError("purge")
			p.cfg.Logger.Error("forgetting expired idempotency keys failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.purged.WithLabelValues(purgedKeys).Add(float64(expired))
	return expired >= p.cfg.Batch
}

// purgeAudit deletes one batch of audit entries past AuditRetention; it
// says whether it was full.
func (p *Purger) purgeAudit(ctx context.Context, now time.Time) bool {
	if p.cfg.AuditRetention <= 0 {
		return false
	}
	n, err := p.cfg.Store.PurgeAudit(ctx, now.Add(-p.cfg.AuditRetention), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.StoreError("purge_audit")
			p.cfg.Logger.Error("purging old audit entries failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.purged.WithLabelValues(purgedAudit).Add(float64(n))
	if n > 0 {
		p.cfg.Logger.Debug("purged old audit entries", "entries", n)
	}
	return n >= p.cfg.Batch
}

// pruneTargetHealth deletes one batch of the failure records of targets
// left alone for TargetHealthIdle; it says whether it was full.
func (p *Purger) pruneTargetHealth(ctx context.Context, now time.Time) bool {
	if p.cfg.TargetHealthIdle <= 0 {
		return false
	}
	n, err := p.cfg.Store.PruneTargetHealth(ctx, now.Add(-p.cfg.TargetHealthIdle), p.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.StoreError("prune_target_health")
			p.cfg.Logger.Error("pruning idle targets' health failed; will retry", "err", err, "retry_in", p.cfg.Interval)
		}
		return false
	}
	p.purged.WithLabelValues(purgedHealth).Add(float64(n))
	return n >= p.cfg.Batch
}

// measure reads when the oldest finished task kept finished. Every node
// measures, not only the one purging, so that the gauge is current wherever
// it is scraped, also after the purging moved to another node.
func (p *Purger) measure(ctx context.Context) {
	at, ok, err := p.cfg.Store.OldestFinished(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			p.cfg.StoreError("oldest_finished")
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
func (p *Purger) oldestAge() float64 {
	at := p.oldest.Load()
	if at == 0 {
		return 0
	}
	return max(0, p.cfg.Clock.Now().Sub(time.Unix(0, at)).Seconds())
}
