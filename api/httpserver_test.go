package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
)

// serveWithin runs handler on a real listener within limits and returns its
// address.
func serveWithin(t *testing.T, limits api.ServerLimits, handler http.Handler) string {
	t.Helper()
	ln, err := api.Listen("127.0.0.1:0", limits)
	require.NoError(t, err)
	srv := api.NewHTTPServer(handler, limits, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
})

// closingHandler answers as net/http answers errors by itself: plain text,
// closing the connection.
var closingHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, "400 Bad Request")
})

// waitClosed waits until the server closes conn, failing after within.
func waitClosed(t *testing.T, conn net.Conn, within time.Duration) {
	t.Helper()
	started := time.Now()
	require.NoError(t, conn.SetReadDeadline(started.Add(within)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open for %s", within)
}

// TestServerClosesIdleConnections: a connection kept alive after a request
// is closed once idle for IdleTimeout; before, it stayed open for ever.
func TestServerClosesIdleConnections(t *testing.T) {
	t.Parallel()
	addr := serveWithin(t, api.ServerLimits{IdleTimeout: 300 * time.Millisecond}, okHandler)
	var conns []net.Conn
	for range 20 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		conns = append(conns, conn)
	}
	// Kept alive at first...
	last := conns[len(conns)-1]
	require.NoError(t, last.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err := last.Read(make([]byte, 1))
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "the connection must stay open for another request: %v", err)
	// ...and closed once idle.
	for _, conn := range conns {
		waitClosed(t, conn, 10*time.Second)
	}
}

// TestServerCutsTrickledRequests: a request whose body arrives a byte at a
// time is cut off at ReadTimeout.
func TestServerCutsTrickledRequests(t *testing.T) {
	t.Parallel()
	addr := serveWithin(t, api.ServerLimits{ReadTimeout: 500 * time.Millisecond}, okHandler)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	require.NoError(t, err)
	trickle := time.NewTicker(100 * time.Millisecond)
	defer trickle.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := io.WriteString(conn, " "); err != nil {
			break // the server closed the connection
		}
		require.True(t, time.Now().Before(deadline), "a trickled request was still being read after 10s")
		<-trickle.C
	}
}

// TestServerCapsConnections: beyond MaxConns, a new connection waits until
// one closes.
func TestServerCapsConnections(t *testing.T) {
	t.Parallel()
	addr := serveWithin(t, api.ServerLimits{MaxConns: 2}, okHandler)
	held := make([]net.Conn, 2)
	for i := range held {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		held[i] = conn
	}
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	_, err := client.Get("http://" + addr + "/healthz")
	require.Error(t, err, "a third connection must wait while two are open")

	require.NoError(t, held[0].Close())
	client.Timeout = 10 * time.Second
	resp, err := client.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestServerErrorsAreProblems: what net/http answers by itself, before any
// handler, is problem+json like every other error; a handler's answer of
// the same shape is left alone.
func TestServerErrorsAreProblems(t *testing.T) {
	t.Parallel()
	addr := serveWithin(t, api.ServerLimits{MaxHeaderBytes: 1024}, closingHandler)
	cases := []struct {
		name    string
		request string
		status  int
		slug    string
	}{
		{"malformed request line", "GARBAGE\r\n\r\n", http.StatusBadRequest, "malformed-request"},
		{"malformed header", "GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", http.StatusBadRequest, "malformed-request"},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", http.StatusBadRequest, "malformed-request"},
		{"headers too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge, "headers-too-large"},
		{"unknown transfer encoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", http.StatusNotImplemented, "not-implemented"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer conn.Close()
			_, err = io.WriteString(conn, tc.request)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			requireSecurityHeaders(t, resp.Header)
			var p struct {
				Type   string `json:"type"`
				Title  string `json:"title"`
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
			require.Equal(t, "urn:hookwheel:problem:"+tc.slug, p.Type)
			require.Equal(t, tc.status, p.Status)
			require.Equal(t, http.StatusText(tc.status), p.Title)
			require.NotEmpty(t, p.Detail)
		})
	}

	t.Run("a handler's answer", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Get("http://" + addr + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Equal(t, "400 Bad Request", string(body))
		require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	})
}
