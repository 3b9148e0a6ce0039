package app

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookwheel/hookwheel/api"
)

// The listeners of metrics and profiles apart from the API's, and the
// handlers that put the dashboard and the reference beside the API.

// opsServer is a listener for operators only, apart from the API's.
type opsServer struct {
	name     string
	server   *http.Server
	listener net.Listener
}

// listenOps binds the listeners of metrics and profiles that cfg asks for,
// one per address: both on one address share it.
func listenOps(cfg Config, registry *prometheus.Registry) ([]*opsServer, error) {
	var (
		out    []*opsServer
		byAddr = map[string]*opsServer{}
		muxes  = map[string]*http.ServeMux{}
	)
	muxAt := func(addr, name string) *http.ServeMux {
		if o, ok := byAddr[addr]; ok {
			o.name += " and " + name
			return muxes[addr]
		}
		mux := http.NewServeMux()
		// Operators' own tools on their own network: the API server's
		// bounds are not needed, but no client may hold a connection open
		// with half a request.
		o := &opsServer{name: name, server: &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
		out, byAddr[addr], muxes[addr] = append(out, o), o, mux
		return mux
	}
	if cfg.MetricsAddr != "" {
		metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry})
		// The same headers as every API answer; pprof's pages go without,
		// as their inline styles would break under the API's CSP.
		muxAt(cfg.MetricsAddr, "metrics").Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			api.SetSecurityHeaders(w.Header())
			metrics.ServeHTTP(w, r)
		}))
	}
	if cfg.PprofAddr != "" {
		mux := muxAt(cfg.PprofAddr, "profiles")
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	for _, o := range out {
		ln, err := net.Listen("tcp", o.server.Addr)
		if err != nil {
			closeOps(out)
			return nil, fmt.Errorf("listen for %s on %s: %w", o.name, o.server.Addr, err)
		}
		o.listener = ln
	}
	return out, nil
}

// closeOps closes the listeners bound; once served, their server has
// closed them already, and closing again does nothing.
func closeOps(ops []*opsServer) {
	for _, o := range ops {
		if o.listener != nil {
			_ = o.listener.Close()
		}
	}
}

// MetricsAddr is the address the node serves /metrics on apart from the API
// (useful with port 0); empty when Config.MetricsAddr is.
func (n *Node) MetricsAddr() string {
	for _, o := range n.ops {
		if o.server.Addr == n.cfg.MetricsAddr {
			return o.listener.Addr().String()
		}
	}
	return ""
}

// withDashboard serves the dashboard under /ui/ (and sends / there), the
// API reference at /docs and the portal under /portal/ beside the API.
func withDashboard(apiHandler, dashboard, docs, portal http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/"):
			dashboard.ServeHTTP(w, r)
		case r.URL.Path == "/docs" || strings.HasPrefix(r.URL.Path, "/docs/"):
			docs.ServeHTTP(w, r)
		case r.URL.Path == "/portal" || strings.HasPrefix(r.URL.Path, "/portal/"):
			portal.ServeHTTP(w, r)
		case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			api.SetSecurityHeaders(w.Header())
			http.Redirect(w, r, "/ui/", http.StatusFound)
		default:
			apiHandler.ServeHTTP(w, r)
		}
	})
}

// operationsOnly serves just health, readiness and metrics, for a
// dispatcher-only node.
func operationsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			h.ServeHTTP(w, r)
		default:
			api.SetSecurityHeaders(w.Header())
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"urn:hookwheel:problem:not-found","title":"Not found","status":404,"detail":"this node runs the dispatcher only"}` + "\n"))
		}
	})
}
