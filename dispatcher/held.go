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

// noneHeld is the held tenants of a part built without the set.
func noneHeld() []uuid.UUID { return nil }

// heldStore is what the held tenants' set needs of Postgres.
type heldStore interface {
	InactiveTenants(ctx context.Context) (map[uuid.UUID]model.TenantStatus, error)
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
	// Released is called when tenants leave the set (resumed): their tasks
	// that fell due while held were dropped from the wheel, and must be
	// read again.
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
}

func newHeldTenants(cfg heldConfig) *heldTenants {
	h := &heldTenants{cfg: cfg, poke: make(chan struct{}, 1)}
	h.set.Store(&heldSet{of: map[uuid.UUID]struct{}{}})
	return h
}

// ids are the held tenants, for ClaimTasks; never nil.
func (h *heldTenants) ids() []uuid.UUID { return h.set.Load().ids }

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
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Metrics.storeErrors.WithLabelValues("held_tenants").Inc()
			h.cfg.Logger.Warn("reading suspended and deleted tenants failed; will retry", "err", err)
		}
		return false
	}
	next := &heldSet{ids: make([]uuid.UUID, 0, len(statuses)), of: make(map[uuid.UUID]struct{}, len(statuses))}
	for id := range statuses {
		next.ids = append(next.ids, id)
		next.of[id] = struct{}{}
	}
	slices.SortFunc(next.ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	prev := h.set.Swap(next)
	released := false
	for id := range prev.of {
		if _, still := next.of[id]; !still {
			released = true
			h.cfg.Logger.Info("tenant resumed: sending its due tasks", "tenant", id)
		}
	}
	if released {
		h.cfg.Released()
	}
	return true
}
