package tasks

import (
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/hookwheel/hookwheel/internal/model"
)

// MaxURLPrefix is the longest URL prefix a bulk edit moves tasks from or to,
// in characters, as long as a list's or a bulk replay's URL condition.
const MaxURLPrefix = 2048

// BulkEditRequest is a bulk replay's edit as asked for (nil: not given).
type BulkEditRequest struct {
	// URLFrom and URLTo come together, or neither.
	URLFrom, URLTo *string
	SetHeaders     map[string]string
	RemoveHeaders  []string
	// URLPrefixGiven and HeadersGiven say the edit has a url_prefix or a
	// headers member, which must then change something.
	URLPrefixGiven, HeadersGiven bool
}

// CheckBulkEdit checks the edit of a bulk replay of tenant, under the
// fields of the API's "edit", and returns it as the store applies it. The
// URL of each task it changes is checked again, in full, by EditTask.
func (r Rules) CheckBulkEdit(rep Reporter, req BulkEditRequest, tenant *model.Tenant) model.BulkEdit {
	var e model.BulkEdit
	given := req.URLPrefixGiven || req.URLFrom != nil || req.URLTo != nil
	switch {
	case !given && !req.HeadersGiven:
		rep.Add("edit", "must change something: give url_prefix, headers or both")
		return e
	case given && req.URLFrom == nil && req.URLTo == nil:
		rep.Add("edit.url_prefix", "must give from and to")
	case given:
		from := checkURLPrefix(rep, "edit.url_prefix.from", req.URLFrom)
		to := checkURLPrefix(rep, "edit.url_prefix.to", req.URLTo)
		switch {
		case from == "" || to == "":
		case from == to:
			rep.Add("edit.url_prefix.to", "is the same as from: no URL would change")
		case completeAuthority(to) && r.CheckURL(rep, "edit.url_prefix.to", to, tenant) == "":
			// A prefix whose host is complete is refused at once when it
			// is: every task moved there would be.
		default:
			e.URLFrom, e.URLTo = from, to
		}
	}
	if req.HeadersGiven {
		if len(req.SetHeaders) == 0 && len(req.RemoveHeaders) == 0 {
			rep.Add("edit.headers", "must set or remove a header: give set, remove or both")
		}
		e.SetHeaders = CheckHeaders(renamed{rep, "headers", "edit.headers.set"}, req.SetHeaders)
		if len(req.RemoveHeaders) > MaxHeaders {
			rep.Add("edit.headers.remove", "must hold at most %d names", MaxHeaders)
		}
		set := make(map[string]bool, len(req.SetHeaders))
		for name := range req.SetHeaders {
			set[headerIdentity(name)] = true
		}
		for _, name := range req.RemoveHeaders {
			switch {
			case !httpguts.ValidHeaderFieldName(name):
				rep.Add("edit.headers.remove", "%q is not a valid header name", name)
			case set[headerIdentity(name)]:
				rep.Add("edit.headers.remove", "%q is also in set: a header is set or removed, not both", name)
			default:
				e.RemoveHeaders = append(e.RemoveHeaders, headerIdentity(name))
			}
		}
	}
	return e
}

// checkURLPrefix checks one side of a URL prefix move: an http or https
// URL naming at least the start of a host. It returns the prefix, or ""
// when it is refused.
func checkURLPrefix(rep Reporter, field string, p *string) string {
	if p == nil {
		rep.Add(field, "is required: give both from and to")
		return ""
	}
	var fe FieldErrors
	CheckText(&fe, field, p, MaxURLPrefix)
	if len(fe) > 0 {
		rep.Add(fe[0].Field, "%s", fe[0].Message)
		return ""
	}
	scheme, rest, ok := strings.Cut(*p, "://")
	switch {
	case !ok || scheme != "http" && scheme != "https":
		rep.Add(field, "must start with http:// or https://")
	case rest == "" || strings.ContainsAny(rest[:1], "/?#@:"):
		rep.Add(field, "must name a host after %s://", scheme)
	case strings.ContainsAny(*p, " \t\r\n"):
		rep.Add(field, "must not contain spaces or line breaks")
	default:
		return *p
	}
	return ""
}

// completeAuthority says whether a URL prefix (checked by checkURLPrefix)
// holds its whole host and port: whatever follows it is path, query or
// fragment, so the prefix alone can be checked as a URL.
func completeAuthority(prefix string) bool {
	_, rest, _ := strings.Cut(prefix, "://")
	return strings.ContainsAny(rest, "/?#")
}

// renamed is a Reporter that reports a check's field under another name:
// from, and any field under it, is reported as to.
type renamed struct {
	rep      Reporter
	from, to string
}

func (r renamed) Add(field, format string, args ...any) {
	if rest, ok := strings.CutPrefix(field, r.from); ok && (rest == "" || rest[0] == '.') {
		field = r.to + rest
	}
	r.rep.Add(field, format, args...)
}
