package api

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// AuthFailureLimit bounds the failed authentications one client address may
// make: after Max failures within Window, its calls that present a key are
// refused with 429 until the window that began with its first failure
// ends, before any key is looked up. Zero fields take the defaults.
type AuthFailureLimit struct {
	// Max failures per Window. Default 20.
	Max int
	// Window, default 10s.
	Window time.Duration
	// Clients bounds the addresses tracked at once; a new address beyond
	// it takes the place of the one whose window began first (so ends
	// first): the throttle holds at most Clients entries, and each call
	// costs the same whatever their number. Default 100,000.
	Clients int
}

func (l *AuthFailureLimit) setDefaults() {
	if l.Max <= 0 {
		l.Max = 20
	}
	if l.Window <= 0 {
		l.Window = 10 * time.Second
	}
	if l.Clients <= 0 {
		l.Clients = 100_000
	}
}

// authThrottle counts failed authentications per client address, in fixed
// windows. Per node and in memory: it guards this node's database from key
// guessing; a guesser spread over many nodes is slowed on each.
//
// Every window has the same length, so the order in which windows began is
// the order in which they end: the entries are kept in that order on a
// list, oldest first. Ended windows are dropped from its front as new ones
// come, and a new address past Clients evicts the front. Each call does a
// map lookup and a bounded amount of list work (each entry is dropped at
// most once per window it was added for), under one short lock, whatever
// the number of addresses: an attacker holding many addresses can make
// the throttle forget the oldest window, never make it slow or large.
type authThrottle struct {
	limit AuthFailureLimit
	clock clock.Clock

	mu      sync.Mutex
	clients map[string]*list.Element // of *authFailures
	// byStart holds the entries in the order their windows began.
	byStart *list.List
	// evicted counts entries dropped before their window ended.
	evicted uint64
}

type authFailures struct {
	client string
	count  int
	ends   time.Time
}

func newAuthThrottle(limit AuthFailureLimit, clk clock.Clock) *authThrottle {
	limit.setDefaults()
	return &authThrottle{limit: limit, clock: clk, clients: map[string]*list.Element{}, byStart: list.New()}
}

// clientOf is what the throttle counts an address under: an IPv6 address
// by its /64, since one host commonly holds a whole /64 and could take a
// new address for every guess.
func clientOf(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	addr = addr.Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

// throttled reports whether ip has failed too often, and for how long
// more it is refused.
func (a *authThrottle) throttled(ip string) (time.Duration, bool) {
	ip = clientOf(ip)
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.clients[ip]
	if !ok {
		return 0, false
	}
	f := e.Value.(*authFailures)
	left := f.ends.Sub(a.clock.Now())
	if left <= 0 {
		a.drop(e)
		return 0, false
	}
	return left, f.count >= a.limit.Max
}

// failed counts a failed authentication of ip.
func (a *authThrottle) failed(ip string) {
	ip = clientOf(ip)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	a.dropEnded(now)
	if e, ok := a.clients[ip]; ok {
		if f := e.Value.(*authFailures); now.Before(f.ends) {
			f.count++
			return
		}
		// Ended, yet behind one that has not: the clock was set back.
		a.drop(e)
	}
	if len(a.clients) >= a.limit.Clients {
		a.drop(a.byStart.Front())
		a.evicted++
	}
	f := &authFailures{client: ip, count: 1, ends: now.Add(a.limit.Window)}
	a.clients[ip] = a.byStart.PushBack(f)
}

// dropEnded drops the entries whose window has ended by now, from the
// front of byStart; it stops at the first that has not. A clock set back
// could leave an ended window behind one that has not: throttled drops it
// when its address comes back, and eviction in its turn.
func (a *authThrottle) dropEnded(now time.Time) {
	for e := a.byStart.Front(); e != nil && !now.Before(e.Value.(*authFailures).ends); e = a.byStart.Front() {
		a.drop(e)
	}
}

func (a *authThrottle) drop(e *list.Element) {
	delete(a.clients, e.Value.(*authFailures).client)
	a.byStart.Remove(e)
}

// tracked is how many addresses the throttle holds, and how many it
// dropped before their window ended.
func (a *authThrottle) tracked() (clients int, evicted uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.clients), a.evicted
}
