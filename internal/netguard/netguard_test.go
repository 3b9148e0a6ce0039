package netguard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// blockedAddrs has an address from every blocked range, with the first and
// last address of each where that is a useful edge, and the embedded forms
// of blocked IPv4 addresses.
var blockedAddrs = []string{
	// IPv4.
	"0.0.0.0", "0.255.255.255",
	"10.0.0.0", "10.255.255.255",
	"100.64.0.0", "100.127.255.255",
	"127.0.0.1", "127.0.0.0", "127.255.255.255",
	"169.254.0.0", "169.254.169.254", "169.254.255.255",
	"172.16.0.0", "172.31.255.255",
	"192.0.0.0", "192.0.0.255",
	"192.0.2.0", "192.0.2.255",
	"192.88.99.0", "192.88.99.255",
	"192.168.0.0", "192.168.255.255",
	"198.18.0.0", "198.19.255.255",
	"198.51.100.0", "198.51.100.255",
	"203.0.113.0", "203.0.113.255",
	"224.0.0.0", "239.255.255.255",
	"240.0.0.0", "255.255.255.254",
	"255.255.255.255",

	// IPv6.
	"::", "::1",
	"::2", "::127.0.0.1", "::8.8.8.8", // IPv4-compatible: blocked whatever it carries
	"::ffff:0:808:808", // SIIT, in reserved ::/8
	"100::", "100::ffff:ffff:ffff:ffff",
	"2001::", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
	"2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
	"3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
	"fc00::", "fd12:3456::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"fe80::", "fe80::1", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"ff00::", "ff02::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"fe80::1%eth0", // the zone does not matter

	// IPv4 carried in IPv6.
	"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:0.0.0.0",
	"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101",
	"2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:a00:1:ffff::1",
	"2002:c058:6301::", // 6to4 of the 6to4 relay anycast address
	// Local-use NAT64 is refused whatever its last 32 bits say: here they
	// say 8.8.8.8, while a /48 translator would dial 169.254.169.254.
	"64:ff9b:1::a9fe:a9fe", "64:ff9b:1:a9fe:a9:fe00:808:808",
}

// allowedAddrs are public addresses, including those just outside the edges
// of blocked ranges.
var allowedAddrs = []string{
	"1.1.1.1", "8.8.8.8", "93.184.216.34",
	"1.0.0.0", "9.255.255.255", "11.0.0.0",
	"100.63.255.255", "100.128.0.0",
	"126.255.255.255", "128.0.0.0",
	"169.253.255.255", "169.255.0.0",
	"172.15.255.255", "172.32.0.0",
	"192.0.1.255", "192.0.3.0",
	"192.88.98.255", "192.88.100.0",
	"192.167.255.255", "192.169.0.0",
	"198.17.255.255", "198.20.0.0",
	"198.51.99.255", "198.51.101.0",
	"203.0.112.255", "203.0.114.0",
	"223.255.255.255",

	"2606:4700::1111", "2001:4860:4860::8888",
	"2001:200::", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::",
	"2003::", "3fff:1000::", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",

	"::ffff:1.1.1.1",
	"64:ff9b::808:808",
	"2002:808:808::1", // 6to4 of a public address
}

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	g := New(Config{})

	for _, s := range blockedAddrs {
		t.Run("blocked "+s, func(t *testing.T) {
			t.Parallel()
			err := g.CheckAddr(netip.MustParseAddr(s))
			require.ErrorIs(t, err, ErrBlocked)
			require.Contains(t, err.Error(), "HOOKWHEEL_TARGET_ALLOW_CIDRS")
		})
	}
	for _, s := range allowedAddrs {
		t.Run("allowed "+s, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, g.CheckAddr(netip.MustParseAddr(s)))
		})
	}
	t.Run("invalid address", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, g.CheckAddr(netip.Addr{}), ErrBlocked)
	})
}

