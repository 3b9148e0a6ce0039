package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
)

// fireOnceStore takes fire-once claims in Redis.
type fireOnceStore interface {
	ClaimAttempts(ctx context.Context, claims []model.AttemptClaim) ([]bool, error)
}

// fireOnceConfig configures newFireOnce. Every field is required unless it
// says otherwise.
type fireOnceConfig struct {
	// Redis holds the fire-once claims. Nil: Postgres alone decides.
	Redis fireOnceStore
	// Down skips Redis for a while after it failed.
	Down        *failopen.Window
	LeaseMargin time.Duration
	Logger      *slog.Logger
	Metrics     *metrics
	// Defer gives back the claims another sender holds.
	Defer func(claims []*model.ClaimedTask, until func(i int) time.Time)
	Clock clock.Clock
}

// fireOnce is the second lock on an attempt, in Redis: when it is
// unreachable, the Postgres claim alone decides.
type fireOnce struct {
	cfg fireOnceConfig
}

func newFireOnce(cfg fireOnceConfig) *fireOnce { return &fireOnce{cfg: cfg} }

// claim takes the Redis fire-once claims of freshly claimed attempts and
// returns those this node may send.
func (f *fireOnce) claim(ctx context.Context, claims []*model.ClaimedTask) []*model.ClaimedTask {
	if f.cfg.Redis == nil || len(claims) == 0 {
		return claims
	}
	if f.cfg.Down.Skipping() {
		// Redis failed a moment ago: do not make every claim wait for its
		// timeouts while it is away.
		return claims
	}
	req := make([]model.AttemptClaim, len(claims))
	for i, c := range claims {
		req[i] = model.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken, TTL: c.Timeout + 2*f.cfg.LeaseMargin}
	}
	held, err := f.cfg.Redis.ClaimAttempts(ctx, req)
	if err != nil {
		f.cfg.Metrics.redisErrors.Inc()
		f.cfg.Metrics.redisDegraded.Set(1)
		f.cfg.Down.Failed()
		f.cfg.Logger.Warn("fire-once claims in Redis failed; relying on Postgres alone for a while", "tasks", len(claims), "err", err, "retry_in", f.cfg.Down.Skip())
		return claims
	}
	f.cfg.Metrics.redisDegraded.Set(0)
	mine := claims[:0:0]
	var theirs []*model.ClaimedTask
	for i, c := range claims {
		if held[i] {
			mine = append(mine, c)
		} else {
			theirs = append(theirs, c)
		}
	}
	if len(theirs) > 0 {
		// Another sender holds these very attempts: a node whose lease
		// expired is still sending them. Wait for its claim to lapse.
		f.cfg.Metrics.claimConflicts.Add(float64(len(theirs)))
		until := f.cfg.Clock.Now().Add(theirs[0].Timeout + 2*f.cfg.LeaseMargin)
		f.cfg.Defer(theirs, func(int) time.Time { return until })
	}
	return mine
}
