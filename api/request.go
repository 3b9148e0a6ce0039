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
	// ExpiresAt and ExpiresIn: when attempts stop, as run_at and delay say
	// when they start.
	ExpiresAt *string           `json:"expires_at,omitempty"`
	ExpiresIn *string           `json:"expires_in,omitempty"`
	Timeout   *string           `json:"timeout,omitempty"`
	Retry     *retryRequest     `json:"retry,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
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

// rules are the node's bounds on the tasks it accepts, for the checks of
// package tasks, which every caller creating tasks shares.
func (s *Server) rules() tasks.Rules {
	l := s.cfg.Limits
	return tasks.Rules{MaxBody: l.MaxBody, MaxScheduleAhead: l.MaxScheduleAhead,
		DefaultTimeout: l.DefaultTimeout, MaxTimeout: l.MaxTimeout, Guard: s.cfg.Guard}
}

// Add reports a field to the checks of package tasks (tasks.Reporter).
func (fe *fieldErrors) Add(field, format string, args ...any) { fe.add(field, format, args...) }

// checkTask turns a create request into a task to store, or the problem of
// its fields, by the one check of package tasks.
func (s *Server) checkTask(req *tasks.Request, tenant *model.Tenant, now time.Time) (*model.Task, error) {
	var fe fieldErrors
	task := s.rules().Check(&fe, req, tenant, now)
	if task == nil {
		return nil, fe.problem()
	}
	return task, nil
}

// request is the request as package tasks takes it: field for field, the
// times and durations parsed, and those that do not parse (or a body JSON
// did not carry byte for byte) noted as unreadable, for the check to report
// in their place.
func (req *taskRequest) request() *tasks.Request {
	out := &tasks.Request{
		URL: req.URL, Topic: req.Topic, Method: req.Method, Headers: req.Headers, Labels: req.Labels,
		OrderingKey: req.OrderingKey, FlowKey: req.FlowKey, Callback: req.Callback, FailureCallback: req.FailureCallback,
	}
	unreadable := &out.Unreadable
	if req.Body != nil {
		out.Body, _ = req.Body.bytes(unreadable)
	}
	out.RunAt, out.Delay = parseDue(unreadable, req.RunAt, req.Delay)
	out.ExpiresAt, out.ExpiresIn = parseExpiry(unreadable, req.ExpiresAt, req.ExpiresIn)
	if req.Timeout != nil {
		out.Timeout = parseDurationPtr(unreadable, "timeout", *req.Timeout)
	}
	if r := req.Retry; r != nil {
		out.Retry = &tasks.RetryRequest{MaxAttempts: r.MaxAttempts}
		if r.MinBackoff != nil {
			out.Retry.MinBackoff = parseDurationPtr(unreadable, "retry.min_backoff", *r.MinBackoff)
		}
		if r.MaxBackoff != nil {
			out.Retry.MaxBackoff = parseDurationPtr(unreadable, "retry.max_backoff", *r.MaxBackoff)
		}
	}
	return out
}

// addLabelErrors reports the problems of labels or of a label filter.
func addLabelErrors(fe *fieldErrors, errs []tasks.LabelError) {
	for _, e := range errs {
		fe.add(e.Field, "%s", e.Message)
	}
}

// maxURLPrefix bounds the URL prefix a list or a bulk replay filters on.
const maxURLPrefix = 2048

// checkURLPrefix checks the URL prefix of a filter as given (nil: none),
// under field.
func checkURLPrefix(fe *fieldErrors, field string, prefix *string) {
	tasks.CheckText(fe, field, prefix, maxURLPrefix)
}

// bytes returns the body's bytes, or reports under "body" that JSON did not
// carry them byte for byte, which the checks of package tasks cannot see.
func (b *bodyText) bytes(rep tasks.Reporter) ([]byte, bool) {
	if b.altered {
		rep.Add("body", "is not valid UTF-8 (or holds an unpaired \\u surrogate escape), so it cannot be sent byte for byte; send text, or encode binary data (base64) yourself")
		return nil, false
	}
	return []byte(b.text), true
}

// parseDue reads run_at and delay as sent (nil: not given), reporting
// under its name each that does not parse.
func parseDue(rep tasks.Reporter, runAt, delay *string) (*time.Time, *time.Duration) {
	var (
		at    *time.Time
		after *time.Duration
	)
	if runAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *runAt); err != nil {
			rep.Add("run_at", "must be an RFC 3339 time such as 2026-11-22T10:00:00Z")
		} else {
			at = &t
		}
	}
	if delay != nil {
		if d, err := time.ParseDuration(*delay); err != nil {
			rep.Add("delay", "must be a duration such as 30s, 15m or 2h")
		} else {
			after = &d
		}
	}
	return at, after
}

func parseDuration(rep tasks.Reporter, field, s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err != nil {
		rep.Add(field, "must be a duration such as 500ms, 30s or 1h")
		return 0, false
	}
	return d, true
}

// parseDurationPtr is parseDuration for a field whose absence is nil.
func parseDurationPtr(rep tasks.Reporter, field, s string) *time.Duration {
	if d, ok := parseDuration(rep, field, s); ok {
		return &d
	}
	return nil
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
