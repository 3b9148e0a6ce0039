package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/http/httpguts"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/retry"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// decodeJSON reads a JSON request body strictly: unknown fields and wrong
// types are reported field by field, so a typo ("runAt") is an error rather
// than a task silently due now. The Content-Type is not checked: the body is
// JSON whatever curl -d claims.
func decodeJSON(c echo.Context, dst any) error { return decodeJSONFrom(c.Request().Body, dst) }

// decodeJSONFrom is decodeJSON for a body already read, or being read, from r.
func decodeJSONFrom(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		he        *echo.HTTPError
	)
	if err == nil {
		_, err := dec.Token()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &he):
			return he // the body limit, crossed by the read that completed the value
		}
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the body holds more than one JSON value")
	}
	switch {
	case errors.As(err, &he):
		return he // the body limit
	case errors.Is(err, io.EOF):
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the request body is empty; send a JSON object")
	case errors.As(err, &typeErr) && typeErr.Field != "":
		var fe fieldErrors
		fe.add(typeErr.Field, "must be a JSON %s, not %s", jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		return fe.problem()
	case errors.As(err, &typeErr):
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the body must be a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		var fe fieldErrors
		fe.add(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field")
		return fe.problem()
	case errors.As(err, &syntaxErr):
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON",
			fmt.Sprintf("the body is not valid JSON (at byte %d): %v", syntaxErr.Offset, err))
	default:
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
	}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "int", "int32", "int64", "float64":
		return "number"
	case "map", "struct":
		return "object"
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	}
	return kind
}

// taskRequest is the body of POST /v1/tasks as sent, before validation.
// Times and durations stay strings so that each bad one is reported by name.
type taskRequest struct {
	URL     *string           `json:"url"`
	Method  *string           `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    *bodyText         `json:"body,omitempty"`
	RunAt   *string           `json:"run_at,omitempty"`
	Delay   *string           `json:"delay,omitempty"`
	Timeout *string           `json:"timeout,omitempty"`
	Retry   *retryRequest     `json:"retry,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// OrderingKey is read as a pointer so that "" is refused, not taken
	// for none.
	OrderingKey *string `json:"ordering_key,omitempty"`
	Callback        *string `json:"callback,omitempty"`
	FailureCallback *string `json:"failure_callback,omitempty"`
}

// bodyText is a task's body as a JSON string. encoding/json replaces
// invalid UTF-8 and unpaired surrogate escapes with U+FFFD, which would send
// other bytes than the client's; bodyText notes that instead, for the
// validation to refuse it.
type bodyText struct {
	text    string
	altered bool
}

func (b *bodyText) UnmarshalJSON(raw []byte) error {
	if len(raw) == 0 || raw[0] != '"' {
		return &json.UnmarshalTypeError{Value: jsonKind(raw), Type: reflect.TypeFor[string]()}
	}
	if err := json.Unmarshal(raw, &b.text); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	b.altered = !utf8.Valid(raw) || hasUnpairedSurrogate(raw)
	return nil
}

// MarshalJSON spells the body as the string it is, so that the request hash
// of an idempotency key (requestHash) covers it.
func (b bodyText) MarshalJSON() ([]byte, error) { return json.Marshal(b.text) }

// jsonKind names the kind of a JSON value for an UnmarshalTypeError.
func jsonKind(raw []byte) string {
	switch {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '{':
		return "object"
	case raw[0] == '[':
		return "array"
	case raw[0] == 't' || raw[0] == 'f':
		return "bool"
	default:
		return "number"
	}
}

// hasUnpairedSurrogate reports whether a JSON string literal holds a \u
// escape of a UTF-16 surrogate that is not part of a pair. Hand-written:
// encoding/json decodes such an escape to U+FFFD without a word, and no
// decoder option reports it.
func hasUnpairedSurrogate(raw []byte) bool {
	escapeAt := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := escapeAt(i)
		if !ok {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			low, ok := escapeAt(i + 6)
			if !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 11
		case utf16.IsSurrogate(r):
			return true
		default:
			i += 5
		}
	}
	return false
}

type retryRequest struct {
	MaxAttempts *int    `json:"max_attempts,omitempty"`
	MinBackoff  *string `json:"min_backoff,omitempty"`
	MaxBackoff  *string `json:"max_backoff,omitempty"`
}

// UnmarshalJSON keeps the strictness of the outer decoder, naming an unknown
// field by its path ("retry.max_attemps"), which encoding/json does not.
func (r *retryRequest) UnmarshalJSON(b []byte) error {
	type plain retryRequest
	return decodeNested("retry", b, (*plain)(r))
}

