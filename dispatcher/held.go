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

// noneHeld is the held tenants and targets of a part built without the set.
func noneHeld() *model.Held { return nil }

// heldStore is what the held tenants' set needs of Postgres.
type heldStore interface {
	InactiveTenants(ctx context.Context) (map[uuid.UUID]model.TenantStatus, error)
	PausedTargets(ctx context.Context) ([]model.PausedTarget, error)
}

// heldConfig configures newHeldTenants. Every field is required.
type heldConfig struct {
	Store   heldStore
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Refresh is how often the set is read again unasked: the backstop
	// under a lost announcement.
	Refresh time.Duration
	// Released is called when tenants or targets leave the set (resumed):
	// their tasks that fell due while held were dropped from the wheel, and
	// must be read again.
	Released func()
}

// heldTenants is the set of tenants whose tasks the dispatcher holds:
// suspended ones and those being deleted. Their tasks are not claimed
// (ClaimTasks leaves them out), not sent (the sender gives back a claim
// taken before the tenant was held), and not swept; they stay waiting in
// Postgres, their times unchanged, and when a tenant is released the
// loader reads the due window again from the beginning, so that what fell
// due meanwhile goes out at once.
//
// The set lives in memory rather than in a join of the claim to the
// tenants' status: ClaimTasks is the hottest statement, and filtering on
// the tenant id it reads anyway costs nothing. The set is read when a
// tenant change is announced (store.TenantNotifyChannel, heard by the
// listener in the changing transaction's commit) and every Refresh besides.
// Few tenants are ever held, so a read is a few rows of a partial index.
//
// A tenant's paused targets (POST /v1/targets/pause, or hookwheel's pause
// of a failing target) are held the same way, in the same read, announced
// on the same channel: ClaimTasks and the sweep leave out a paused target's
// tasks of that tenant, the sender gives back a claim to it taken before
// the pause, and a resume reads the due window again. A resume then lets
// the backlog out at the target's own pace rather than all at once: its
// claims go through the tenant's MaxPerTarget send slots at that target
// (the claims beyond them parked, then given back as the target drains,
// drain.go), through the tenant's dispatch limits for the host if it set
// any, and through the target's circuit breaker, which, should the target
// still fail, defers the rest ReleasePace apart after each probe. Those
// gates already pace any backlog to one target (a tenant resumed, a
// breaker closing); a ramp of its own would add state to every node that
// those gates keep already.
type heldTenants struct {
	cfg heldConfig
	// set is replaced, never modified.
	set atomic.Pointer[heldSet]
	// poke asks for the set to be read again.
	poke chan struct{}
}

type heldSet struct {
	ids []uuid.UUID
	of  map[uuid.UUID]struct{}
	// held is what ClaimTasks and the sweep leave out: ids, and the
	// paused targets.
	held *model.Held
	// targets are the paused targets, by model.HeldTargetKey.
	targets map[string]struct{}
}

func newHeldTenants(cfg heldConfig) *heldTenants {
	h := &heldTenants{cfg: cfg, poke: make(chan struct{}, 1)}
	h.set.Store(&heldSet{of: map[uuid.UUID]struct{}{}, held: &model.Held{}, targets: map[string]struct{}{}})
	return h
}

// ids are the held tenants, for ClaimTasks; never nil.
func (h *heldTenants) ids() []uuid.UUID { return h.set.Load().ids }

// held is what claims and the sweep leave out; never nil.
func (h *heldTenants) held() *model.Held { return h.set.Load().held }

// pauses reports whether tenant paused the target key (targetKey).
func (h *heldTenants) pauses(tenant uuid.UUID, key string) bool {
	set := h.set.Load()
	if len(set.targets) == 0 {
		return false
	}
	_, ok := set.targets[model.HeldTargetKey(tenant, key)]
	return ok
}

// holds reports whether tenant's tasks are held.
func (h *heldTenants) holds(tenant uuid.UUID) bool {
	_, ok := h.set.Load().of[tenant]
	return ok
}

// changed asks for the set to be read again: a tenant changed, or changes
// may have gone unheard. It never blocks.
func (h *heldTenants) changed() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// Run reads the set, closes ready once it has (retrying until it can:
// nothing may be claimed before the set is known), then reads it again on
// every change announced and every Refresh, until ctx ends.
func (h *heldTenants) Run(ctx context.Context, ready chan<- struct{}) {
	backoff := 100 * time.Millisecond
	for !h.read(ctx) {
		t := h.cfg.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, h.cfg.Refresh)
	}
	close(ready)
	t := h.cfg.Clock.NewTimer(h.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.poke:
			t.Stop()
		case <-t.C():
		}
		h.read(ctx)
		t.Reset(h.cfg.Refresh)
	}
}

// read replaces the set by what Postgres has, and reports whether it could.
// A read begun after an announcement sees the change announced, so the
// last read always leaves the set right, whatever order reads and
// announcements came in.
func (h *heldTenants) read(ctx context.Context) bool {
	statuses, err := h.cfg.Store.InactiveTenants(ctx)
	var paused []model.PausedTarget
	if err == nil {
		paused, err = h.cfg.Store.PausedTargets(ctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Metrics.storeErrors.WithLabelValues("held_tenants").Inc()
			h.cfg.Logger.Warn("reading suspended and deleted tenants and paused targets failed; will retry", "err", err)
		}
		return false
	}
	next := &heldSet{ids: make([]uuid.UUID, 0, len(statuses)), of: make(map[uuid.UUID]struct{}, len(statuses))}
	for id := range statuses {
		next.ids = append(next.ids, id)
		next.of[id] = struct{}{}
	}
	slices.SortFunc(next.ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	next.held = &model.Held{Tenants: next.ids}
	next.targets = make(map[string]struct{}, len(paused))
	pausing := map[uuid.UUID]struct{}{}
	for _, p := range paused {
		key := model.HeldTargetKey(p.TenantID, p.Target)
		next.targets[key] = struct{}{}
		next.held.Targets = append(next.held.Targets, key)
		if _, ok := pausing[p.TenantID]; !ok {
			pausing[p.TenantID] = struct{}{}
			next.held.TargetTenants = append(next.held.TargetTenants, p.TenantID)
		}
	}
	prev := h.set.Swap(next)
	released := false
	for id := range prev.of {
		if _, still := next.of[id]; !still {
			released = true
			h.cfg.Logger.Info("tenant resumed: sending its due tasks", "tenant", id)
		}
	}
	for key := range prev.targets {
		if _, still := next.targets[key]; !still {
			released = true
			h.cfg.Logger.Info("target resumed: sending its due tasks", "target", key)
		}
	}
	if released {
		h.cfg.Released()
	}
	return true
}
