package api

import (
	"sync"

	"github.com/google/uuid"
)

// batchGate bounds the memory that batch calls (and, as a second gate, lists
// with bodies) hold at once. A batch call
// holds its body, the items decoded from it and their tasks, several times
// its size, until it answers; eight concurrent calls of 31 MiB took a node
// from 34 to 715 MB. So each call reserves its body's size (its
// Content-Length, or the batch limit when it does not say) of a node-wide
// budget for as long as it runs, a tenant at most half the budget; a call
// that finds no room is refused at once with 429 rather than queued, since
// a queued call would hold its connection and the sender would not know
// when to try again.
//
// Hand-written rather than golang.org/x/sync/semaphore: that one has no
// per-tenant share, and refusing at once needs no queue.
type batchGate struct {
	budget int64

	mu       sync.Mutex
	used     int64
	byTenant map[uuid.UUID]int64
}

func newBatchGate(budget int64) *batchGate {
	return &batchGate{budget: budget, byTenant: map[uuid.UUID]int64{}}
}

// take reserves n bytes for a batch call of tenant, or reports that the
// node (or the tenant's half of it) has no room now. A call larger than a
// tenant's share still runs when nothing else of the tenant's does.
func (g *batchGate) take(tenant uuid.UUID, n int64) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	mine := g.byTenant[tenant]
	if g.used > 0 && g.used+n > g.budget || mine > 0 && mine+n > g.budget/2 {
		return nil, false
	}
	g.used += n
	g.byTenant[tenant] = mine + n
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.used -= n
			if left := g.byTenant[tenant] - n; left > 0 {
				g.byTenant[tenant] = left
			} else {
				delete(g.byTenant, tenant)
			}
		})
	}, true
}