// decodeNested decodes the object at field strictly, naming an unknown
// field inside it by its path.
func decodeNested(field string, b []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if name, ok := strings.CutPrefix(fmt.Sprint(err), "json: unknown field "); ok {
		return fmt.Errorf("json: unknown field %q", field+"."+strings.Trim(name, `"`))
	}
	return err
}

// Bounds of a task request beyond the configurable Limits.
const (
	minTimeout     = time.Second
	maxURLLength   = 4096
	maxHeaders     = 64
	maxHeaderBytes = 16 << 10
)

var allowedMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// hopByHop are the headers that describe one connection, not the message
// (RFC 9110 §7.6.1); the transport manages them.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// reservedHeader says why a task may not set a header, or "" when it may.
// An underscore counts as a hyphen: CGI, WSGI, Rack and the servers built
// on them hand a receiver "webhook_id" and "webhook-id" under one name
// (HTTP_WEBHOOK_ID), so the first could stand in for the second.
func reservedHeader(name string) string {
	name = strings.ReplaceAll(name, "_", "-")
	canonical := http.CanonicalHeaderKey(name)
	lower := strings.ToLower(name)
	switch {
	case canonical == "Host" || canonical == "Content-Length":
		return "is set by hookwheel from the URL and body"
	case hopByHop[canonical]:
		return "is a hop-by-hop header, managed by the connection"
	case strings.HasPrefix(lower, "webhook-"):
		return "is reserved for the Standard Webhooks signature headers"
	case strings.HasPrefix(lower, "hookwheel-"):
		return "is reserved for hookwheel's own headers"
	case canonical == "Idempotency-Key":
		return "is set by hookwheel: pass it as the Idempotency-Key header of this request instead"
	}
	return ""
}

// validateTask turns a request into a task to store, or field errors.
func (s *Server) validateTask(req *taskRequest, tenant *model.Tenant, now time.Time) (*model.Task, error) {
	var fe fieldErrors
	t := &model.Task{}
	limits := s.cfg.Limits

	if req.URL == nil || *req.URL == "" {
		fe.add("url", "is required")
	} else {
		t.URL = s.checkURL(&fe, "url", *req.URL, tenant)
	}
	t.Method = http.MethodPost
	if req.Method != nil {
		t.Method = checkMethod(&fe, *req.Method)
	}
	t.Headers = checkHeaders(&fe, req.Headers)
	if req.Body != nil {
		t.Body = s.checkBody(&fe, req.Body)
	}

	t.RunAt = s.dueTime(&fe, req.RunAt, req.Delay, now)

	maxTimeout := limits.MaxTimeout
	if m := tenant.Limits.MaxTimeout; m > 0 {
		maxTimeout = min(maxTimeout, m)
	}
	t.Timeout = min(limits.DefaultTimeout, maxTimeout)
	if req.Timeout != nil {
		d, ok := parseDuration(&fe, "timeout", *req.Timeout)
		switch {
		case !ok:
		case d < minTimeout || d > maxTimeout:
			fe.add("timeout", "must be between %s and %s", minTimeout, maxTimeout)
		default:
			t.Timeout = d
		}
	}

	policy := tenantPolicy(tenant.Retry)
	if r := req.Retry; r != nil {
		if r.MaxAttempts != nil {
			policy.MaxAttempts = *r.MaxAttempts
		}
		parsed := true
		if r.MinBackoff != nil {
			d, ok := parseDuration(&fe, "retry.min_backoff", *r.MinBackoff)
			policy.MinBackoff, parsed = d, parsed && ok
		}
		if r.MaxBackoff != nil {
			d, ok := parseDuration(&fe, "retry.max_backoff", *r.MaxBackoff)
			policy.MaxBackoff, parsed = d, parsed && ok
		}
		if parsed {
			addPolicyErrors(&fe, policy)
		}
	}
	t.MaxAttempts, t.MinBackoff, t.MaxBackoff = policy.MaxAttempts, policy.MinBackoff, policy.MaxBackoff
	t.Labels = checkLabels(&fe, req.Labels)
	if k := req.OrderingKey; k != nil {
		if msg := tasks.OrderingKeyProblem(*k); msg != "" {
			fe.add("ordering_key", "%s", msg)
		}
		t.OrderingKey = k
	}
	t.Callback = s.checkCallback(&fe, "callback", req.Callback, tenant)
	t.FailureCallback = s.checkCallback(&fe, "failure_callback", req.FailureCallback, tenant)

	if err := fe.problem(); err != nil {
		return nil, err
	}
	return t, nil
}

