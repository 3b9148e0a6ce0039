package tenants

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// UsageStore records when keys were last used. *store.DB is one.
type UsageStore interface {
	TouchAPIKeys(ctx context.Context, lastUsed map[string]time.Time) error
}

// UsageConfig configures a UsageRecorder.
type UsageConfig struct {
	// Store receives the batches. Required.
	Store UsageStore
	// Interval is how often the uses gathered are written. Default 5s:
	// last_used_at is at most that much behind.
	Interval time.Duration
	// Clock defaults to the real clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// UsageRecorder gathers API keys' uses in memory and writes each key's
// latest in one statement per interval: last_used_at costs no write on the
// request path, and a key used a thousand times a second is written once.
type UsageRecorder struct {
	cfg UsageConfig

	mu      sync.Mutex
	pending map[string]time.Time
}

// NewUsageRecorder returns a recorder; Run writes what it gathers.
func NewUsageRecorder(cfg UsageConfig) *UsageRecorder {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &UsageRecorder{cfg: cfg, pending: make(map[string]time.Time)}
}

// Used notes that keyID authenticated a call at at.
func (u *UsageRecorder) Used(keyID string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if at.After(u.pending[keyID]) {
		u.pending[keyID] = at
	}
}

// Run writes the gathered uses every Interval until ctx ends, then once more
// (with a short deadline of its own) so that a stopping node keeps its last
// uses.
func (u *UsageRecorder) Run(ctx context.Context) {
	timer := u.cfg.Clock.NewTimer(u.cfg.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			u.Flush(final)
			return
		case <-timer.C():
			u.Flush(ctx)
			timer.Reset(u.cfg.Interval)
		}
	}
}

// Flush writes the uses gathered so far. A failed write puts them back for
// the next one (unless a later use replaced them meanwhile).
func (u *UsageRecorder) Flush(ctx context.Context) {
	u.mu.Lock()
	batch := u.pending
	u.pending = make(map[string]time.Time, len(batch))
	u.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := u.cfg.Store.TouchAPIKeys(ctx, batch); err != nil {
		u.cfg.Logger.Warn("recording API key use failed; retrying with the next batch", "keys", len(batch), "err", err)
		u.mu.Lock()
		for id, at := range maps.All(batch) {
			if at.After(u.pending[id]) {
				u.pending[id] = at
			}
		}
		u.mu.Unlock()
	}
}
