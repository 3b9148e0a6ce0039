package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// deferStore is what giving claims back needs of Postgres.
type deferStore interface {
	DeferClaims(ctx context.Context, claims []model.DeferredClaim) error
}

// deferrerConfig configures newDeferrer. Every field is required unless it
// says otherwise.
type deferrerConfig struct {
	Store deferStore
	// FireOnce frees the claims' Redis fire-once keys. Nil without Redis.
	FireOnce fireOnceReleaser
	Logger   *slog.Logger
	Metrics  *metrics
	// Settle returns each claim's share of the claim budget.
	Settle func(id uuid.UUID)
	// Schedule puts each claim back in the wheel at its new time.
	Schedule func(id uuid.UUID, at time.Time)
	// Stopping reports that the dispatcher is stopping: claims given back
	// then are left to the next owner rather than armed here.
	Stopping func() bool
	// Expire, when set, ends a claim whose task would come due again at or
	// after its expiry (expiry.go) instead of giving it back; Clock is
	// then required, to tell. Not while stopping: the next owner's claim
	// ends such a task as surely, and the recorders may be gone.
	Expire func(c *model.ClaimedTask, now time.Time)
	Clock  clock.Clock
}

// deferrer gives claims back unsent: the one way every part hands back what
// it will not send (shutdown, fire-once conflicts, rate and concurrency
// limits, busy targets, open breakers). No attempt is spent. A claim whose
// task would come back only at or past its expiry ends expired instead.
//
// Senders give claims back one at a time (a target with no slot soon, an
// open breaker, a fence), often hundreds at once as a burst meets a busy
// target: each a transaction of its own, they took a pool connection
// apiece, and the recorders, waiting for one, held the claim budget (the
// first second of 100,000 tasks due at once went out at 1,400/s against
// 6,900 for the seconds after). So the calls gather: the first writes what
// it was given, and whatever other calls bring meanwhile is written
// together by that same caller once its write is done, before it returns.
// A call that finds a write in progress returns at once; its claims reach
// Postgres with the next write. A caller writes at most writerRounds times:
// it may be the claimer, which must not be kept writing others' claims for
// as long as they keep coming; what is left goes on, written by a
// goroutine of the deferrer's own, which wait waits for.
type deferrer struct {
	cfg deferrerConfig

	mu sync.Mutex
	// writing is set while a caller or the goroutine writes; claims and
	// until gather what others gave back meanwhile.
	writing bool
	claims  []*model.ClaimedTask
	until   []time.Time
	// handedOn counts the goroutines writing on for a caller.
	handedOn sync.WaitGroup
}

// writerRounds is how many statements a caller writes before it hands the
// claims still gathering to a goroutine: its own and what gathered during
// it.
const writerRounds = 2

func newDeferrer(cfg deferrerConfig) *deferrer { return &deferrer{cfg: cfg} }

// asDue keeps a deferred claim due as it was.
func asDue(int) time.Time { return time.Time{} }

// Defer gives claims back, each to wait until(i) for claims[i] or its due
// time if later (the zero time: due as it was), together with those other
// callers give back meanwhile.
func (d *deferrer) Defer(claims []*model.ClaimedTask, until func(i int) time.Time) {
	if len(claims) == 0 {
		return
	}
	d.mu.Lock()
	for i, c := range claims {
		d.claims = append(d.claims, c)
		d.until = append(d.until, until(i))
	}
	if d.writing {
		d.mu.Unlock()
		return
	}
	d.writing = true
	for round := 0; len(d.claims) > 0; round++ {
		if round == writerRounds {
			d.handedOn.Add(1)
			go func() {
				defer d.handedOn.Done()
				d.mu.Lock()
				d.writeGathered()
			}()
			d.mu.Unlock()
			return
		}
		d.writeNext()
	}
	d.writing = false
	d.mu.Unlock()
}

// writeGathered writes until nothing is left gathering, with d.mu held on
// entry, and releases it.
func (d *deferrer) writeGathered() {
	for len(d.claims) > 0 {
		d.writeNext()
	}
	d.writing = false
	d.mu.Unlock()
}

// writeNext writes what gathered, with d.mu held, released meanwhile.
func (d *deferrer) writeNext() {
	claims, times := d.claims, d.until
	d.claims, d.until = nil, nil
	d.mu.Unlock()
	d.write(claims, func(i int) time.Time { return times[i] })
	d.mu.Lock()
}

// wait returns once the claims given back so far are written.
func (d *deferrer) wait() { d.handedOn.Wait() }

// write gives claims back in one statement.
func (d *deferrer) write(claims []*model.ClaimedTask, until func(i int) time.Time) {
	if d.cfg.Expire != nil && len(claims) > 0 && !d.cfg.Stopping() {
		claims, until = expireOrDefer(claims, until, d.cfg.Clock.Now(), d.cfg.Expire)
	}
	if len(claims) == 0 {
		return
	}
	items := make([]model.DeferredClaim, len(claims))
	for i, c := range claims {
		items[i] = model.DeferredClaim{ID: c.ID, Token: c.ClaimToken, NotBefore: until(i)}
		d.cfg.Settle(c.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.cfg.FireOnce != nil {
		// Let whoever sends these attempts take them in Redis too (a
		// no-op for claims that another sender held all along).
		release := make([]model.AttemptClaim, len(claims))
		for i, c := range claims {
			release[i] = model.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken}
		}
		if err := d.cfg.FireOnce.ReleaseAttempts(ctx, release); err != nil {
			d.cfg.Metrics.redisErrors.Inc()
			d.cfg.Logger.Warn("releasing fire-once claims failed; they expire by themselves", "tasks", len(claims), "err", err)
		}
	}
	if err := d.cfg.Store.DeferClaims(ctx, items); err != nil {
		d.cfg.Metrics.storeErrors.WithLabelValues("defer").Inc()
		d.cfg.Logger.Error("giving claims back failed; their leases will expire and the sweep will recover them", "tasks", len(claims), "err", err)
	}
	if !d.cfg.Stopping() {
		// Back in the wheel here, unless the node is stopping: then the next
		// owner loads them.
		for i, c := range claims {
			at := items[i].NotBefore
			if c.NextAttemptAt != nil && c.NextAttemptAt.After(at) {
				at = *c.NextAttemptAt
			}
			d.cfg.Schedule(c.ID, at)
		}
	}
}
