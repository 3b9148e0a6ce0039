package dispatcher

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// membershipStore is what ownership needs of Postgres.
type membershipStore interface {
	Heartbeat(ctx context.Context, nodeID uuid.UUID, name string, ttl time.Duration) (store.Membership, error)
	StaleClaims(ctx context.Context, partitions []int16, limit int) ([]store.RecoveredClaim, error)
	RecoverClaims(ctx context.Context, partitions []int16, limit int) ([]store.RecoveredClaim, error)
}

// fireOnceReleaser frees Redis fire-once claims.
type fireOnceReleaser interface {
	ReleaseAttempts(ctx context.Context, claims []store.AttemptClaim) error
}

// ownershipConfig configures newOwnership. Every field is required unless
// it says otherwise.
type ownershipConfig struct {
	Store membershipStore
	// FireOnce frees the dead owners' Redis claims. Nil without Redis.
	FireOnce          fireOnceReleaser
	NodeID            uuid.UUID
	NodeName          string
	NodeTTL           time.Duration
	HeartbeatInterval time.Duration
	// NudgeGap is the least time between the start of one heartbeat and
	// that of an early one another node's membership change asks for
	// (heartbeatNudgeGap in a Dispatcher).
	NudgeGap time.Duration
	Clock    clock.Clock
	Logger   *slog.Logger
	Metrics  *metrics
	// Gained is told of the partitions this node just took over, to load
	// them from the beginning of time. It must not block.
	Gained func(partitions []int16)
	// Schedule arms the tasks recovered from dead owners.
	Schedule func(id uuid.UUID, at time.Time)
	// RecoverInterval is how often claims are checked for a lapsed lease
	// (a send that hung) when membership did not change; a heartbeat that
	// gains partitions or sees the set of live nodes change checks at once,
	// for a dead node's claims, and so does every heartbeat after a check
	// that failed or found a full page (SweepInterval in a Dispatcher).
	RecoverInterval time.Duration
}

// ownedSet is the partitions this node holds a lease on, as of one
// heartbeat. It is never modified once published, so readers take it
// without a lock.
type ownedSet struct {
	has  [model.Partitions]bool
	list []int16
}

// ownership keeps this node registered and its partition leases renewed,
// and recovers the claims of nodes that died in its partitions. It alone
// writes the owned set; everyone else reads the latest snapshot.
type ownership struct {
	cfg   ownershipConfig
	owned atomic.Pointer[ownedSet]
	// nudged asks for a heartbeat now. One slot: a burst of asks, or asks
	// made while a heartbeat runs, make one heartbeat after the current one.
	nudged chan struct{}
}

// heartbeatNudgeGap bounds how often membership changes of other nodes make
// this one heartbeat: a burst of them (every node above its share releasing
// partitions after a join) costs one heartbeat per gap at most, and the gap
// is well below the HeartbeatInterval it shortens.
const heartbeatNudgeGap = 10 * time.Millisecond

func newOwnership(cfg ownershipConfig) *ownership {
	o := &ownership{cfg: cfg, nudged: make(chan struct{}, 1)}
	o.owned.Store(&ownedSet{})
	return o
}

// heard is told of each membership change announced in Postgres. Another
// node's join, release or leave changes what this node may hold, so it
// heartbeats at once rather than at its timer; its own changes tell it
// nothing new.
func (o *ownership) heard(c store.MembershipChange) {
	if c.Node == o.cfg.NodeID {
		return
	}
	o.nudge()
}

// nudge asks for a heartbeat now (at most NudgeGap after the last one
// began). It never blocks.
func (o *ownership) nudge() {
	select {
	case o.nudged <- struct{}{}:
	default:
	}
}

// Run heartbeats every HeartbeatInterval until ctx ends: it learns which
// partitions it owns, has newly gained partitions loaded from the start, and
// hands back the claims of nodes that died in its partitions, so their
// tasks move here within about NodeTTL of the death. A nudge brings the
// next heartbeat forward to NudgeGap after the last one began, so that
// partitions move on a join or a clean leave as soon as the other nodes
// announce it; the timer then runs from that heartbeat. ready is closed
// after the first heartbeat, successful or not.
func (o *ownership) Run(ctx context.Context, ready chan<- struct{}) {
	t := o.cfg.Clock.NewTimer(0)
	defer t.Stop()
	// next is when t fires; began, when the last heartbeat began.
	var lastOK, began, recovered time.Time
	// live are the live nodes at the last heartbeat; recoverPending is set
	// while stale claims may be left to hand back.
	var live []uuid.UUID
	recoverPending := false
	next := o.cfg.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.nudged:
			if at := began.Add(o.cfg.NudgeGap); at.Before(next) {
				next = at
				t.Reset(at.Sub(o.cfg.Clock.Now()))
			}
			continue
		case <-t.C():
		}
		began = o.cfg.Clock.Now()
		m, err := o.cfg.Store.Heartbeat(ctx, o.cfg.NodeID, o.cfg.NodeName, o.cfg.NodeTTL)
		now := o.cfg.Clock.Now()
		switch {
		case err == nil:
			lastOK = now
			gained := o.set(m.Owned)
			o.cfg.Metrics.liveNodes.Set(float64(m.LiveNodes))
			// The scan for stale claims reads every claim in flight in our
			// partitions, which at thousands of deliveries a second cost
			// more than the heartbeat itself: it runs when a node may have
			// died (partitions moved here, or the live nodes changed) and
			// otherwise every RecoverInterval, for hung sends, whose leases
			// last their timeout and LeaseMargin anyway.
			if gained || recoverPending || !slices.Equal(live, m.Live) || now.Sub(recovered) >= o.cfg.RecoverInterval {
				recovered = now
				recoverPending = !o.recoverClaims(ctx)
			}
			live = m.Live
		case ctx.Err() != nil:
			return
		default:
			o.cfg.Metrics.storeErrors.WithLabelValues("heartbeat").Inc()
			o.cfg.Logger.Warn("heartbeat failed", "err", err)
			// Our leases run out at NodeTTL: past that, others may own our
			// partitions, so stop claiming in them.
			if now.Sub(lastOK) >= o.cfg.NodeTTL {
				o.set(nil)
			}
		}
		if ready != nil {
			close(ready)
			ready = nil
		}
		next = o.cfg.Clock.Now().Add(o.cfg.HeartbeatInterval)
		t.Reset(o.cfg.HeartbeatInterval)
	}
}

