// Package web is hookwheel's dashboard: a page application served under
// /ui/ from files embedded in the binary, drawing every page from the public
// API with the session cookie the API issues (POST /v1/session). It holds no
// data access and no rules of its own, so a tenant sees in the dashboard
// exactly what its key may see through the API, and nothing the API does
// not offer. web/README.md says why it is built this way.
package web

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy lets pages run only the dashboard's own files and
// talk only to their own origin: no inline script or style, no frames, no
// forms to elsewhere. uPlot styles its elements through the CSSOM, which
// style-src does not govern.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// New returns the handler of every path under /ui/: the embedded files under
// /ui/static/, and the application's page for any other path, which it
// routes in the browser.
func New() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	// The embedded files carry no modification time; the binary's start
	// stands in for it, so that browsers revalidate after an upgrade.
	built := time.Now()
	assets := http.StripPrefix("/ui/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/ui/static/") {
			if path.Base(r.URL.Path) == "index.html" || strings.HasSuffix(r.URL.Path, "/") {
				http.NotFound(w, r)
				return
			}
			assets.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, "index.html", built, bytes.NewReader(index))
	})
}

func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// Pages and scripts are small; revalidating each time keeps a browser
	// from running an old script against a newer API.
	h.Set("Cache-Control", "no-cache")
}
