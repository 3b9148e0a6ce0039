// Package web is hookwheel's dashboard: a page application served under
// /ui/ from files embedded in the binary, drawing every page from the public
// API with the session cookie the API issues (POST /v1/session). It holds no
// data access and no rules of its own, so a tenant sees in the dashboard
// exactly what its key may see through the API, and nothing the API does
// not offer. web/README.md says why it is built this way.
//
// The package also serves the API reference at /docs (Docs): the OpenAPI
// document rendered in the browser by a pinned copy of Redoc; and the
// portal at /portal/ (Portal): the read-only page a portal link opens.
package web

import (
	"bytes"
	"embed"
	"fmt"
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

// docsContentSecurityPolicy is the API reference's own policy, looser than
// the dashboard's in exactly what Redoc needs and nothing else:
//
//   - style-src 'unsafe-inline': Redoc styles its components with
//     styled-components, which writes <style> elements at run time, and React
//     sets style attributes; neither can carry a nonce from a static page.
//   - worker-src blob: Redoc's search index runs in a Web Worker that the
//     bundle creates from a Blob URL of its own code.
//
// Scripts are still only the page's own files (no inline script, no eval),
// it reaches only its own origin (the document at /openapi.yaml) and may not
// be framed.
const docsContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// redocLogo is the one thing Redoc's bundle loads from elsewhere: the logo
// beside "API docs by Redocly" at the foot of its menu, from Redocly's CDN.
// The page would tell Redocly of every visit (and fail where there is no
// Internet), so the bundle is served with an empty image in its place, which
// Redoc drops from the page when it does not load; the link stays.
const (
	redocLogo       = `src:"https://cdn.redoc.ly/redoc/logo-mini.svg"`
	redocLogoServed = `src:"data:,"`
)

// Docs returns the handler of /docs and what is under it: the API reference,
// a page that renders the OpenAPI document the server serves at
// /openapi.yaml with Redoc, and the page's files under /docs/static/.
func Docs() http.Handler {
	page, err := fs.ReadFile(static, "static/docs/index.html")
	if err != nil {
		panic(err) // embedded with the package
	}
	bundle, err := fs.ReadFile(static, "static/vendor/docs/redoc.standalone.js")
	if err != nil {
		panic(err)
	}
	bundle, err = servedRedoc(bundle)
	if err != nil {
		panic(err)
	}
	files, err := fs.Sub(static, "static/docs")
	if err != nil {
		panic(err)
	}
	built := time.Now()
	assets := http.StripPrefix("/docs/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		w.Header().Set("Content-Security-Policy", docsContentSecurityPolicy)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch p := r.URL.Path; {
		case p == "/docs" || p == "/docs/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			http.ServeContent(w, r, "index.html", built, bytes.NewReader(page))
		case p == "/docs/static/redoc.standalone.js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			http.ServeContent(w, r, "redoc.standalone.js", built, bytes.NewReader(bundle))
		case strings.HasPrefix(p, "/docs/static/") && path.Base(p) != "index.html" && !strings.HasSuffix(p, "/"):
			assets.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// servedRedoc is Redoc's bundle as the page gets it: the vendored file with
// its logo replaced (see redocLogo). A bundle without that logo, or with it
// more than once, is not the one this was written for.
func servedRedoc(vendored []byte) ([]byte, error) {
	if n := bytes.Count(vendored, []byte(redocLogo)); n != 1 {
		return nil, fmt.Errorf("redoc.standalone.js names Redocly's logo %d times, not once: check what it loads before serving it", n)
	}
	return bytes.Replace(vendored, []byte(redocLogo), []byte(redocLogoServed), 1), nil
}

// DefaultPortalFrameAncestors lets any page frame the portal: it is read
// only (no control on it changes anything, so a frame has nothing to trick
// a person into clicking), and what it shows is already in the hands of
// whoever holds the link, framing page included. A multi-tenant
// installation cannot list every tenant's application origin either.
const DefaultPortalFrameAncestors = "*"

// portalPolicy is the portal page's policy: the dashboard's, but for the
// pages that may frame it.
func portalPolicy(frameAncestors string) string {
	return strings.TrimSuffix(contentSecurityPolicy, "'none'") + frameAncestors
}

// ParseFrameAncestors checks the value of HOOKWHEEL_PORTAL_FRAME_ANCESTORS,
// a CSP frame-ancestors source list ("'none'", "'self'", "*", schemes such
// as "https:", hosts such as "https://*.example.com"), and returns it
// normalised; "" is DefaultPortalFrameAncestors. Anything that could end
// the directive or the header (';', ',', quotes but in 'self' and 'none',
// control characters) is refused.
func ParseFrameAncestors(v string) (string, error) {
	sources := strings.Fields(v)
	if len(sources) == 0 {
		return DefaultPortalFrameAncestors, nil
	}
	for _, src := range sources {
		switch {
		case src == "'none'":
			if len(sources) > 1 {
				return "", fmt.Errorf("'none' must stand alone, got %q", v)
			}
		case src == "'self'" || src == "*":
		default:
			for _, c := range src {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:/*_[]", c)) {
					return "", fmt.Errorf("%q is not a frame-ancestors source: want 'self', 'none', *, a scheme (https:) or a host (https://app.example.com)", src)
				}
			}
		}
	}
	return strings.Join(sources, " "), nil
}

// portalAssets are the embedded files the portal's page loads, under
// /portal/static/: only these, so that the portal's path serves nothing of
// the dashboard's but its style.
var portalAssets = map[string]string{
	"portal.js":   "text/javascript; charset=utf-8",
	"style.css":   "text/css; charset=utf-8",
	"favicon.svg": "image/svg+xml",
}

// Portal returns the handler of /portal/ and what is under it: the
// portal's page for every path but its files under /portal/static/. The
// page may be framed by frameAncestors (see ParseFrameAncestors), where the
// dashboard may be framed by none.
func Portal(frameAncestors string) (http.Handler, error) {
	frameAncestors, err := ParseFrameAncestors(frameAncestors)
	if err != nil {
		return nil, err
	}
	page, err := fs.ReadFile(static, "static/portal.html")
	if err != nil {
		return nil, fmt.Errorf("portal page: %w", err)
	}
	assets := map[string][]byte{}
	for name := range portalAssets {
		if assets[name], err = fs.ReadFile(static, "static/"+name); err != nil {
			return nil, fmt.Errorf("portal file %s: %w", name, err)
		}
	}
	policy := portalPolicy(frameAncestors)
	built := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		w.Header().Set("Content-Security-Policy", policy)
		if frameAncestors != "'none'" {
			// X-Frame-Options cannot name several origins; browsers that
			// read frame-ancestors ignore it anyway.
			w.Header().Del("X-Frame-Options")
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/portal/static/"); ok {
			body, known := assets[name]
			if !known {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", portalAssets[name])
			http.ServeContent(w, r, name, built, bytes.NewReader(body))
			return
		}
		if r.URL.Path == "/portal" {
			http.Redirect(w, r, "/portal/", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, "portal.html", built, bytes.NewReader(page))
	}), nil
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
