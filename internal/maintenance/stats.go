package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// StatsStore is what the stats recorder needs of Postgres.
type StatsStore interface {
	AddTaskStats(ctx context.Context, rows []model.TenantMinuteStats) error
	PurgeTaskStats(ctx context.Context, before time.Time, limit int) (int, error)
}

// StatsKeep is how long statistics are kept; the API promises two days.
const StatsKeep = 48 * time.Hour

// DefaultStatsInterval is StatsConfig.Interval's default.
const DefaultStatsInterval = 5 * time.Second

// StatsConfig configures NewStatsRecorder.
type StatsConfig struct {
	// Store is where the counts are written and old ones deleted. Required
	// by Run; a recorder that is never run only counts.
	Store StatsStore
	// Leader says whether this node deletes the statistics past Keep: one
	// node at a time does. Default: never.
	Leader func() bool
	// Clock times the writes and dates the deletes. Default clock.Real().
	Clock clock.Clock
	// Logger is where failed writes are reported. Default slog.Default().
	Logger *slog.Logger
	// StoreError counts a failed Postgres operation by its name (stats,
	// stats_purge); as PurgerConfig.StoreError. Default: counts nothing.
	StoreError func(op string)
	// Interval is how often the counts gathered are written. Default
	// DefaultStatsInterval (5s).
	Interval time.Duration
	// Keep is how long the statistics of a minute are kept. Default
	// StatsKeep (two days).
	Keep time.Duration
}

const (
	// statsMaxPending bounds the tenant minutes held in memory while
	// Postgres refuses the writes: about 6 MB, twenty minutes of a thousand
	// tenants sending. Beyond it the counts of failed writes are dropped.
	statsMaxPending = 20_000
	// statsPurgeEvery is how often the leader deletes old statistics, and
	// statsPurgeBatch the most minutes one statement deletes; a full batch
	// is followed by another at the next flush.
	statsPurgeEvery = time.Minute
	statsPurgeBatch = 10_000
	// statsWriteTimeout bounds one write, the last one at stop included.
	statsWriteTimeout = 10 * time.Second
)

// statsKey is a tenant's minute, in minutes since the Unix epoch.
type statsKey struct {
	tenant uuid.UUID
	minute int64
}

// StatsRecorder gathers what every attempt did, per tenant and minute, in
// memory, and adds it to Postgres every Interval in one statement, for
// GET /v1/stats: the attempts' own write carries nothing more, however many
// tenants send. It also deletes the statistics past Keep when Leader says so.
//
// The dispatcher's sender counts an attempt as it hands it to the attempt
// recorder, so one whose write later finds its claim lost still counts: the
// receiver got it. The price of no write per attempt is that a node killed
// outright loses the counts of its last Interval; the statistics are a
// view, the attempts table the record.
type StatsRecorder struct {
	cfg StatsConfig

	mu      sync.Mutex
	pending map[statsKey]*model.MinuteStats
	// nextPurge is when the leader purges next.
	nextPurge time.Time
}

// NewStatsRecorder returns a StatsRecorder; it counts at once, and writes
// once Run.
func NewStatsRecorder(cfg StatsConfig) *StatsRecorder {
	if cfg.Leader == nil {
		cfg.Leader = func() bool { return false }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StoreError == nil {
		cfg.StoreError = func(string) {}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultStatsInterval
	}
	if cfg.Keep <= 0 {
		cfg.Keep = StatsKeep
	}
	return &StatsRecorder{cfg: cfg, pending: make(map[statsKey]*model.MinuteStats)}
}

// Add counts one attempt of tenant's, started at started, lateness after it
// was due, that left its task in status. It allocates only for a tenant's
// first attempt of a minute.
func (r *StatsRecorder) Add(tenant uuid.UUID, started time.Time, status model.TaskStatus, lateness time.Duration) {
	key := statsKey{tenant: tenant, minute: minuteOf(started)}
	r.mu.Lock()
	m := r.pending[key]
	if m == nil {
		m = &model.MinuteStats{}
		r.pending[key] = m
	}
	m.Add(status, lateness)
	r.mu.Unlock()
}

// minuteOf is the minute t falls in, in minutes since the Unix epoch.
func minuteOf(t time.Time) int64 { return t.Truncate(time.Minute).Unix() / 60 }

// Run writes the counts every Interval until ctx ends, then once more for
// the attempts made since: its caller ends ctx once no attempt is left to
// count (the dispatcher, once its senders have returned).
func (r *StatsRecorder) Run(ctx context.Context) {
	t := r.cfg.Clock.NewTimer(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsWriteTimeout)
			defer cancel()
			r.flush(last)
			return
		case <-t.C():
		}
		r.flush(ctx)
		r.purge(ctx)
		t.Reset(r.cfg.Interval)
	}
}

// flush writes the counts gathered since the last flush in one statement.
// Counts it fails to write are kept for the next, unless that would hold
// more than statsMaxPending tenant minutes in memory.
func (r *StatsRecorder) flush(ctx context.Context) {
	r.mu.Lock()
	taken := r.pending
	if len(taken) == 0 {
		r.mu.Unlock()
		return
	}
	r.pending = make(map[statsKey]*model.MinuteStats, len(taken))
	r.mu.Unlock()

	rows := make([]model.TenantMinuteStats, 0, len(taken))
	for k, m := range taken {
		m.Start = time.Unix(k.minute*60, 0).UTC()
		rows = append(rows, model.TenantMinuteStats{TenantID: k.tenant, MinuteStats: *m})
	}
	wctx, cancel := context.WithTimeout(ctx, statsWriteTimeout)
	err := r.cfg.Store.AddTaskStats(wctx, rows)
	cancel()
	if err == nil {
		return
	}
	r.cfg.StoreError("stats")
	// Kept for the next flush. A write that timed out here after Postgres
	// committed it is counted twice: statistics are for charts, and losing
	// every failed flush would be the worse error of the two.
	dropped := 0
	r.mu.Lock()
	for k, m := range taken {
		if cur := r.pending[k]; cur != nil {
			cur.Merge(m)
		} else if len(r.pending) < statsMaxPending {
			r.pending[k] = m
		} else {
			dropped++
		}
	}
	r.mu.Unlock()
	if dropped > 0 {
		r.cfg.Logger.Error("writing delivery statistics failed; the oldest counts no longer fit in memory and are dropped",
			"err", err, "dropped_tenant_minutes", dropped)
		return
	}
	r.cfg.Logger.Warn("writing delivery statistics failed; keeping the counts for the next write", "err", err, "retry_in", r.cfg.Interval)
}

// purge deletes statistics past Keep, when this node is the leader and it
// is time.
func (r *StatsRecorder) purge(ctx context.Context) {
	now := r.cfg.Clock.Now()
	if now.Before(r.nextPurge) || !r.cfg.Leader() {
		return
	}
	n, err := r.cfg.Store.PurgeTaskStats(ctx, now.Add(-r.cfg.Keep), statsPurgeBatch)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			r.cfg.StoreError("stats_purge")
			r.cfg.Logger.Warn("purging old delivery statistics failed; will retry", "err", err)
		}
		r.nextPurge = now.Add(statsPurgeEvery)
	case n >= statsPurgeBatch:
		r.nextPurge = now
	default:
		r.nextPurge = now.Add(statsPurgeEvery)
	}
}