func TestCheckAddrMessage(t *testing.T) {
	t.Parallel()
	g := New(Config{})

	tests := []struct {
		addr string
		want string
	}{
		{"169.254.169.254", "target address 169.254.169.254 is blocked (link-local / cloud metadata 169.254.0.0/16); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"10.1.2.3", "target address 10.1.2.3 is blocked (private 10.0.0.0/8); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"255.255.255.255", "target address 255.255.255.255 is blocked (limited broadcast 255.255.255.255/32); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"::1", "target address ::1 is blocked (loopback ::1/128); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"::ffff:127.0.0.1", "target address ::ffff:127.0.0.1 is blocked (IPv4-mapped ::ffff:0.0.0.0/96 carrying 127.0.0.1, loopback 127.0.0.0/8); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"64:ff9b::a9fe:a9fe", "target address 64:ff9b::a9fe:a9fe is blocked (NAT64 64:ff9b::/96 carrying 169.254.169.254, link-local / cloud metadata 169.254.0.0/16); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"2002:7f00:1::", "target address 2002:7f00:1:: is blocked (6to4 2002::/16 carrying 127.0.0.1, loopback 127.0.0.0/8); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
		{"fe80::1%eth0", "target address fe80::1 is blocked (link-local fe80::/10); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			require.EqualError(t, g.CheckAddr(netip.MustParseAddr(tt.addr)), tt.want)
		})
	}
}

func TestAllowPrivate(t *testing.T) {
	t.Parallel()
	g := New(Config{AllowPrivate: true})

	for _, s := range append(append([]string{}, blockedAddrs...), allowedAddrs...) {
		require.NoError(t, g.CheckAddr(netip.MustParseAddr(s)), s)
		ap := netip.AddrPortFrom(netip.MustParseAddr(s), 80)
		require.NoError(t, g.Control("tcp", ap.String(), nil), s)
	}
	for _, s := range []string{"http://127.0.0.1/", "http://localhost/", "http://0/", "http:///x"} {
		require.NoError(t, g.CheckURL(mustParseURL(t, s)), s)
	}
}

func TestAllowCIDRs(t *testing.T) {
	t.Parallel()
	g := New(Config{AllowCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.20.0.0/16"),
		netip.MustParsePrefix("fd00:1::/32"),
		netip.MustParsePrefix("192.168.1.77/24"), // host bits are ignored
	}})

	tests := []struct {
		addr    string
		allowed bool
	}{
		{"10.20.0.0", true},
		{"10.20.1.1", true},
		{"10.20.255.255", true},
		{"10.19.255.255", false},
		{"10.21.0.1", false},
		{"10.0.0.1", false},
		{"fd00:1::5", true},
		{"fd00:2::5", false},
		{"192.168.1.1", true},
		{"192.168.2.1", false},
		{"127.0.0.1", false},
		{"169.254.169.254", false},
		// An allowed IPv4 range allows the forms that carry it.
		{"::ffff:10.20.1.1", true},
		{"64:ff9b::a14:101", true}, // 10.20.1.1
		{"2002:a14:101::1", true},  // 10.20.1.1
		{"::ffff:10.21.0.1", false},
		{"8.8.8.8", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			err := g.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.allowed {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrBlocked)
			}
		})
	}

	t.Run("the caller's slice is copied", func(t *testing.T) {
		t.Parallel()
		cidrs := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}
		g := New(Config{AllowCIDRs: cidrs})
		cidrs[0] = netip.MustParsePrefix("127.0.0.0/8")
		require.NoError(t, g.CheckAddr(netip.MustParseAddr("10.20.1.1")))
		require.ErrorIs(t, g.CheckAddr(netip.MustParseAddr("127.0.0.1")), ErrBlocked)
	})
}

