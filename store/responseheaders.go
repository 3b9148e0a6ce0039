package store

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds of the response headers an attempt keeps (EncodeResponseHeaders).
// They keep an attempt row small however a receiver answers: at most
// MaxResponseHeaders headers and MaxResponseHeaderBytes of names and values
// together, each value cut to MaxResponseHeaderValue bytes first.
const (
	MaxResponseHeaders     = 32
	MaxResponseHeaderBytes = 4 << 10
	MaxResponseHeaderValue = 512
)

// EncodeResponseHeaders returns the headers of a receiver's response that
// its attempt keeps, as the JSON object the attempts.response_headers column
// holds: canonical header names to their values, a repeated header's values
// joined with ", " (RFC 9110's list form).
//
// The rules, which the README and docs/security.md repeat:
//   - Never kept: a header whose name contains, in any case, one of "auth",
//     "session", "credential", "token", "secret", "password", "passwd",
//     "key", "signature" or "cookie" (credentialWords), which covers
//     Authorization, Proxy-Authorization, Cookie, Set-Cookie, Set-Cookie2,
//     X-Api-Key, X-Session-Id, X-Amz-Credential and the like. The tenant may
//     own the receiver, but attempts are shown to every key that reads tasks
//     and in the dashboard, and kept for the retention period: a credential
//     has no business there, and a name is all there is to tell one by, so
//     the rule errs towards dropping. Exempt are Retry-After and
//     Hookwheel-Retry, which hookwheel acts on, and the challenges
//     Www-Authenticate and Proxy-Authenticate, which name a scheme and a
//     realm (and an error), never a secret, and explain a 401 or a 407.
//   - Location and Content-Location keep their scheme, host and path only:
//     their query and fragment, which can carry an OAuth code or a presigned
//     URL's token (a 3xx is recorded, not followed), and any user:password@
//     are removed.
//   - Each value (after joining) is cut to MaxResponseHeaderValue bytes, at
//     a character boundary.
//   - Then headers are kept in this order while fewer than
//     MaxResponseHeaders are kept and their names and values stay within
//     MaxResponseHeaderBytes: first the headers hookwheel acts on
//     (Retry-After, Hookwheel-Retry), so an attempt always shows why it was
//     retried when it was or not retried at all; then the others, smallest
//     (name and value) first, ties by name. So when a response has too many
//     or too large headers, the largest are dropped first: they are the
//     least telling (policies, link lists), and the short ones that explain
//     an answer (Content-Type, a request id, the server) stay.
//
// Invalid UTF-8 and NUL bytes become U+FFFD, so the text is always valid
// jsonb. It allocates the returned string and little else, since it runs
// once per attempt.
func EncodeResponseHeaders(h http.Header) string {
	var stack [64]keptHeader
	kept := stack[:0]
	for name, values := range h {
		if len(values) == 0 {
			continue
		}
		canonical := http.CanonicalHeaderKey(name)
		if canonical != name {
			if _, dup := h[canonical]; dup {
				// The canonical spelling is there too, and kept instead.
				continue
			}
		}
		if credentialHeader(canonical) {
			continue
		}
		if canonical == "Location" || canonical == "Content-Location" {
			values = stripURLs(values)
		}
		valueLen := len(values[0])
		for _, v := range values[1:] {
			valueLen += len(", ") + len(v)
		}
		kept = append(kept, keptHeader{
			name:   canonical,
			values: values,
			size:   len(canonical) + min(valueLen, MaxResponseHeaderValue),
			first:  canonical == "Retry-After" || canonical == "Hookwheel-Retry",
		})
	}
	slices.SortFunc(kept, func(a, b keptHeader) int {
		switch {
		case a.first != b.first:
			if a.first {
				return -1
			}
			return 1
		case a.size != b.size:
			return cmp.Compare(a.size, b.size)
		default:
			return strings.Compare(a.name, b.name)
		}
	})

	bp := headerBuffers.Get().(*[]byte)
	b := append((*bp)[:0], '{')
	count, total := 0, 0
	for _, k := range kept {
		if count == MaxResponseHeaders {
			break
		}
		if total+k.size > MaxResponseHeaderBytes {
			// Not break: the first-kept headers are out of size
			// order, so a later one may still fit.
			continue
		}
		if count > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k.name, len(k.name))
		b = append(b, ':', '"')
		b = appendHeaderValue(b, k.values)
		b = append(b, '"')
		count++
		total += k.size
	}
	b = append(b, '}')
	out := string(b)
	*bp = b
	headerBuffers.Put(bp)
	return out
}