// checkLabels checks a task's labels as given, each under
// "labels.<key>", by the rules of tasks.CheckLabels; nil for none.
func checkLabels(fe *fieldErrors, labels map[string]string) map[string]string {
	addLabelErrors(fe, tasks.CheckLabels("labels", labels))
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// addLabelErrors reports the problems of labels or of a label filter.
func addLabelErrors(fe *fieldErrors, errs []tasks.LabelError) {
	for _, e := range errs {
		fe.add(e.Field, "%s", e.Message)
	}
}

// checkURL checks a URL a webhook is sent to as given (not empty): a task's
// url or one of its callbacks, reporting what is wrong with it under field.
func (s *Server) checkURL(fe *fieldErrors, field, raw string, tenant *model.Tenant) string {
	if len(raw) > maxURLLength {
		fe.add(field, "must be at most %d characters", maxURLLength)
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		fe.add(field, "is not a valid URL: %v", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		fe.add(field, "must be an absolute http or https URL")
	case u.Host == "" || u.Hostname() == "":
		fe.add(field, "must name a host")
	case !validPort(u.Port()):
		fe.add(field, "must have a port from 1 to 65535, or none")
	case !validHost(u.Host):
		fe.add(field, "has a host that cannot be sent as an HTTP Host header")
	case u.User != nil:
		fe.add(field, "must not carry credentials; send an Authorization header instead")
	case u.Fragment != "":
		fe.add(field, "must not have a #fragment, which is never sent")
	case s.cfg.Guard != nil && s.cfg.Guard.Allowing(tenant.TargetAllowCIDRs).CheckURL(u) != nil:
		fe.add(field, "%v", s.cfg.Guard.Allowing(tenant.TargetAllowCIDRs).CheckURL(u))
	default:
		return raw
	}
	return ""
}

// checkCallback checks a task's callback or failure_callback as given at
// creation (nil: none), by the rules of its url: the callback is a webhook
// of its own, sent to the same kind of target.
func (s *Server) checkCallback(fe *fieldErrors, field string, raw *string, tenant *model.Tenant) *string {
	if raw == nil {
		return nil
	}
	if *raw == "" {
		fe.add(field, "must not be empty; leave it out for none")
		return nil
	}
	if u := s.checkURL(fe, field, *raw, tenant); u != "" {
		return &u
	}
	return nil
}

// checkIdempotencyKey checks an idempotency key as given (nil: none),
// under field.
func checkIdempotencyKey(fe *fieldErrors, field string, key *string) {
	checkText(fe, field, key, maxIdempotencyKey)
}

// maxURLPrefix bounds the URL prefix a list or a bulk replay filters on.
const maxURLPrefix = 2048

// checkURLPrefix checks the URL prefix of a filter as given (nil: none),
// under field.
func checkURLPrefix(fe *fieldErrors, field string, prefix *string) {
	checkText(fe, field, prefix, maxURLPrefix)
}

// checkText checks a text field as given (nil: none): 1 to most characters
// of valid UTF-8, without NUL, which Postgres text cannot hold.
func checkText(fe *fieldErrors, field string, v *string, most int) {
	switch {
	case v == nil:
	case len(*v) == 0 || utf8.RuneCountInString(*v) > most:
		fe.add(field, "must be 1 to %d characters", most)
	case !utf8.ValidString(*v):
		fe.add(field, "must be valid UTF-8")
	case strings.ContainsRune(*v, 0):
		fe.add(field, "must not contain NUL characters")
	}
}

// checkMethod checks a task's method as given, under "method".
func checkMethod(fe *fieldErrors, method string) string {
	if !allowedMethods[method] {
		fe.add("method", "must be one of GET, POST, PUT, PATCH, DELETE")
	}
	return method
}

// checkHeaders checks a task's headers as given, each under
// "headers.<name>", and returns them by canonical name.
func checkHeaders(fe *fieldErrors, headers map[string]string) map[string]string {
	out := make(map[string]string, len(headers))
	if len(headers) > maxHeaders {
		fe.add("headers", "must hold at most %d headers", maxHeaders)
	}
	headerBytes := 0
	// The headers given so far, by a name with '_' read as '-': CGI, WSGI
	// and Rack receivers read X_A and X-A as one header, as they do for the
	// reserved names (reservedHeader).
	seen := make(map[string]string, len(headers))
	// In order, so that of two names differing only in letter case the
	// same one is refused every time.
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		value := headers[name]
		field := "headers." + name
		canonical := http.CanonicalHeaderKey(name)
		same := http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))
		first, repeated := seen[same]
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			fe.add(field, "is not a valid header name")
		case !httpguts.ValidHeaderFieldValue(value):
			fe.add(field, "has an invalid value (control characters are not allowed)")
		case reservedHeader(name) != "":
			fe.add(field, "%s", reservedHeader(name))
		case repeated:
			// Header names are case-insensitive: both would be one
			// header, with one of the two values.
			fe.add(field, "is %s again, in other letters; give each header once", first)
		default:
			seen[same] = canonical
			out[canonical] = value
		}
		headerBytes += len(name) + len(value)
	}
	if headerBytes > maxHeaderBytes {
		fe.add("headers", "must total at most %d bytes", maxHeaderBytes)
	}
	return out
}

