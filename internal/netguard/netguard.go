// Package netguard keeps webhooks from being turned against the network
// hookwheel runs in (server-side request forgery): it refuses target
// addresses that are loopback, private, link-local (cloud metadata),
// reserved or otherwise not on the public internet, both when a task is
// created (CheckURL) and, authoritatively, on every connection the
// dispatcher dials (Control, DialContext), after DNS resolution, so that a
// name that resolves, or later re-resolves, to an internal address cannot
// slip through.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/idna"
)

// ErrBlocked is wrapped by every refusal, so callers can tell a blocked
// target (errors.Is(err, ErrBlocked)) from a network failure; it survives
// the *net.OpError and *url.Error that net and net/http wrap around a
// dialer's Control error.
var ErrBlocked = errors.New("target address is blocked")

// allowHint tells the operator how to lift a refusal; the message is read
// by tenants in API errors and by operators in logs.
const allowHint = "; an operator may grant the range to this tenant (target_allow_cidrs) or to all (HOOKWHEEL_TARGET_ALLOW_CIDRS)"

// Config configures a Guard. The zero value is the production setting:
// every range in the blocked table is refused.
type Config struct {
	// AllowPrivate turns the guard off: every address is allowed. It is
	// HOOKWHEEL_ALLOW_PRIVATE_TARGETS, meant for development and
	// tests, whose receivers listen on loopback. Default false.
	AllowPrivate bool

	// AllowCIDRs are ranges allowed even though they are blocked, such as
	// an internal network the operator wants webhooks to reach. It is
	// HOOKWHEEL_TARGET_ALLOW_CIDRS; see ParseCIDRs. An IPv4 range also
	// allows that range's IPv4-mapped, NAT64 and 6to4 forms. Default empty.
	AllowCIDRs []netip.Prefix
}

// Guard checks webhook targets. It is immutable after New and safe for
// concurrent use.
type Guard struct {
	allowPrivate bool
	allow        []netip.Prefix
	blocked      []blockedRange
}

// blockedRange is one row of the table of refused ranges.
type blockedRange struct {
	prefix netip.Prefix
	// name says why the range is refused; it goes into the error message.
	name string
	// embedded, when set, marks a range whose addresses carry an IPv4
	// address that decides instead: the address is refused only if the
	// IPv4 address is.
	embedded func(netip.Addr) netip.Addr
}

// New returns a Guard for cfg.
func New(cfg Config) *Guard {
	allow := make([]netip.Prefix, 0, len(cfg.AllowCIDRs))
	for _, p := range cfg.AllowCIDRs {
		allow = append(allow, p.Masked())
	}
	return &Guard{
		allowPrivate: cfg.AllowPrivate,
		allow:        allow,
		blocked:      blockedRanges(),
	}
}

// Allowing is a Guard that also allows extra, such as the ranges granted to
// one tenant: g itself when extra is empty. It shares g's table.
func (g *Guard) Allowing(extra []netip.Prefix) *Guard {
	if len(extra) == 0 {
		return g
	}
	allow := make([]netip.Prefix, 0, len(g.allow)+len(extra))
	allow = append(allow, g.allow...)
	for _, p := range extra {
		allow = append(allow, p.Masked())
	}
	return &Guard{allowPrivate: g.allowPrivate, allow: allow, blocked: g.blocked}
}

// blockedRanges returns the table of refused ranges, from the IANA IPv4
// and IPv6 special-purpose address registries. A table is built per Guard
// rather than kept in a package variable so that no caller can alter
// another's. Where ranges nest, the longest prefix decides (see match).
func blockedRanges() []blockedRange {
	r := func(cidr, name string) blockedRange {
		return blockedRange{prefix: netip.MustParsePrefix(cidr), name: name}
	}
	e := func(cidr, name string, embedded func(netip.Addr) netip.Addr) blockedRange {
		return blockedRange{prefix: netip.MustParsePrefix(cidr), name: name, embedded: embedded}
	}
	return []blockedRange{
		// IPv4.
		r("0.0.0.0/8", "this network; 0.0.0.0 reaches the local host"),
		r("10.0.0.0/8", "private"),
		r("100.64.0.0/10", "shared address space / CGNAT"),
		r("127.0.0.0/8", "loopback"),
		r("169.254.0.0/16", "link-local / cloud metadata"),
		r("172.16.0.0/12", "private"),
		r("192.0.0.0/24", "IETF protocol assignments"),
		r("192.0.2.0/24", "documentation"),
		r("192.88.99.0/24", "6to4 relay anycast"),
		r("192.168.0.0/16", "private"),
		r("198.18.0.0/15", "benchmarking"),
		r("198.51.100.0/24", "documentation"),
		r("203.0.113.0/24", "documentation"),
		r("224.0.0.0/4", "multicast"),
		r("240.0.0.0/4", "reserved"),
		r("255.255.255.255/32", "limited broadcast"),

		// IPv6. ::/8 is reserved by the IETF as a whole; blocking it also
		// catches the forms nobody routes on purpose, such as SIIT's
		// ::ffff:0:a.b.c.d, while the more specific rows below still
		// apply to the parts of it that are in use.
		r("::/8", "reserved by IETF"),
		r("::/128", "unspecified"),
		r("::1/128", "loopback"),
		r("::/96", "IPv4-compatible, deprecated"),
		e("::ffff:0:0/96", "IPv4-mapped", last32),
		// RFC 6052 fixes the well-known NAT64 prefix at /96, so the IPv4
		// address is the last 32 bits. The local-use prefix 64:ff9b:1::/48
		// (RFC 8215) is instead subdivided by each operator, with the IPv4
		// address at a position (RFC 6052 /48, /56, /64 or /96 layout) that
		// cannot be known here; reading the last 32 bits would let an
		// attacker put a public address there and the real, internal one
		// where a /48 translator reads it. So it is refused outright.
		e("64:ff9b::/96", "NAT64", last32),
		r("64:ff9b:1::/48", "local-use NAT64"),
		r("100::/64", "discard-only"),
		r("2001::/23", "IETF protocol assignments, including Teredo"),
		r("2001:db8::/32", "documentation"),
		e("2002::/16", "6to4", sixToFour),
		r("3fff::/20", "documentation"),
		r("fc00::/7", "unique local"),
		r("fe80::/10", "link-local"),
		r("fec0::/10", "site-local, deprecated"),
		r("ff00::/8", "multicast"),
	}
}

