package e2e_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
)

// securityHeaders are the headers every answer of a node carries
// (docs/security.md).
var securityHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
	"Cache-Control":           "no-store",
}

// TestSecurityHeadersOutsideTheAPI: the answers a node writes without the
// API's handlers, a dispatcher-only node's refusals and net/http's own
// answers to malformed requests, carry the security headers too.
func TestSecurityHeadersOutsideTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.DisableAPI = true })

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/tasks", http.StatusNotFound},
		{"/v1/admin/tenants", http.StatusNotFound},
		{"/healthz", http.StatusOK},
		{"/readyz", http.StatusOK},
	} {
		resp, body := rawRequest(t, http.MethodGet, n.base+tc.path, "", nil, nil)
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.path, body)
		requireSecurityHeaders(t, resp.Header)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(n.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GARBAGE\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	requireSecurityHeaders(t, resp.Header)
}

func requireSecurityHeaders(t *testing.T, header http.Header) {
	t.Helper()
	for name, want := range securityHeaders {
		require.Equal(t, []string{want}, header.Values(name), "header %s", name)
	}
}
