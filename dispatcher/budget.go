package dispatcher

import (
	"sync"

	"github.com/google/uuid"
)

// claimBudget tracks the tasks that have left the wheel and are not settled
// yet, and bounds how many of them claimers may take.
type claimBudget struct {
	// units bounds the tasks taken by claimers and not yet settled: when
	// senders fall behind, claimers wait instead of claiming more work than
	// can be sent while its leases are young. A claimer puts a unit in per
	// task it takes; settling a task takes one out.
	units chan struct{}

	mu sync.Mutex
	// inflight counts, per task, the firings that have left the wheel and
	// are not settled yet (claimed and sent, or found not claimable), so the
	// sweep does not feed them in again.
	inflight map[uuid.UUID]int
}

// newClaimBudget returns a budget of max tasks.
func newClaimBudget(max int) *claimBudget {
	return &claimBudget{units: make(chan struct{}, max), inflight: make(map[uuid.UUID]int)}
}

// fired counts a firing of the task that left the wheel.
func (b *claimBudget) fired(id uuid.UUID) {
	b.mu.Lock()
	b.inflight[id]++
	b.mu.Unlock()
}

// inFlight reports whether a firing of the task is not settled yet.
func (b *claimBudget) inFlight(id uuid.UUID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight[id] > 0
}

// settle ends one firing of a task: its share of the claim budget comes
// back.
func (b *claimBudget) settle(id uuid.UUID) {
	b.mu.Lock()
	n, ok := b.inflight[id]
	switch {
	case !ok:
	case n <= 1:
		delete(b.inflight, id)
	default:
		b.inflight[id] = n - 1
	}
	b.mu.Unlock()
	if ok {
		select {
		case <-b.units:
		default:
		}
	}
}
