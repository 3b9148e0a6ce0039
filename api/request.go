package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

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
	URL *string `json:"url,omitempty"`
	// Topic, instead of URL, publishes the task to a topic's endpoints.
	Topic   *string           `json:"topic,omitempty"`
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
	OrderingKey     *string `json:"ordering_key,omitempty"`
	FlowKey         *string `json:"flow_key,omitempty"`
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

// minTimeout is the shortest per-attempt timeout, which a tenant's
// max_timeout may not go below either.
const minTimeout = tasks.MinTimeout

// rules are the node's bounds on the tasks it accepts, for the checks of
// package tasks, which every caller creating tasks shares.
func (s *Server) rules() tasks.Rules {
	l := s.cfg.Limits
	return tasks.Rules{MaxBody: l.MaxBody, MaxScheduleAhead: l.MaxScheduleAhead,
		DefaultTimeout: l.DefaultTimeout, MaxTimeout: l.MaxTimeout, Guard: s.cfg.Guard}
}

// Add reports a field to the checks of package tasks (tasks.Reporter).
func (fe *fieldErrors) Add(field, format string, args ...any) { fe.add(field, format, args...) }

// validateTask turns a request into a task to store, or field errors.
func (s *Server) validateTask(req *taskRequest, tenant *model.Tenant, now time.Time) (*model.Task, error) {
	var fe fieldErrors
	t := &model.Task{}

	t.URL, t.Topic = s.rules().CheckTarget(&fe, req.URL, req.Topic, tenant)
	t.Method = http.MethodPost
	if req.Method != nil {
		t.Method = checkMethod(&fe, *req.Method)
	}
	t.Headers = checkHeaders(&fe, req.Headers)
	if req.Body != nil {
		t.Body = s.checkBody(&fe, req.Body)
	}

	t.RunAt = s.dueTime(&fe, req.RunAt, req.Delay, now)

	var timeout *time.Duration
	if req.Timeout != nil {
		if d, ok := parseDuration(&fe, "timeout", *req.Timeout); ok {
			timeout = &d
		}
	}
	t.Timeout = s.rules().CheckTimeout(&fe, timeout, tenant)

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
	t.OrderingKey = tasks.CheckOrderingKey(&fe, req.OrderingKey)
	t.FlowKey = tasks.CheckFlowKey(&fe, req.FlowKey)
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

// checkURL checks a URL a webhook is sent to as given (not empty), a task's
// url or one of its callbacks, by the rules of tasks.Rules.CheckURL.
func (s *Server) checkURL(fe *fieldErrors, field, raw string, tenant *model.Tenant) string {
	return s.rules().CheckURL(fe, field, raw, tenant)
}

// checkCallback checks a task's callback or failure_callback as given at
// creation (nil: none), by the rules of tasks.Rules.CheckCallback.
func (s *Server) checkCallback(fe *fieldErrors, field string, raw *string, tenant *model.Tenant) *string {
	return s.rules().CheckCallback(fe, field, raw, tenant)
}

// checkIdempotencyKey checks an idempotency key as given (nil: none),
// under field.
func checkIdempotencyKey(fe *fieldErrors, field string, key *string) {
	tasks.CheckText(fe, field, key, maxIdempotencyKey)
}

// maxURLPrefix bounds the URL prefix a list or a bulk replay filters on.
const maxURLPrefix = 2048

// checkURLPrefix checks the URL prefix of a filter as given (nil: none),
// under field.
func checkURLPrefix(fe *fieldErrors, field string, prefix *string) {
	tasks.CheckText(fe, field, prefix, maxURLPrefix)
}

// checkMethod checks a task's method as given, under "method".
func checkMethod(fe *fieldErrors, method string) string { return tasks.CheckMethod(fe, method) }

// checkHeaders checks a task's headers as given, each under
// "headers.<name>", and returns them by canonical name.
func checkHeaders(fe *fieldErrors, headers map[string]string) map[string]string {
	return tasks.CheckHeaders(fe, headers)
}

// checkBody checks a task's body as given, under "body", and returns its
// bytes (empty, not nil, for an empty body). A body that JSON did not carry
// byte for byte is refused here; the rest is tasks.Rules.CheckBody.
func (s *Server) checkBody(fe *fieldErrors, b *bodyText) []byte {
	if b.altered {
		fe.add("body", "is not valid UTF-8 (or holds an unpaired \\u surrogate escape), so it cannot be sent byte for byte; send text, or encode binary data (base64) yourself")
		return []byte(b.text)
	}
	return s.rules().CheckBody(fe, []byte(b.text))
}

// dueTime resolves run_at or delay (at most one given), as sent, to the
// instant a task falls due, for creation and rescheduling alike, by the
// rules of tasks.Rules.DueTime. Errors go to fe.
func (s *Server) dueTime(fe *fieldErrors, runAt, delay *string, now time.Time) time.Time {
	var (
		at    *time.Time
		after *time.Duration
	)
	switch {
	case runAt != nil && delay != nil:
		at, after = &now, new(time.Duration) // refused as a pair, whatever they hold
	case runAt != nil:
		t, err := time.Parse(time.RFC3339Nano, *runAt)
		if err != nil {
			fe.add("run_at", "must be an RFC 3339 time such as 2026-11-22T10:00:00Z")
			break
		}
		at = &t
	case delay != nil:
		d, err := time.ParseDuration(*delay)
		if err != nil {
			fe.add("delay", "must be a duration such as 30s, 15m or 2h")
			break
		}
		after = &d
	}
	return s.rules().DueTime(fe, at, after, now)
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

// tenantPolicy is the retry policy a tenant's task gets when it gives none
// (tasks.TenantPolicy).
func tenantPolicy(d model.RetryDefaults) retry.Policy { return tasks.TenantPolicy(d) }

// addPolicyErrors reports each invalid field of a retry policy under
// "retry.<field>".
func addPolicyErrors(fe *fieldErrors, p retry.Policy) { tasks.AddPolicyErrors(fe, p) }
