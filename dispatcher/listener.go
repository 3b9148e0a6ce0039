package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// listenerStore is what the listener needs of Postgres.
type listenerStore interface {
	Listen(ctx context.Context, ready func(), l model.Listeners) error
}

// listenerConfig configures newListener. Every field is required.
type listenerConfig struct {
	Store   listenerStore
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Due is told of a task another node stored inside the loaded window
	// (NOTIFY): it goes into the wheel if it belongs here.
	Due func(id uuid.UUID, at time.Time)
	// Membership is told of each membership change, this node's own
	// included.
	Membership func(model.MembershipChange)
	// Tenant is told of each tenant whose row changed (suspended, resumed,
	// deleted, its limits...).
	Tenant func(id uuid.UUID)
	// Listening is called each time the listener starts listening again:
	// whatever was announced while it was not is lost.
	Listening func()
}

// listener hears, on one Postgres connection, what other nodes announce:
// tasks they stored inside the loaded window, membership changes that
// move partitions, and tenant changes. It reconnects when the connection fails.
type listener struct {
	cfg listenerConfig
}

func newListener(cfg listenerConfig) *listener { return &listener{cfg: cfg} }

// Run listens until ctx ends, reconnecting with a backoff.
func (l *listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	handlers := model.Listeners{
		Due:        func(t model.DueTask) { l.cfg.Due(t.ID, t.At) },
		Membership: l.cfg.Membership,
		Tenant:     l.cfg.Tenant,
	}
	for ctx.Err() == nil {
		err := l.cfg.Store.Listen(ctx, func() {
			l.cfg.Listening()
			backoff = 100 * time.Millisecond
		}, handlers)
		if err == nil || ctx.Err() != nil {
			return
		}
		l.cfg.Metrics.storeErrors.WithLabelValues("listen").Inc()
		l.cfg.Logger.Warn("listening for announcements failed; reconnecting", "err", err, "in", backoff)
		t := l.cfg.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
