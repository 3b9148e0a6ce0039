package netguard_test

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/netguard"
)

// allowSeeds are HOOKWHEEL_TARGET_ALLOW_CIDRS values: none, the ranges
// operators grant, ones that cover the IPv6 forms carrying IPv4 addresses,
// and malformed ones (which leave the guard at its defaults).
func allowSeeds() []string {
	return []string{
		"", "10.20.0.0/16", "127.0.0.0/8, ::1", "192.168.1.77/24,fd00:1::/32", "::ffff:0:0/96", "64:ff9b::/96",
		"2002::/16", "0.0.0.0/0", "::/0", "169.254.169.254", "fe80::1%eth0", "10.0.0.0/33", " , ,", "not a cidr",
	}
}

// guardFor builds the guard an operator's allow list gives; a list
// ParseCIDRs refuses is refused at startup, so it stands for no list.
func guardFor(allow string) (*netguard.Guard, []netip.Prefix) {
	cidrs, err := netguard.ParseCIDRs(allow)
	if err != nil {
		cidrs = nil
	}
	return netguard.New(netguard.Config{AllowCIDRs: cidrs}), cidrs
}

// FuzzCheckAddr checks that an address the guard allows is on the public
// internet, judged by net/netip rather than the guard's table, or in a range
// the operator allowed; that every form of an IPv4 address carried in IPv6
// (IPv4-mapped, NAT64, 6to4) and every spelling of it in a URL is judged as
// the address itself; and that the dial-time check agrees with it.
//
// raw is the address as 4 or 16 bytes, or else as text.
func FuzzCheckAddr(f *testing.F) {
	addrs := []string{
		"127.0.0.1", "10.0.0.1", "10.20.1.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"0.0.0.0", "255.255.255.255", "224.0.0.251", "8.8.8.8", "1.1.1.1", "192.88.99.1",
		"::", "::1", "fe80::1%eth0", "fd00:1::5", "ff02::1", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1", "2002:7f00:1::1", "2002:808:808::1", "2001::1", "2606:4700::1111",
		"::ffff:0:7f00:1", "not an address", "",
	}
	allow := allowSeeds()
	for i, a := range addrs {
		f.Add([]byte(a), allow[i%len(allow)])
	}
	f.Add([]byte{127, 0, 0, 1}, "")
	f.Add([]byte{169, 254, 169, 254}, "169.254.0.0/16")
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, "10.0.0.0/8")
	f.Add([]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "")

	f.Fuzz(func(t *testing.T, raw []byte, allow string) {
		var ip netip.Addr
		switch len(raw) {
		case 4:
			ip = netip.AddrFrom4([4]byte(raw))
		case 16:
			ip = netip.AddrFrom16([16]byte(raw))
		default:
			var err error
			if ip, err = netip.ParseAddr(string(raw)); err != nil {
				return
			}
		}
		g, cidrs := guardFor(allow)

		err := g.CheckAddr(ip)
		if err != nil {
			require.ErrorIs(t, err, netguard.ErrBlocked)
		} else {
			require.True(t, !internal(ip) || granted(cidrs, ip), "allowed %s (carrying %v), which is not public", ip, carried(ip))
		}
		port := netip.AddrPortFrom(ip, 443).String()
		require.Equal(t, err == nil, g.Control("tcp", port, nil) == nil, "CheckAddr and Control disagree on %s", port)

		if !ip.Is4() {
			return
		}
		for _, carrier := range carriers(ip) {
			if err != nil && granted(cidrs, carrier) {
				continue // the operator allowed the IPv6 range itself
			}
			require.Equal(t, err == nil, g.CheckAddr(carrier) == nil, "%s is judged otherwise than the %s it carries", carrier, ip)
		}
		mapped := g.CheckAddr(netip.AddrFrom16(ip.As16()))
		for _, host := range spellings(ip) {
			want := err
			if strings.HasPrefix(host, "[") {
				want = mapped // which differs only if the operator allowed ::ffff:0:0/96 itself
			}
			u := &url.URL{Scheme: "http", Host: host, Path: "/hook"}
			require.Equal(t, want == nil, g.CheckURL(u) == nil, "%s is judged otherwise than %s", u, ip)
		}
	})
}

