package api

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrustedProxiesSecure: a request is secure over TLS whatever its
// headers, and otherwise only when a trusted proxy's X-Forwarded-Proto says
// https; an untrusted peer's header is ignored.
func TestTrustedProxiesSecure(t *testing.T) {
	t.Parallel()
	proxies := trustedProxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	cases := []struct {
		name   string
		peer   string
		tls    bool
		proto  string
		secure bool
	}{
		{"trusted proxy says https", "10.1.2.3:5000", false, "https", true},
		{"trusted proxy says HTTPS after a client's http", "10.1.2.3:5000", false, "http, HTTPS", true},
		{"trusted proxy says http after a client's https", "10.1.2.3:5000", false, "https, http", false},
		{"trusted IPv6 proxy", "[2001:db8::1]:5000", false, "https", true},
		{"trusted IPv4-mapped proxy", "[::ffff:10.1.2.3]:5000", false, "https", true},
		{"trusted proxy says http", "10.1.2.3:5000", false, "http", false},
		{"trusted proxy over TLS says http", "10.1.2.3:5000", true, "http", true},
		{"trusted proxy says nothing", "10.1.2.3:5000", false, "", false},
		{"untrusted peer says https", "203.0.113.9:5000", false, "https", false},
		{"untrusted peer over TLS", "203.0.113.9:5000", true, "", true},
		{"untrusted peer over TLS says http", "203.0.113.9:5000", true, "http", true},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodPost, "/v1/session", nil)
		r.RemoteAddr = tc.peer
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		} else {
			r.TLS = nil
		}
		if tc.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		require.Equal(t, tc.secure, proxies.secure(r), tc.name)
		require.Equal(t, tc.tls, trustedProxies(nil).secure(r), "%s, no proxy trusted", tc.name)
	}
}
