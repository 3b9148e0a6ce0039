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
)

// membershipStore is what ownership needs of Postgres.
type membershipStore interface {
	Heartbeat(ctx context.Context, nodeID uuid.UUID, name string, ttl time.Duration) (model.Membership, error)
	StaleClaims(ctx context.Context, partitions []int16, limit int) ([]model.RecoveredClaim, error)
	RecoverClaims(ctx context.Context, partitions []int16, limit int) ([]model.RecoveredClaim, error)
	SucceedDeadNamesakes(ctx context.Context, nodeID uuid.UUID, name string) ([]uuid.UUID, error)
	RecordAttempts(ctx context.Context, results []model.AttemptResult) ([]error, error)
	AnnounceDue(ctx context.Context, due map[uuid.UUID]time.Time) error
}

// fireOnceReleaser frees Redis fire-once claims.
type fireOnceReleaser interface {
	ReleaseAttempts(ctx context.Context, claims []model.AttemptClaim) error
}

// ownershipConfig configures newOwnership. Every field is required unless
// it says otherwise.
type ownershipConfig struct {
	Store membershipStore
	// FireOnce frees the dead owners' Redis claims. Nil without Redis.
	FireOnce fireOnceReleaser
	// Journal has the answers the dead owners' receivers gave: those claims
	// are recorded delivered rather than sent again. Nil without Redis.
	Journal  *answerJournal
	NodeID   uuid.UUID
	NodeName string
	// SucceedNamesakes: at start, end the leases of dead nodes registered
	// under NodeName (Config.SucceedNamesakes).
	SucceedNamesakes  bool
	NodeTTL           time.Duration
	HeartbeatInterval time.Duration
	// FenceMargin is how long before its lease runs out, by this node's
	// monotonic clock, the node stops acting on it (leaseValid): room for a
	// clock that runs a little slower than Postgres's, and for the moment
	// between the check and the request leaving.
	FenceMargin time.Duration
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
	lease atomic.Pointer[nodeLease]
	// nudged asks for a heartbeat now. One slot: a burst of asks, or asks
	// made while a heartbeat runs, make one heartbeat after the current one.
	nudged chan struct{}
	// recoverAsked asks the recovery goroutine for a look at stale claims;
	// recoverPending is set while one may be left to hand back.
	recoverAsked   chan struct{}
	recoverPending atomic.Bool
}

// nodeLease is what this node can prove of its own registration and
// partition leases, by its monotonic clock. Postgres set them to expire at
// its now() plus NodeTTL, now() being the heartbeat transaction's start,
// which came after the instant the heartbeat began here: so they hold at
// least until began plus NodeTTL. Until then no other node can take our
// partitions or see us dead and hand our claims back.
type nodeLease struct {
	// epoch changes whenever a heartbeat succeeds after the lease before it
	// may have run out (and at the first): what was claimed under an older
	// epoch may have been handed back and sent by another node meanwhile,
	// even though the node holds a lease again.
	epoch uint64
	// until is when the lease runs out (the zero time: none held).
	until time.Time
}

// renewed records a heartbeat that began at began and succeeded at now. Our
// registration stayed unbroken only if the previous lease still held when
// the heartbeat's transaction started; all we know is that it started
// before now, so the epoch changes unless now is within the previous lease.
func (o *ownership) renewed(began, now time.Time) {
	prev := o.lease.Load()
	next := &nodeLease{epoch: prev.epoch, until: began.Add(o.cfg.NodeTTL)}
	if prev.until.IsZero() || !now.Before(prev.until) {
		next.epoch++
		if !prev.until.IsZero() {
			o.cfg.Logger.Warn("this node's lease ran out before its heartbeat renewed it: claims taken before are given back unsent",
				"late_by", now.Sub(prev.until))
		}
	}
	o.lease.Store(next)
}

// leaseEpoch is the epoch a claim taken now is taken under.
func (o *ownership) leaseEpoch() uint64 { return o.lease.Load().epoch }

// leaseValid reports whether this node may still act, at now, on what it
// took under epoch: the epoch is still current and the lease holds for
// FenceMargin more.
func (o *ownership) leaseValid(epoch uint64, now time.Time) bool {
	l := o.lease.Load()
	return l.epoch == epoch && !l.until.IsZero() && now.Before(l.until.Add(-o.cfg.FenceMargin))
}