// checkBody checks a task's body as given, under "body", and returns its
// bytes (empty, not nil, for an empty body).
func (s *Server) checkBody(fe *fieldErrors, b *bodyText) []byte {
	switch {
	case b.altered:
		fe.add("body", "is not valid UTF-8 (or holds an unpaired \\u surrogate escape), so it cannot be sent byte for byte; send text, or encode binary data (base64) yourself")
	case len(b.text) > s.cfg.Limits.MaxBody:
		fe.add("body", "must be at most %d bytes", s.cfg.Limits.MaxBody)
	}
	return append([]byte{}, b.text...)
}

// dueTime resolves run_at or delay (at most one given) to the instant a task
// falls due, for creation and rescheduling alike: neither, or a time already
// past, means now; nothing beyond Limits.MaxScheduleAhead. Errors go to fe.
func (s *Server) dueTime(fe *fieldErrors, runAt, delay *string, now time.Time) time.Time {
	limits := s.cfg.Limits
	at := now
	switch {
	case runAt != nil && delay != nil:
		fe.add("run_at", "and delay are exclusive: give only one")
	case runAt != nil:
		t, err := time.Parse(time.RFC3339Nano, *runAt)
		switch {
		case err != nil:
			fe.add("run_at", "must be an RFC 3339 time such as 2026-11-22T10:00:00Z")
		// The horizon rounded as due times are: a task due at it (run_at
		// or delay at the limit) answers with a run_at that is accepted
		// back.
		case t.After(ceilMicro(now.Add(limits.MaxScheduleAhead))):
			fe.add("run_at", "must be at most %s ahead", limits.MaxScheduleAhead)
		case t.After(now):
			at = t
		}
	case delay != nil:
		d, err := time.ParseDuration(*delay)
		switch {
		case err != nil:
			fe.add("delay", "must be a duration such as 30s, 15m or 2h")
		case d < 0:
			fe.add("delay", "must not be negative")
		case d > limits.MaxScheduleAhead:
			fe.add("delay", "must be at most %s", limits.MaxScheduleAhead)
		default:
			at = now.Add(d)
		}
	}
	// Postgres keeps microseconds; rounding up keeps "never before" true.
	return ceilMicro(at)
}

// validPort reports whether a URL's port (empty for the scheme's) is one a
// connection can be made to.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// validHost reports whether net/http sends a URL's host (and port) as the
// Host header: url.Parse lets through characters such as < > " that
// Request.Write would answer with an empty Host instead.
func validHost(hostport string) bool {
	ascii, err := httpguts.PunycodeHostPort(hostport)
	return err == nil && httpguts.ValidHostHeader(ascii)
}

func parseDuration(fe *fieldErrors, field, s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err != nil {
		fe.add(field, "must be a duration such as 500ms, 30s or 1h")
		return 0, false
	}
	return d, true
}

func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// requestHash fingerprints what a create request asks for, so that a repeat
// with the same Idempotency-Key can be told from a different request reusing
// it. It hashes the request as sent (a delay, not the run_at it resolved to),
// normalised by re-encoding (field order and whitespace do not matter).
func requestHash(req *taskRequest) []byte {
	normalized, _ := json.Marshal(req) // maps marshal in key order
	sum := sha256.Sum256(normalized)
	return sum[:]
}

// tenantPolicy is the retry policy a tenant's task gets when it gives none:
// the tenant's defaults over hookwheel's.
func tenantPolicy(d model.RetryDefaults) retry.Policy {
	p := retry.DefaultPolicy()
	if d.MaxAttempts != nil {
		p.MaxAttempts = *d.MaxAttempts
	}
	if d.MinBackoff != nil {
		p.MinBackoff = *d.MinBackoff
	}
	if d.MaxBackoff != nil {
		p.MaxBackoff = *d.MaxBackoff
	}
	return p
}

// addPolicyErrors reports each invalid field of a retry policy under
// "retry.<field>".
func addPolicyErrors(fe *fieldErrors, p retry.Policy) {
	err := p.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var f *retry.FieldError
		if errors.As(e, &f) {
			fe.add("retry."+f.Field, "%s", f.Message)
		}
	}
}
