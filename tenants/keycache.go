package tenants

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// keyCache remembers keys found valid, with their tenant, for a short TTL:
// without it every API call costs a Postgres round trip before it starts.
// The TTL is the bound on how long another node's revocation may go unseen
// here; revocations and tenant changes made through this node drop their
// entries at once.
//
// Hand-written for the same reason as unknownKeys: it reads time from
// internal/clock, which the tests move. When full, an arbitrary entry goes:
// a cache this short-lived gains little from exact LRU order.
type keyCache struct {
	ttl   time.Duration
	size  int
	clock clock.Clock

	mu      sync.Mutex
	entries map[string]cachedKey
	// generation counts forget calls: a lookup that began before one may
	// have read what it dropped, and is not cached (see put).
	generation uint64
}

type cachedKey struct {
	caller  *Caller
	fetched time.Time
}

func newKeyCache(size int, ttl time.Duration, clk clock.Clock) *keyCache {
	return &keyCache{ttl: ttl, size: size, clock: clk, entries: make(map[string]cachedKey)}
}

func (c *keyCache) get(keyID string) (*Caller, bool) {
	if c.ttl < 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[keyID]
	if !ok {
		return nil, false
	}
	if c.clock.Now().Sub(e.fetched) >= c.ttl {
		delete(c.entries, keyID)
		return nil, false
	}
	return e.caller, true
}

// lookup notes when a read from the store begins, for put.
type lookup struct {
	at         time.Time
	generation uint64
}

func (c *keyCache) begin() lookup {
	c.mu.Lock()
	defer c.mu.Unlock()
	return lookup{at: c.clock.Now(), generation: c.generation}
}

// put caches what a lookup begun at l read. Its age counts from when the
// read began, not when it returned, so a slow query does not stretch how
// long another node's revocation goes unseen; and a lookup that a forget
// overtook (a revocation or tenant change on this node while it ran) is not
// cached, as it may hold what was just dropped.
func (c *keyCache) put(keyID string, caller *Caller, l lookup) {
	if c.ttl < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.generation != c.generation {
		return
	}
	if _, ok := c.entries[keyID]; !ok && len(c.entries) >= c.size {
		for id := range c.entries {
			delete(c.entries, id)
			break
		}
	}
	c.entries[keyID] = cachedKey{caller: caller, fetched: l.at}
}

func (c *keyCache) forget(keyID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	delete(c.entries, keyID)
}

// forgetAll drops every key: after changes that may have gone unheard, or
// one that may reach any tenant (a plan's limits).
func (c *keyCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	clear(c.entries)
}

// forgetTenant drops every key of a tenant, whose cached settings changed.
func (c *keyCache) forgetTenant(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	for keyID, e := range c.entries {
		if e.caller.Tenant.ID == id {
			delete(c.entries, keyID)
		}
	}
}