// heartbeatNudgeGap bounds how often membership changes of other nodes make
// this one heartbeat: a burst of them (every node above its share releasing
// partitions after a join) costs one heartbeat per gap at most, and the gap
// is well below the HeartbeatInterval it shortens.
const heartbeatNudgeGap = 10 * time.Millisecond

func newOwnership(cfg ownershipConfig) *ownership {
	o := &ownership{cfg: cfg, nudged: make(chan struct{}, 1), recoverAsked: make(chan struct{}, 1)}
	o.owned.Store(&ownedSet{})
	o.lease.Store(&nodeLease{})
	return o
}

// heard is told of each membership change announced in Postgres. Another
// node's join, release or leave changes what this node may hold, so it
// heartbeats at once rather than at its timer; its own changes tell it
// nothing new.
func (o *ownership) heard(c model.MembershipChange) {
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
// has the claims of nodes that died in its partitions handed back, so their
// tasks move here within about NodeTTL of the death. A nudge brings the
// next heartbeat forward to NudgeGap after the last one began, so that
// partitions move on a join or a clean leave as soon as the other nodes
// announce it; the timer then runs from that heartbeat. ready is closed
// after the first heartbeat, successful or not.
//
// The heartbeat runs on this goroutine alone and the look for stale claims
// on another (after the first, which runs before ready): that look reads
// every claim in flight, and waiting for it made heartbeats late enough
// under load for the node to lose its partitions.
func (o *ownership) Run(ctx context.Context, ready chan<- struct{}) {
	t := o.cfg.Clock.NewTimer(0)
	defer t.Stop()
	recovering := make(chan struct{})
	started := false
	defer func() {
		if started {
			<-recovering
		}
	}()
	// next is when t fires; began, when the last heartbeat began;
	// lastBegan, when the last successful one began.
	var lastOK, began, lastBegan, recovered time.Time
	// live are the live nodes at the last heartbeat.
	var live []uuid.UUID
	if o.cfg.SucceedNamesakes {
		o.succeedNamesakes(ctx)
	}
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
		// Past NodeTTL the lease it would renew is gone anyway, and a
		// heartbeat stuck on a dead connection must not stop the next.
		hbCtx, cancel := context.WithTimeout(ctx, o.cfg.NodeTTL)
		m, err := o.cfg.Store.Heartbeat(hbCtx, o.cfg.NodeID, o.cfg.NodeName, o.cfg.NodeTTL)
		cancel()
		now := o.cfg.Clock.Now()
		switch {
		case err == nil:
			if !lastBegan.IsZero() {
				renewal := now.Sub(lastBegan)
				o.cfg.Metrics.leaseRenewal.Observe(renewal.Seconds())
				if renewal > o.cfg.NodeTTL/2 {
					o.cfg.Logger.Warn("heartbeat late: a renewal took over half the node TTL",
						"renewal", renewal, "node_ttl", o.cfg.NodeTTL)
				}
			}
			o.renewed(began, now)
			lastOK, lastBegan = now, began
			gained := o.set(m.Owned)
			o.cfg.Metrics.liveNodes.Set(float64(m.LiveNodes))
			// The scan for stale claims reads every claim in flight in our
			// partitions, which at thousands of deliveries a second cost
			// more than the heartbeat itself: it runs when a node may have
			// died (partitions moved here, or the live nodes changed) and
			// otherwise every RecoverInterval, for hung sends, whose leases
			// last their timeout and LeaseMargin anyway.
			if gained || o.recoverPending.Load() || !slices.Equal(live, m.Live) || now.Sub(recovered) >= o.cfg.RecoverInterval {
				recovered = now
				switch {
				case !started:
					// Before ready: the loader's first pass then sees what
					// this hands back.
					o.recoverPending.Store(!o.recoverClaims(ctx))
					started = true
					go func() { defer close(recovering); o.recoverLoop(ctx) }()
				default:
					o.askRecover()
				}
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

// succeedNamesakes ends the leases of this node's dead predecessors under
// its name, so that its first heartbeat takes their partitions and hands
// their claims back. Failing costs only time: their leases run out anyway.
func (o *ownership) succeedNamesakes(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.NodeTTL)
	defer cancel()
	dead, err := o.cfg.Store.SucceedDeadNamesakes(ctx, o.cfg.NodeID, o.cfg.NodeName)
	switch {
	case err != nil:
		o.cfg.Metrics.storeErrors.WithLabelValues("heartbeat").Inc()
		o.cfg.Logger.Warn("ending a dead predecessor's leases failed; its partitions move when they run out", "err", err)
	case len(dead) > 0:
		o.cfg.Logger.Info("took the place of a predecessor that died", "name", o.cfg.NodeName, "nodes", dead)
	}
}

// askRecover asks the recovery goroutine for a look; it never blocks.
func (o *ownership) askRecover() {
	select {
	case o.recoverAsked <- struct{}{}:
	default:
	}
}

// recoverLoop looks for stale claims whenever a heartbeat asks, until ctx
// ends.
func (o *ownership) recoverLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.recoverAsked:
			o.recoverPending.Store(!o.recoverClaims(ctx))
		}
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
	answered := o.recordAnswered(ctx, stale)
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
	var due map[uuid.UUID]time.Time
	for _, c := range recovered {
		o.cfg.Schedule(c.ID, c.At)
		if !o.owns(c.ID) {
			if due == nil {
				due = make(map[uuid.UUID]time.Time)
			}
			due[c.ID] = c.At
		}
	}
	// A partition may have moved on between the scan and here (a node
	// joined, and this one handed partitions over), and its new owner may
	// have loaded it while these tasks were still claimed, passing over
	// them: they are announced, for it to arm them, which unannounced
	// waited for its sweep, 5 to 10 s. (Not those armed here: a second
	// timer makes a second claim, which waits on the first's row.)
	if err := o.cfg.Store.AnnounceDue(ctx, due); err != nil && ctx.Err() == nil {
		o.cfg.Logger.Warn("announcing recovered tasks failed; a partition's new owner finds them at its sweep", "tasks", len(due), "err", err)
	}
	return len(recovered) < loadPage && len(recovered) >= len(stale)-answered
}

// recordAnswered records delivered the stale claims whose receivers had
// answered 2xx before their sender stopped (the journal kept the answer),
// so that they are not sent again, and returns how many it recorded. The
// claim token fences each write: a claim its owner recorded meanwhile, or
// that another recovery took, is left as it is.
func (o *ownership) recordAnswered(ctx context.Context, stale []model.RecoveredClaim) int {
	results := o.cfg.Journal.answered(ctx, stale)
	if len(results) == 0 {
		return 0
	}
	errs, err := o.cfg.Store.RecordAttempts(ctx, results)
	if err != nil {
		if ctx.Err() == nil {
			o.cfg.Metrics.storeErrors.WithLabelValues("recover").Inc()
			o.cfg.Logger.Error("recording the answered claims of a stopped sender failed; they are sent again", "tasks", len(results), "err", err)
		}
		return 0
	}
	recorded := 0
	for _, err := range errs {
		if err == nil {
			recorded++
		}
	}
	if recorded > 0 {
		o.cfg.Metrics.recoveredAnswered.Add(float64(recorded))
		o.cfg.Logger.Warn("recorded delivered the claims of a stopped sender whose receivers had answered; not sent again", "tasks", recorded)
	}
	return recorded
}

// releaseFireOnce frees the Redis fire-once claims of claims whose owner is
// gone (a no-op for any key another sender has since taken).
func (o *ownership) releaseFireOnce(ctx context.Context, claims []model.RecoveredClaim) {
	if o.cfg.FireOnce == nil || len(claims) == 0 {
		return
	}
	release := make([]model.AttemptClaim, len(claims))
	for i, c := range claims {
		release[i] = model.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.Token}
	}
	if err := o.cfg.FireOnce.ReleaseAttempts(ctx, release); err != nil {
		o.cfg.Metrics.redisErrors.Inc()
		o.cfg.Logger.Warn("releasing the fire-once claims of recovered tasks failed", "err", err)
	}
}
