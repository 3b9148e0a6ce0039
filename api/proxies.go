package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// trustedProxies is the one policy for what a request's forwarding headers
// may say: a call whose connection comes from one of these ranges (Config.
// TrustedProxies) is taken at its X-Forwarded-For and X-Forwarded-Proto;
// any other's headers are the client's own word, and ignored.
type trustedProxies []netip.Prefix

// ipExtractor reads the client address: the connection's peer, or, behind
// a trusted proxy, the address X-Forwarded-For names past the trusted hops.
func (t trustedProxies) ipExtractor() echo.IPExtractor {
	if len(t) == 0 {
		return echo.ExtractIPDirect()
	}
	trust := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range t {
		trust = append(trust, echo.TrustIPRange(netipToIPNet(p)))
	}
	return echo.ExtractIPFromXFFHeader(trust...)
}

// peerTrusted reports whether r's connection comes from a trusted proxy.
func (t trustedProxies) peerTrusted(r *http.Request) bool {
	if len(t) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range t {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// secure reports whether the client reached hookwheel over HTTPS: the
// connection's own TLS, or the X-Forwarded-Proto of a trusted proxy. Of a
// list, the last value counts: the one the trusted peer itself set, where
// a proxy that appends would have kept a client's own claim before it.
// Echo's Context.Scheme believes the header from anyone, which lets a
// client decide whether its session cookie is marked Secure.
func (t trustedProxies) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !t.peerTrusted(r) {
		return false
	}
	values := r.Header.Values(echo.HeaderXForwardedProto)
	if len(values) == 0 {
		return false
	}
	last := values[len(values)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.EqualFold(strings.TrimSpace(last), "https")
}