func TestParseCIDRs(t *testing.T) {
	t.Parallel()

	good := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"10.20.0.0/16", []string{"10.20.0.0/16"}},
		{" 10.20.0.0/16 , fd00::/8 ", []string{"10.20.0.0/16", "fd00::/8"}},
		{"10.20.0.0/16,192.168.5.0/24,", []string{"10.20.0.0/16", "192.168.5.0/24"}},
		{"10.20.1.1/16", []string{"10.20.0.0/16"}},
		{"10.0.0.5, ::1", []string{"10.0.0.5/32", "::1/128"}},
		{"0.0.0.0/0", []string{"0.0.0.0/0"}},
	}
	for _, tt := range good {
		t.Run("good "+tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseCIDRs(tt.in)
			require.NoError(t, err)
			var want []netip.Prefix
			for _, s := range tt.want {
				want = append(want, netip.MustParsePrefix(s))
			}
			require.Equal(t, want, got)
		})
	}

	bad := []struct {
		in      string
		mention string
	}{
		{"10.0.0.0/33", `entry 1 "10.0.0.0/33"`},
		{"banana", `entry 1 "banana"`},
		{"10.0.0.0/8, 300.1.1.1/8", `entry 2 "300.1.1.1/8"`},
		{"10.0.0.0/8 192.168.0.0/16", `entry 1 "10.0.0.0/8 192.168.0.0/16"`},
		{"10.0.0.0/8;192.168.0.0/16", `entry 1 "10.0.0.0/8;192.168.0.0/16"`},
		{"fe80::1%eth0", `entry 1 "fe80::1%eth0"`},
		{"10.0.0.0/", `entry 1 "10.0.0.0/"`},
	}
	for _, tt := range bad {
		t.Run("bad "+tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseCIDRs(tt.in)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.mention)
			require.Nil(t, got)
		})
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	g := New(Config{})

	tests := []struct {
		url     string
		blocked bool
	}{
		{"http://127.0.0.1", true},
		{"http://127.0.0.1:8080/hook?x=1", true},
		{"http://127.0.0.1./", true},
		{"http://[::1]:8080", true},
		{"http://[::ffff:127.0.0.1]", true},
		{"http://[::ffff:7f00:1]/", true},
		{"http://[64:ff9b::7f00:1]/", true},
		{"http://[fe80::1%25eth0]:8080/", true},
		{"http://0.0.0.0", true},
		{"http://169.254.169.254/latest/meta-data/", true},
		{"http://10.0.0.1/", true},
		// Numeric forms a C resolver (Go's cgo resolver) reads as IPv4.
		{"http://0", true},
		{"http://0:8080/", true},
		{"http://127.1", true},
		{"http://0x7f.1", true},
		{"http://0x7F000001/", true},
		{"http://2130706433", true},
		{"http://0177.0.0.1/", true},
		{"http://169.254.43518/", true}, // 169.254.169.254
		// Fullwidth digits, which net/http maps to ASCII through IDNA.
		{"http://１２７.０.０.１/", true},
		{"http://localhost", true},
		{"http://localhost:3000/", true},
		{"http://LOCALHOST./", true},
		{"http://api.localhost", true},
		{"http://a.b.localhost:80/", true},
		{"http:///path", true}, // no host: dials the local host

		{"https://example.com", false},
		{"https://example.com:8443/hook", false},
		{"http://1.1.1.1/", false},
		{"http://8.8.8.8:80/", false},
		{"http://[2606:4700::1111]/", false},
		{"http://[::ffff:1.1.1.1]/", false},
		{"http://16843009/", false}, // 1.1.1.1
		{"http://123.example.com/", false},
		{"http://0x7f.example.com/", false},
		{"http://localhost.example.com/", false},
		{"http://mylocalhost/", false},
		// A name that resolves to a blocked address passes here; the
		// dial refuses it (TestDialLocalhostName).
		{"http://internal.corp/", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			err := g.CheckURL(mustParseURL(t, tt.url))
			if tt.blocked {
				require.ErrorIs(t, err, ErrBlocked)
			} else {
				require.NoError(t, err)
			}
		})
	}

	t.Run("messages", func(t *testing.T) {
		t.Parallel()
		require.EqualError(t, g.CheckURL(mustParseURL(t, "http://0x7f.1/")),
			"target host 0x7f.1 is blocked (read as 127.0.0.1, loopback 127.0.0.0/8); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)")
		require.EqualError(t, g.CheckURL(mustParseURL(t, "http://api.localhost/")),
			"target host api.localhost is blocked (the local host, loopback 127.0.0.0/8); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)")
		require.EqualError(t, g.CheckURL(mustParseURL(t, "http://[::1]:8080/")),
			"target address ::1 is blocked (loopback ::1/128); an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)")
	})

	t.Run("allowed loopback allows localhost", func(t *testing.T) {
		t.Parallel()
		g := New(Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		require.NoError(t, g.CheckURL(mustParseURL(t, "http://localhost:8080/")))
		require.NoError(t, g.CheckURL(mustParseURL(t, "http://127.1/")))
		require.ErrorIs(t, g.CheckURL(mustParseURL(t, "http://[::1]/")), ErrBlocked)
	})
}

