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

func (c *keyCache) put(keyID string, caller *Caller) {
	if c.ttl < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[keyID]; !ok && len(c.entries) >= c.size {
		for id := range c.entries {
			delete(c.entries, id)
			break
		}
	}
	c.entries[keyID] = cachedKey{caller: caller, fetched: c.clock.Now()}
}

func (c *keyCache) forget(keyID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, keyID)
}

// forgetTenant drops every key of a tenant, whose cached settings changed.
func (c *keyCache) forgetTenant(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for keyID, e := range c.entries {
		if e.caller.Tenant.ID == id {
			delete(c.entries, keyID)
		}
	}
}
