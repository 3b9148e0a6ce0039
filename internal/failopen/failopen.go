// Package failopen decides when a helper service (Redis) that failed is worth
// asking again. hookwheel's Redis work — fire-once claims, API and dispatch
// limits — is a second line behind Postgres, so when Redis fails every caller
// goes on without it; what they must not do is make each request wait for a
// dead Redis's timeout. A Window remembers the failure and tells callers to
// skip Redis until it has passed.
package failopen

import (
	"sync/atomic"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// DefaultSkip is how long callers go without Redis after it failed.
const DefaultSkip = 5 * time.Second

// Config configures a Window.
type Config struct {
	// Skip is how long after a failure Skipping reports true. Default
	// DefaultSkip.
	Skip time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Window is safe for concurrent use. The zero value is not usable; use New.
type Window struct {
	skip  time.Duration
	clock clock.Clock
	// downUntil is when the window ends, in Unix nanoseconds (0: never failed).
	downUntil atomic.Int64
}

// New returns a Window that has seen no failure.
func New(cfg Config) *Window {
	if cfg.Skip <= 0 {
		cfg.Skip = DefaultSkip
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Window{skip: cfg.Skip, clock: cfg.Clock}
}

// Skipping reports whether the service failed less than Skip ago: callers
// should go on without it.
func (w *Window) Skipping() bool {
	until := w.downUntil.Load()
	return until != 0 && w.clock.Now().UnixNano() < until
}

// Failed records a failure: Skipping reports true for the next Skip.
func (w *Window) Failed() {
	w.downUntil.Store(w.clock.Now().Add(w.skip).UnixNano())
}

// Skip is how long a failure is skipped for, for callers' log lines.
func (w *Window) Skip() time.Duration { return w.skip }