func TestControl(t *testing.T) {
	t.Parallel()
	g := New(Config{})

	tests := []struct {
		network, address string
		blocked          bool
	}{
		{"tcp", "127.0.0.1:80", true},
		{"tcp4", "169.254.169.254:80", true},
		{"tcp6", "[::1]:443", true},
		{"tcp6", "[fe80::1%eth0]:443", true},
		{"tcp6", "[::ffff:10.0.0.1]:443", true},
		{"tcp", "0.0.0.0:8080", true},
		{"tcp", "1.1.1.1:443", false},
		{"tcp6", "[2606:4700::1111]:443", false},
		// Anything that cannot be checked is refused.
		{"tcp", "example.com:80", true},
		{"tcp", "127.0.0.1", true},
		{"unix", "/run/docker.sock", true},
	}
	for _, tt := range tests {
		t.Run(tt.network+" "+tt.address, func(t *testing.T) {
			t.Parallel()
			err := g.Control(tt.network, tt.address, nil)
			if tt.blocked {
				require.ErrorIs(t, err, ErrBlocked)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// TestControlMessage: a refusal at dial time says what kind of range was
// refused and never names the address dialled, which is what a host name
// resolved to: the message reaches the tenant in its attempt's error, and
// would map the operator's internal DNS. Before, it read "target address
// 10.96.0.1 is blocked (private 10.0.0.0/8)".
func TestControlMessage(t *testing.T) {
	t.Parallel()
	g := New(Config{})
	hint := "; an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"
	tests := []struct {
		network, address, want string
		// secret are parts of the address that the message must not hold.
		secret []string
	}{
		{"tcp", "10.96.0.1:443", "target host resolves to a blocked address range (private)" + hint, []string{"10.96.0.1", "10.0.0.0"}},
		{"tcp4", "169.254.169.254:80", "target host resolves to a blocked address range (link-local / cloud metadata)" + hint, []string{"169.254"}},
		{"tcp6", "[fd12:3456::7]:443", "target host resolves to a blocked address range (unique local)" + hint, []string{"fd12", "fc00"}},
		{"tcp6", "[::ffff:10.1.2.3]:443", "target host resolves to a blocked address range (IPv4-mapped, carrying an address that is private)" + hint, []string{"10.1.2.3", "10.0.0.0", "ffff"}},
		{"tcp6", "[64:ff9b::a9fe:a9fe]:80", "target host resolves to a blocked address range (NAT64, carrying an address that is link-local / cloud metadata)" + hint, []string{"169.254", "a9fe"}},
		{"tcp", "10.9.8.7", "target host resolves to a blocked address range (a tcp address that cannot be checked)", []string{"10.9.8.7"}},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()
			err := g.Control(tt.network, tt.address, nil)
			require.ErrorIs(t, err, ErrBlocked)
			require.EqualError(t, err, tt.want)
			for _, s := range tt.secret {
				require.NotContains(t, err.Error(), s)
			}
		})
	}
}

// TestDial dials a real server on 127.0.0.1 through an http.Client whose
// transport uses DialContext.
func TestDial(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		cfg     Config
		blocked bool
	}{
		{"default refuses loopback", Config{}, true},
		{"allow private", Config{AllowPrivate: true}, false},
		{"allowed range", Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, false},
		{"other allowed range", Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, hits := newCountingServer(t)
			client := newClient(t, New(tt.cfg))

			resp, err := client.Get(srv.URL)
			if !tt.blocked {
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, http.StatusNoContent, resp.StatusCode)
				require.EqualValues(t, 1, hits.Load())
				return
			}
			require.ErrorIs(t, err, ErrBlocked)
			// net/http and net wrap the refusal; errors.Is sees through.
			var urlErr *url.Error
			require.ErrorAs(t, err, &urlErr)
			var opErr *net.OpError
			require.ErrorAs(t, err, &opErr)
			require.Contains(t, err.Error(), "target host resolves to a blocked address range (loopback)")
			require.Zero(t, hits.Load())
		})
	}
}

