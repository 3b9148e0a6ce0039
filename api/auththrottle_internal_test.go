package api

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// TestAuthThrottleClients: IPv6 addresses of one /64 count as one client,
// IPv4 ones each on their own, an IPv4-mapped address as its IPv4 address.
func TestAuthThrottleClients(t *testing.T) {
	t.Parallel()
	cases := []struct{ ip, client string }{
		{"203.0.113.5", "203.0.113.5"},
		{"::ffff:203.0.113.5", "203.0.113.5"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"},
		{"not an address", "not an address"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.client, clientOf(tc.ip), tc.ip)
	}

	a := newAuthThrottle(AuthFailureLimit{Max: 2, Window: time.Minute}, clock.NewFake(time.Now()))
	a.failed("2001:db8:1:2::1")
	a.failed("2001:db8:1:2::2")
	_, refused := a.throttled("2001:db8:1:2::3")
	require.True(t, refused, "one /64, one client")
	_, refused = a.throttled("2001:db8:1:3::1")
	require.False(t, refused)
}

// clientIP is the i-th of distinct IPv4 addresses.
func clientIP(i int) string {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
}

// TestAuthThrottleFullTable: with the table full of addresses whose windows
// have not ended, a new address is still counted and throttled (it takes
// the place of the address whose window began first), where it used to go
// untracked, free to guess, until some window ended.
func TestAuthThrottleFullTable(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	a := newAuthThrottle(AuthFailureLimit{Max: 3, Window: time.Minute, Clients: 1000}, clk)
	for i := range 1000 {
		a.failed(clientIP(i))
	}
	clk.Advance(time.Second)
	guesser := "203.0.113.7"
	for range 3 {
		a.failed(guesser)
	}
	_, refused := a.throttled(guesser)
	require.True(t, refused, "a new address past a full table is throttled all the same")
	_, refused = a.throttled(clientIP(0))
	require.False(t, refused, "the oldest window made room")
	_, refused = a.throttled(clientIP(999))
	require.False(t, refused, "one failure of three")
}

// TestAuthThrottleBounded: 200,000 distinct addresses through a throttle of
// 100,000 leave it at 100,000 entries, each new address past the bound
// evicting exactly one; once their windows end, the next failures drop them
// as they go, one list step each, and a throttled address stays throttled
// while younger ones come and go.
func TestAuthThrottleBounded(t *testing.T) {
	t.Parallel()
	const limit, clients = 100_000, 200_000
	clk := clock.NewFake(time.Now())
	a := newAuthThrottle(AuthFailureLimit{Max: 2, Window: time.Minute, Clients: limit}, clk)
	for i := range clients {
		a.failed(clientIP(i))
		n, _ := a.tracked()
		if n > limit {
			require.LessOrEqual(t, n, limit, "after %d addresses", i+1)
		}
	}
	n, evicted := a.tracked()
	require.Equal(t, limit, n)
	require.Equal(t, uint64(clients-limit), evicted, "one eviction per address past the bound")
	_, refused := a.throttled(clientIP(0))
	require.False(t, refused, "evicted")
	a.failed(clientIP(clients - 1))
	_, refused = a.throttled(clientIP(clients - 1))
	require.True(t, refused, "the newest window is kept")

	// Every window ended: the next failure drops them all on its way (an
	// amortised step each: each entry was added once), none evicted.
	clk.Advance(time.Minute)
	a.failed("203.0.113.7")
	n, evicted2 := a.tracked()
	require.Equal(t, 1, n)
	require.Equal(t, evicted, evicted2)
}

// BenchmarkAuthThrottle: the cost of a failure of a new address and a check,
// with the table full of clients whose windows have not ended. It stays
// flat from 1,000 to 200,000 clients (it used to scan the table once full).
func BenchmarkAuthThrottle(b *testing.B) {
	for _, clients := range []int{1_000, 10_000, 100_000, 200_000} {
		b.Run(strconv.Itoa(clients), func(b *testing.B) {
			clk := clock.NewFake(time.Now())
			a := newAuthThrottle(AuthFailureLimit{Max: 20, Window: time.Hour, Clients: clients}, clk)
			for i := range clients {
				a.failed(clientIP(i))
			}
			ips := make([]string, 1<<16)
			for i := range ips {
				ips[i] = clientIP(clients + i)
			}
			b.ResetTimer()
			for i := range b.N {
				ip := ips[i&(len(ips)-1)]
				a.failed(ip)
				a.throttled(ip)
			}
		})
	}
}