// last32 returns the IPv4 address in the last 32 bits of a, as IPv4-mapped
// and well-known NAT64 addresses carry it.
func last32(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:16]))
}

// sixToFour returns the IPv4 address of a 6to4 address, bits 16 to 48
// (RFC 3056): the relay sends the packet there.
func sixToFour(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[2:6]))
}

// blockedError is the refusal. Its message says what was refused and why,
// for the tenant who created the task and the operator who may allow it.
type blockedError struct {
	subject string // "target address 10.0.0.1", "target host localhost"
	why     string // "private 10.0.0.0/8"
	hint    string // how to allow it, if it can be
	// resolved marks a refusal of an address dialled after DNS (Control):
	// its message names the kind of range, never the address nor the
	// range's prefix, which would let a tenant map the operator's
	// internal DNS through its attempts' errors.
	resolved bool
}

func (e *blockedError) Error() string {
	if e.resolved {
		return "target host resolves to a blocked address range (" + e.why + ")" + e.hint
	}
	return e.subject + " is blocked (" + e.why + ")" + e.hint
}

func (e *blockedError) Unwrap() error { return ErrBlocked }

// CheckAddr returns nil if ip may be the target of a webhook, or an error
// wrapping ErrBlocked that names the range it is in. An address carrying
// an IPv4 address (IPv4-mapped, NAT64, 6to4) is judged by that address.
// The zone of an IPv6 address is ignored.
func (g *Guard) CheckAddr(ip netip.Addr) error {
	if g.allowPrivate {
		return nil
	}
	ip = ip.WithZone("")
	if !ip.IsValid() {
		return &blockedError{subject: "target address", why: "no valid address"}
	}
	why, ok := g.check(ip)
	if ok {
		return nil
	}
	return &blockedError{subject: "target address " + ip.String(), why: why, hint: allowHint}
}

// check reports whether ip is allowed, and if not, why: the range and its
// prefix, and the address an address carries.
func (g *Guard) check(ip netip.Addr) (why string, ok bool) {
	return g.checkAs(ip, true)
}

// checkAs is check; unless named, why gives the kind of range alone, with
// no prefix nor address in it.
func (g *Guard) checkAs(ip netip.Addr, named bool) (why string, ok bool) {
	for _, p := range g.allow {
		if p.Contains(ip) {
			return "", true
		}
	}
	r, found := g.match(ip)
	if !found {
		return "", true
	}
	if r.embedded == nil {
		if !named {
			return r.name, false
		}
		return r.name + " " + r.prefix.String(), false
	}
	inner := r.embedded(ip)
	innerWhy, ok := g.checkAs(inner, named)
	if ok {
		return "", true
	}
	if !named {
		return fmt.Sprintf("%s, carrying an address that is %s", r.name, innerWhy), false
	}
	return fmt.Sprintf("%s %s carrying %s, %s", r.name, r.prefix, inner, innerWhy), false
}

// match returns the most specific blocked range containing ip.
func (g *Guard) match(ip netip.Addr) (blockedRange, bool) {
	var best blockedRange
	found := false
	for _, r := range g.blocked {
		if r.prefix.Contains(ip) && (!found || r.prefix.Bits() > best.prefix.Bits()) {
			best, found = r, true
		}
	}
	return best, found
}

