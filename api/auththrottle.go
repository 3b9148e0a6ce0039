package api

import (
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
	// Clients bounds the addresses tracked at once; beyond it, those whose
	// window has ended are dropped, then, if none has, new addresses go
	// untracked until one does. Default 100,000.
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
type authThrottle struct {
	limit AuthFailureLimit
	clock clock.Clock

	mu      sync.Mutex
	clients map[string]*authFailures
}

type authFailures struct {
	count int
	ends  time.Time
}

func newAuthThrottle(limit AuthFailureLimit, clk clock.Clock) *authThrottle {
	limit.setDefaults()
	return &authThrottle{limit: limit, clock: clk, clients: map[string]*authFailures{}}
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
	f, ok := a.clients[ip]
	if !ok {
		return 0, false
	}
	left := f.ends.Sub(a.clock.Now())
	if left <= 0 {
		delete(a.clients, ip)
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
	f, ok := a.clients[ip]
	if ok && !now.Before(f.ends) {
		ok = false
	}
	if !ok {
		if len(a.clients) >= a.limit.Clients {
			for key, old := range a.clients {
				if !now.Before(old.ends) {
					delete(a.clients, key)
				}
			}
			if len(a.clients) >= a.limit.Clients {
				return
			}
		}
		f = &authFailures{ends: now.Add(a.limit.Window)}
		a.clients[ip] = f
	}
	f.count++
}