// FuzzCheckURL checks that CheckURL never panics, that a refusal wraps
// ErrBlocked, and that a URL it accepts names a host, which is no IP
// literal the guard refuses and no localhost name unless loopback is
// allowed.
func FuzzCheckURL(f *testing.F) {
	urls := []string{
		"https://example.com/hook", "http://127.0.0.1:8080/", "http://[::1]/", "http://[::ffff:7f00:1]/",
		"http://[fe80::1%25eth0]:8080/", "http://0x7f.1/", "http://2130706433/", "http://0177.0.0.1/",
		"http://１２７.０.０.１/", "http://LOCALHOST./", "http://api.localhost:3000/", "http:///path", "http://",
		"http://169.254.43518/", "http://[64:ff9b::a9fe:a9fe]/", "http://123.example.com/", "http://xn--n3h.com/",
		"http://user:pass@10.0.0.1/", "https://8.8.8.8:443/", "http://0/", "http://0x/", "http://1.2.3.4.5/",
		"http://%31%32%37.0.0.1/", "http://127.0.0.1%2f/", "http://[::1]:99999/", "mailto:root@localhost",
	}
	allow := allowSeeds()
	for i, u := range urls {
		f.Add(u, allow[i%len(allow)])
	}

	f.Fuzz(func(t *testing.T, raw, allow string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		g, _ := guardFor(allow)
		if err := g.CheckURL(u); err != nil {
			require.ErrorIs(t, err, netguard.ErrBlocked)
			return
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		require.NotEmpty(t, host, "allowed %q, which has no host", raw)
		if ip, err := netip.ParseAddr(host); err == nil {
			require.NoError(t, g.CheckAddr(ip), "allowed %q", raw)
		}
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			loopback4 := g.CheckAddr(netip.MustParseAddr("127.0.0.1")) == nil
			loopback6 := g.CheckAddr(netip.IPv6Loopback()) == nil
			require.True(t, loopback4 || loopback6, "allowed %q with loopback refused", raw)
		}
	})
}

// internal reports whether ip, or an IPv4 address it carries, is not a
// public unicast address, by net/netip's reading.
func internal(ip netip.Addr) bool {
	for _, a := range append([]netip.Addr{ip.WithZone("")}, carried(ip)...) {
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
			a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
			return true
		}
	}
	return false
}

// granted reports whether an allowed range holds ip or an IPv4 address it
// carries.
func granted(cidrs []netip.Prefix, ip netip.Addr) bool {
	for _, a := range append([]netip.Addr{ip.WithZone("")}, carried(ip)...) {
		for _, p := range cidrs {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}

// The IPv6 ranges whose addresses carry an IPv4 address.
const (
	mappedRange    = "::ffff:0:0/96"
	nat64Range     = "64:ff9b::/96"
	sixToFourRange = "2002::/16"
)

// carried returns the IPv4 address an IPv6 address carries in each form
// that routes to it: IPv4-mapped and NAT64 in the last 32 bits, 6to4 in
// bits 16 to 48.
func carried(ip netip.Addr) []netip.Addr {
	in := func(cidr string) bool { return netip.MustParsePrefix(cidr).Contains(ip.WithZone("")) }
	b := ip.As16()
	switch {
	case in(mappedRange), in(nat64Range):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	case in(sixToFourRange):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	}
	return nil
}

// carriers returns the IPv6 forms that carry v4.
func carriers(v4 netip.Addr) []netip.Addr {
	a := v4.As4()
	nat64 := netip.MustParsePrefix(nat64Range).Addr().As16()
	copy(nat64[12:], a[:])
	var six [16]byte
	six[0], six[1] = 0x20, 0x02
	copy(six[2:6], a[:])
	six[15] = 1
	return []netip.Addr{netip.AddrFrom16(v4.As16()), netip.AddrFrom16(nat64), netip.AddrFrom16(six)}
}

// spellings are the ways a URL's host can name v4 that a resolver reads as
// v4: dotted, with a trailing dot, as one number in decimal, hex and octal,
// in the C library's shortened forms, with octal parts, in fullwidth digits,
// and as IPv4-mapped IPv6.
func spellings(v4 netip.Addr) []string {
	a := v4.As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	dotted := v4.String()
	fullwidth := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r - '0' + '０'
		}
		return r
	}, dotted)
	return []string{
		dotted,
		dotted + ".",
		dotted + ":8080",
		fmt.Sprint(n),
		fmt.Sprintf("0x%x", n),
		fmt.Sprintf("0X%X", n),
		fmt.Sprintf("0%o", n),
		fmt.Sprintf("%d.%d", a[0], n&0xffffff),
		fmt.Sprintf("%d.%d.%d", a[0], a[1], n&0xffff),
		fmt.Sprintf("0%o.0%o.0%o.0%o", a[0], a[1], a[2], a[3]),
		fmt.Sprintf("0x%x.0x%x.%d.%d", a[0], a[1], a[2], a[3]),
		fullwidth,
		"[::ffff:" + dotted + "]",
		"[::ffff:" + dotted + "]:443",
	}
}