// keptHeader is one candidate of EncodeResponseHeaders.
type keptHeader struct {
	name   string
	values []string
	size   int  // name and value bytes, the value cut to MaxResponseHeaderValue
	first  bool // hookwheel acts on it: kept before the others
}

// headerBuffers are EncodeResponseHeaders' scratch buffers, so that
// encoding allocates only the result.
var headerBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// credentialHeader reports whether the canonical header name may carry a
// credential and is never kept.
func credentialHeader(name string) bool {
	switch name {
	case "Retry-After", "Hookwheel-Retry", "Www-Authenticate", "Proxy-Authenticate":
		return false
	}
	for _, word := range credentialWords {
		if containsFold(name, word) {
			return true
		}
	}
	return false
}

// credentialWords are what a header name that may carry a credential
// contains: "auth" covers Authorization and X-Auth-*, "key" X-Api-Key and
// X-Access-Key, "cookie" Cookie and Set-Cookie, and so on.
var credentialWords = [...]string{
	"auth", "session", "credential", "token", "secret", "password", "passwd", "key", "signature", "cookie",
}

// stripURLs returns the URL values of a Location or Content-Location header
// without their query, fragment and userinfo, which may carry credentials.
// It allocates only when it changes something.
func stripURLs(values []string) []string {
	var out []string
	for i, v := range values {
		s := stripURL(v)
		if s == v && out == nil {
			continue
		}
		if out == nil {
			out = make([]string, len(values))
			copy(out, values[:i])
		}
		out[i] = s
	}
	if out == nil {
		return values
	}
	return out
}

// stripURL returns the URL reference v, absolute or relative, cut before its
// query or fragment and without the userinfo of its authority.
func stripURL(v string) string {
	if i := strings.IndexAny(v, "?#"); i >= 0 {
		v = v[:i]
	}
	start := -1
	if strings.HasPrefix(v, "//") {
		start = 2
	} else if i := strings.Index(v, "://"); i > 0 && isScheme(v[:i]) {
		start = i + 3
	}
	if start < 0 {
		return v
	}
	authority := v[start:]
	if end := strings.IndexByte(authority, '/'); end >= 0 {
		authority = authority[:end]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		return v[:start] + v[start+at+1:]
	}
	return v
}

// isScheme reports whether s is a URI scheme (RFC 3986 section 3.1).
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// containsFold reports whether s contains the lower-case ASCII word in any
// case, without allocating.
func containsFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		match := true
		for j := 0; j < len(word); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != word[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// appendHeaderValue appends values, joined with ", " and cut to
// MaxResponseHeaderValue bytes at a character boundary, escaped for a JSON
// string.
func appendHeaderValue(b []byte, values []string) []byte {
	room := MaxResponseHeaderValue
	for i, v := range values {
		if i > 0 {
			if room < len(", ") {
				break
			}
			b = append(b, ',', ' ')
			room -= len(", ")
		}
		before := room
		b = appendJSONStringBody(b, v, &room)
		if room == 0 || before-room < len(v) {
			break
		}
	}
	return b
}

// appendJSONString appends s, cut to limit bytes, as a quoted JSON string.
func appendJSONString(b []byte, s string, limit int) []byte {
	b = append(b, '"')
	b = appendJSONStringBody(b, s, &limit)
	return append(b, '"')
}

// appendJSONStringBody appends as much of s as *room bytes of it allow,
// escaped for a JSON string, ending at a character boundary, and takes the
// bytes of s it used from *room. Invalid UTF-8 and NUL (which jsonb refuses
// even escaped) become U+FFFD.
func appendJSONStringBody(b []byte, s string, room *int) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if *room < 1 {
				return b
			}
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\t':
				b = append(b, '\\', 't')
			case c == 0:
				b = append(b, `\ufffd`...)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			*room--
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if *room < size {
			return b
		}
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
		*room -= size
	}
	return b
}