// Control is a net.Dialer Control function. It runs after DNS resolution,
// on the address about to be connected, for every address a dial tries;
// that makes it the check that counts, since a host name checked earlier
// may resolve differently now (DNS rebinding). An address it cannot parse
// is refused: the guard fails closed.
//
// Its refusal names the kind of range refused, not the address: the address
// is what a host name resolved to, and it ends in the attempt's error, which
// the tenant reads. (A URL whose host is an address names it anyway; the
// net.OpError around the refusal carries the address dialled, which the
// sender replaces with the URL's host when that is a name.)
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedError{resolved: true, why: "a " + network + " address that cannot be checked"}
	}
	ip := ap.Addr().WithZone("")
	if !ip.IsValid() {
		return &blockedError{resolved: true, why: "no valid address"}
	}
	if why, ok := g.checkAs(ip, false); !ok {
		return &blockedError{resolved: true, why: why, hint: allowHint}
	}
	return nil
}

// CheckURL refuses, when a task is created, a URL that plainly targets a
// blocked address: a host that is an IP address literal, in any form the
// Go dialer or a C resolver would take as one (such as "0", "127.1",
// "0x7f.1" or "2130706433"), a "localhost" name, or no host at all. Other
// host names are allowed here, since what they resolve to can change;
// they are checked when dialled (Control). CheckURL does not look at the
// scheme; that is the caller's to validate.
func (g *Guard) CheckURL(u *url.URL) error {
	if g.allowPrivate {
		return nil
	}
	if u == nil {
		return &blockedError{subject: "target URL", why: "no URL"}
	}
	// The host as net/http dials it: brackets and port stripped, then
	// mapped through IDNA, which turns, for example, fullwidth digits
	// into ASCII ones.
	host := u.Hostname()
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	// A resolver treats a name with one trailing dot as the same name.
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		// net.Dial with an empty host connects to the local system.
		return &blockedError{subject: "target URL " + strconv.Quote(u.Redacted()), why: "it has no host, which dials the local host"}
	}

	if ip, err := netip.ParseAddr(host); err == nil {
		return g.CheckAddr(ip)
	}
	if ip, ok := parseInetAton(host); ok {
		if why, ok := g.check(ip); !ok {
			return &blockedError{
				subject: "target host " + host,
				why:     fmt.Sprintf("read as %s, %s", ip, why),
				hint:    allowHint,
			}
		}
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		// RFC 6761: these names resolve to loopback. They pass only if
		// the operator allowed loopback; the dial is checked again.
		whyV4, okV4 := g.check(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
		if _, okV6 := g.check(netip.IPv6Loopback()); okV4 || okV6 {
			return nil
		}
		return &blockedError{
			subject: "target host " + host,
			why:     "the local host, " + whyV4,
			hint:    allowHint,
		}
	}
	return nil
}

// parseInetAton parses s as the C library's inet_aton does, which is what
// getaddrinfo, and so Go's cgo resolver, makes of a numeric host: one to
// four parts separated by dots, each decimal, octal (leading 0) or
// hexadecimal (leading 0x), the last part filling the remaining bytes;
// "127.1" is 127.0.0.1 and "2130706433" is too. netip.ParseAddr accepts
// only the four-part decimal form.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, p = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		if p == "" || p[0] == '+' || p[0] == '-' {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	// Every part but the last is one byte; the last fills the rest.
	var n uint64
	for _, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n = n<<8 | v
	}
	restBits := 8 * uint(4-len(vals)+1)
	last := vals[len(vals)-1]
	if last >= 1<<restBits {
		return netip.Addr{}, false
	}
	n = n<<restBits | last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// Dial timeouts of DialContext.
const (
	dialTimeout   = 5 * time.Second
	dialKeepAlive = 30 * time.Second
)

// DialContext returns a dial function for http.Transport.DialContext whose
// every connection passes Control. The transport's Proxy must be nil: with
// a proxy, the guard would check the proxy's address, not the target's.
func (g *Guard) DialContext() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: dialKeepAlive,
		Control:   g.Control,
	}
	return d.DialContext
}

// ParseCIDRs parses a comma-separated list of CIDR ranges, the form of
// HOOKWHEEL_TARGET_ALLOW_CIDRS, such as "10.20.0.0/16, fd00::/8". Spaces
// around entries and empty entries are ignored; a bare address stands for
// itself alone (/32 or /128); host bits are cleared ("10.20.1.1/16" is
// 10.20.0.0/16). An empty string gives an empty list.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if !strings.Contains(entry, "/") {
			ip, err := netip.ParseAddr(entry)
			if err != nil {
				return nil, fmt.Errorf("CIDR list entry %d %q is neither a CIDR (like 10.20.0.0/16) nor an address: %w", i+1, entry, err)
			}
			if ip.Zone() != "" {
				return nil, fmt.Errorf("CIDR list entry %d %q: an address with a zone cannot be allowed", i+1, entry)
			}
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, fmt.Errorf("CIDR list entry %d %q is not a CIDR (like 10.20.0.0/16): %w", i+1, entry, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
