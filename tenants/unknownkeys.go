package tenants

import (
	"sync"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// unknownKeys remembers, for a short while, key ids that name no key, so
// that a client trying random keys costs a map lookup rather than a
// Postgres query each. Only ids found to be absent are remembered: a key
// that exists is always looked up, so a wrong secret tried against it can
// never lock its owner out, and a revoked key is refused by its row.
//
// Hand-written rather than hashicorp/golang-lru's expirable LRU: that one
// reads the wall clock, and the tests move time with internal/clock.
type unknownKeys struct {
	ttl   time.Duration
	clock clock.Clock

	mu sync.Mutex
	// until holds when each remembered id is forgotten; order is the ids
	// in the order they were remembered, a ring of at most cap entries,
	// so that the oldest goes first when it is full.
	until map[string]time.Time
	order []string
	next  int
}

func newUnknownKeys(size int, ttl time.Duration, clk clock.Clock) *unknownKeys {
	return &unknownKeys{ttl: ttl, clock: clk, until: make(map[string]time.Time, size), order: make([]string, size)}
}

// known reports whether id was remembered as naming no key, within its TTL.
func (u *unknownKeys) known(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[id]
	if ok && !u.clock.Now().Before(until) {
		delete(u.until, id)
		return false
	}
	return ok
}

// remember notes that id names no key.
func (u *unknownKeys) remember(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.until[id]; !ok {
		if old := u.order[u.next]; old != "" {
			delete(u.until, old)
		}
		u.order[u.next] = id
		u.next = (u.next + 1) % len(u.order)
	}
	u.until[id] = u.clock.Now().Add(u.ttl)
}

// forget drops id, which names a key now.
func (u *unknownKeys) forget(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.until, id)
}
