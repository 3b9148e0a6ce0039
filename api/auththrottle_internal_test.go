package api

import (
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
