package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"
)

// ServerLimits bound what a client may hold of the HTTP server: how long it
// may take to send a request, to read an answer, to keep a connection idle,
// and how many connections it may open. Without them, connections opened
// and left idle, or requests trickled a byte at a time, are held for ever,
// unauthenticated. Zero fields take the defaults.
type ServerLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer. Default 60s.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request for this
	// long. Default 60s: above the 30-60s most proxies keep, and below the
	// 90s of Go's and most clients' pools would make a client reuse a
	// connection the server is closing.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; further ones wait in
	// the listen backlog until one closes. Default 10,000.
	MaxConns int
}

func (l *ServerLimits) setDefaults() {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 30 * time.Second
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 60 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 60 * time.Second
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 10_000
	}
}

// NewHTTPServer is the HTTP server for h, within limits, with net/http's own
// error log going to logger at warning level.
func NewHTTPServer(h http.Handler, limits ServerLimits, logger *slog.Logger) *http.Server {
	limits.setDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// Listen listens on addr for NewHTTPServer: at most limits.MaxConns
// connections at once, and the answers net/http gives by itself rewritten as
// problem+json.
func Listen(addr string, limits ServerLimits) (net.Listener, error) {
	limits.setDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return problemListener{netutil.LimitListener(ln, limits.MaxConns)}, nil
}

// problemListener hands out problemConns.
type problemListener struct{ net.Listener }

func (l problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return problemConn{c}, nil
}

// problemConn rewrites the error answers net/http writes by itself, before
// any handler runs (a malformed request, headers too large, an unknown
// transfer encoding), as problem+json like every other error of the API.
// Hand-written because net/http has no hook for them: it writes each
// straight to the connection, in one Write of a fixed shape (see
// goErrorAnswer), and then closes it.
type problemConn struct{ net.Conn }

func (c problemConn) Write(b []byte) (int, error) {
	if answer, ok := goErrorAnswer(b); ok {
		if _, err := c.Conn.Write(answer); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// goErrorHeaders follow the status line of every error answer net/http
// writes by itself. A handler's answer always carries a Date header, so no
// handler's answer looks like this.
var goErrorHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

// goErrorAnswer recognizes an error answer of net/http's own in b,
// "HTTP/1.1 400 Bad Request: <reason>" + goErrorHeaders + text, and returns
// it as problem+json.
func goErrorAnswer(b []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 3 {
		return nil, false
	}
	// Every answer's first Write starts with its status line: look no
	// further than the end of that line, so that a handler's answer costs
	// a scan of its status line, not of its headers and body.
	end := bytes.Index(rest, goErrorHeaders[:2])
	if end < 0 || !bytes.HasPrefix(rest[end:], goErrorHeaders) {
		return nil, false
	}
	statusLine, text := rest[:end], rest[end+len(goErrorHeaders):]
	code, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil || code < 400 || code > 599 {
		return nil, false
	}
	title := http.StatusText(code)
	detail := string(text)
	if _, reason, ok := bytes.Cut(statusLine, []byte(": ")); ok {
		detail = string(reason)
	}
	switch code {
	case http.StatusRequestHeaderFieldsTooLarge:
		detail = "the request's headers are larger than this server accepts"
	case http.StatusBadRequest:
		if detail == "400 Bad Request" {
			detail = "the request is not valid HTTP"
		}
	}
	body, err := json.Marshal(map[string]any{
		"type":   problemTypePrefix + goErrorSlug(code),
		"title":  title,
		"status": code,
		"detail": detail,
	})
	if err != nil {
		return nil, false
	}
	body = append(body, '\n')
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\nConnection: close\r\n",
		code, title, len(body))
	// No handler ran to set them (see withSecurityHeaders).
	for _, h := range securityHeaders {
		fmt.Fprintf(&out, "%s: %s\r\n", h.name, h.value)
	}
	out.WriteString("\r\n")
	out.Write(body)
	return out.Bytes(), true
}

func goErrorSlug(code int) string {
	switch code {
	case http.StatusRequestHeaderFieldsTooLarge:
		return "headers-too-large"
	case http.StatusNotImplemented:
		return "not-implemented"
	default:
		return "malformed-request"
	}
}