// TestDialLocalhostName shows that a name passing no literal check is
// still refused once it resolves to a blocked address.
func TestDialLocalhostName(t *testing.T) {
	t.Parallel()
	srv, hits := newCountingServer(t)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	_, err = newClient(t, New(Config{})).Get("http://localhost:" + port + "/")
	require.ErrorIs(t, err, ErrBlocked)
	require.Zero(t, hits.Load())
}

// TestDialRedirect shows that a client following redirects is refused
// at the hop that leads to a blocked address: the first server, on the
// one loopback address allowed, redirects to another loopback address.
func TestDialRedirect(t *testing.T) {
	t.Parallel()
	target, targetHits := newCountingServer(t)

	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 (only Linux routes all of 127/8 to loopback): %v", err)
	}
	var firstHits atomic.Int64
	first := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		firstHits.Add(1)
		http.Redirect(w, r, target.URL+"/next", http.StatusFound)
	}))
	require.NoError(t, first.Listener.Close())
	first.Listener = ln
	first.Start()
	t.Cleanup(first.Close)

	g := New(Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	client := newClient(t, g) // follows redirects: CheckRedirect is nil

	_, err = client.Get(first.URL)
	require.ErrorIs(t, err, ErrBlocked)
	require.Contains(t, err.Error(), "target host resolves to a blocked address range (loopback)")
	require.EqualValues(t, 1, firstHits.Load())
	require.Zero(t, targetHits.Load())
}

// newCountingServer starts a server on 127.0.0.1 that answers 204 and
// counts the requests it gets.
func newCountingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// newClient returns a client dialling through g, with no proxy, as the
// dispatcher's must be.
func newClient(t *testing.T, g *Guard) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, DialContext: g.DialContext()}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestParseInetAton(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // "" when not an address
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"2130706433", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0177.0.0.01", "127.0.0.1"},
		{"10.0x10.0377.0", "10.16.255.0"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"256.0.0.1", ""},
		{"1.256.1", ""},
		{"1.2.65535", "1.2.255.255"},
		{"1.2.65536", ""},
		{"1.2.3.4.5", ""},
		{"08.0.0.1", ""},
		{"0x", ""},
		{"1..1", ""},
		{"", ""},
		{"example.com", ""},
		{"+1", ""},
		{"1e3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := parseInetAton(tt.in)
			if tt.want == "" {
				require.False(t, ok, "got %v", got)
				return
			}
			require.True(t, ok)
			require.Equal(t, netip.MustParseAddr(tt.want), got)
		})
	}
}

// TestAllowing: a guard with a tenant's grants lets those ranges through,
// on top of the node's, and leaves the guard it came from as it was.
func TestAllowing(t *testing.T) {
	t.Parallel()
	base := New(Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	granted := base.Allowing([]netip.Prefix{netip.MustParsePrefix("10.20.3.4/16")})
	require.Same(t, base, base.Allowing(nil))
	for _, tc := range []struct {
		addr          string
		base, granted bool
	}{
		{"10.1.2.3", true, true},
		{"10.20.9.9", false, true},
		{"10.21.0.1", false, false},
		{"127.0.0.1", false, false},
		{"::ffff:10.20.0.1", false, true},
		{"8.8.8.8", true, true},
	} {
		addr := netip.MustParseAddr(tc.addr)
		require.Equal(t, tc.base, base.CheckAddr(addr) == nil, "base %s", tc.addr)
		require.Equal(t, tc.granted, granted.CheckAddr(addr) == nil, "granted %s", tc.addr)
	}
}