// set publishes the partitions this node owns and has the ones it just
// gained loaded from the beginning of time. It reports whether it gained
// any.
func (o *ownership) set(owned []int16) bool {
	prev := o.owned.Load()
	next := &ownedSet{list: slices.Clone(owned)}
	var gained []int16
	for _, p := range owned {
		next.has[p] = true
		if !prev.has[p] {
			gained = append(gained, p)
		}
	}
	o.owned.Store(next)
	if len(gained) > 0 || len(owned) != len(prev.list) {
		o.cfg.Metrics.ownedPartitions.Set(float64(len(owned)))
		o.cfg.Logger.Info("partitions changed", "owned", len(owned), "gained", len(gained))
	}
	if len(gained) > 0 {
		o.cfg.Gained(gained)
	}
	return len(gained) > 0
}

// partitions returns the partitions this node owns. The slice is shared:
// callers must not modify it.
func (o *ownership) partitions() []int16 { return o.owned.Load().list }

// owns reports whether the task belongs to a partition this node owns.
func (o *ownership) owns(id uuid.UUID) bool { return o.owned.Load().has[model.PartitionOf(id)] }

// ownsPartition reports whether this node holds partition p's lease.
func (o *ownership) ownsPartition(p int16) bool { return o.owned.Load().has[p] }

// recoverClaims hands back the claims that dead or hung senders hold in our
// partitions, frees their fire-once claims in Redis (the sender is gone;
// the same attempt is sent again from here) and arms their timers. It
// reports whether it is done: false when it failed, handed back a full
// page, or handed back fewer claims than it listed. RecoverClaims passes
// over a row another statement holds, and one often does: the loader lists
// a dead node's claimed tasks among the due ones (store.ListDue), and a
// claimer locks them before passing them over. Looked for again at the next
// heartbeat, they are not left to wait for the next RecoverInterval.
func (o *ownership) recoverClaims(ctx context.Context) (done bool) {
	owned := o.partitions()
	if len(owned) == 0 {
		return true
	}
	// Free the dead owners' fire-once claims before taking their tasks
	// back: the other way round, a node dying between the two steps would
	// leave keys that refuse every new claim of those attempts until they
	// expire.
	stale, err := o.cfg.Store.StaleClaims(ctx, owned, loadPage)
	if err != nil {
		if ctx.Err() == nil {
			o.cfg.Metrics.storeErrors.WithLabelValues("recover").Inc()
			o.cfg.Logger.Error("listing stale claims failed", "err", err)
		}
		return false
	}
	if len(stale) == 0 {
		return true
	}
	o.releaseFireOnce(ctx, stale)
	recovered, err := o.cfg.Store.RecoverClaims(ctx, owned, loadPage)
	if err != nil {
		if ctx.Err() == nil {
			o.cfg.Metrics.storeErrors.WithLabelValues("recover").Inc()
			o.cfg.Logger.Error("recovering claims failed", "err", err)
		}
		return false
	}
	if len(recovered) == 0 {
		return false
	}
	o.cfg.Metrics.recovered.Add(float64(len(recovered)))
	o.cfg.Logger.Warn("recovered tasks whose sender died or hung mid-attempt", "tasks", len(recovered))
	// Claims that went stale since the listing above.
	o.releaseFireOnce(ctx, recovered)
	for _, c := range recovered {
		o.cfg.Schedule(c.ID, c.At)
	}
	return len(recovered) < loadPage && len(recovered) >= len(stale)
}

// releaseFireOnce frees the Redis fire-once claims of claims whose owner is
// gone (a no-op for any key another sender has since taken).
func (o *ownership) releaseFireOnce(ctx context.Context, claims []store.RecoveredClaim) {
	if o.cfg.FireOnce == nil || len(claims) == 0 {
		return
	}
	release := make([]store.AttemptClaim, len(claims))
	for i, c := range claims {
		release[i] = store.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.Token}
	}
	if err := o.cfg.FireOnce.ReleaseAttempts(ctx, release); err != nil {
		o.cfg.Metrics.redisErrors.Inc()
		o.cfg.Logger.Warn("releasing the fire-once claims of recovered tasks failed", "err", err)
	}
}
