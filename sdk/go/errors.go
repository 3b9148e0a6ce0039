package hookwheel

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// Sentinels that an *Error matches with errors.Is, by its status code, so
// that callers can branch without reading codes:
//
//	if errors.Is(err, hookwheel.ErrConflict) { ... the task was already sent ... }
var (
	// ErrNotFound: 404, no such task or schedule (or another tenant's).
	ErrNotFound = errors.New("not found")
	// ErrConflict: 409, the task or schedule is not in a state that allows
	// the call, such as canceling a task already dispatching.
	ErrConflict = errors.New("conflict")
	// ErrUnauthorized: 401, the API key is missing, malformed, revoked or
	// unknown.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: 403, the API key lacks the scope the call needs.
	ErrForbidden = errors.New("forbidden")
	// ErrRateLimited: 429, over a rate limit or quota; Error.RetryAfter
	// says when to come back.
	ErrRateLimited = errors.New("rate limited")
	// ErrInvalid: 400, 413 or 422, the request itself is wrong; Error.Fields
	// lists the offending fields when the server named them.
	ErrInvalid = errors.New("invalid request")
	// ErrServer: a 5xx answer, or one the SDK could not read.
	ErrServer = errors.New("server error")
)

// FieldError is one invalid field of a refused request: Field is a JSON path
// in the request (retry.max_attempts) or a parameter's name, Message says
// what is wrong with it.
type FieldError = apiclient.FieldError

// Error is the API's refusal of a call: its problem+json answer (RFC 9457)
// and the call it answered. Every method returns one, wrapped or not, for any
// answer other than success; network failures are other errors.
type Error struct {
	// Op is what was called, such as "get task 0190f…".
	Op string
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Type identifies the kind of problem, such as "insufficient-scope";
	// "about:blank" when the status says it all.
	Type string
	// Title is a short summary of the kind of problem.
	Title string
	// Detail says what went wrong with this call, for a human.
	Detail string
	// Instance identifies this occurrence, such as the item of a batch.
	Instance string
	// Fields lists the invalid fields of a refused request.
	Fields []FieldError
	// RetryAfter is when to try again, from the Retry-After header of a 429
	// or 503 answer; zero when it had none.
	RetryAfter time.Duration
}

// Error describes the refusal on one line: what was called, the status, and
// the server's detail, or the invalid fields when it named them.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d %s", e.StatusCode, e.Title)
	switch {
	case len(e.Fields) > 0:
		// The fields say precisely what the detail of a validation error
		// sums up.
		for i, f := range e.Fields {
			if i == 0 {
				b.WriteString(": ")
			} else {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s: %s", f.Field, f.Message)
		}
	case e.Detail != "" && e.Detail != e.Title:
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, "; retry after %s", e.RetryAfter)
	}
	return b.String()
}

// Is matches the sentinel errors of this package by status code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests
	case ErrInvalid:
		return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusRequestEntityTooLarge ||
			e.StatusCode == http.StatusUnprocessableEntity
	case ErrServer:
		return e.StatusCode >= 500 || e.StatusCode < 400
	}
	return false
}

// problemError makes the Error of one problem, as a batch item carries it.
func problemError(op string, p apiclient.Problem) *Error {
	e := &Error{Op: op, StatusCode: p.Status, Type: p.Type, Title: p.Title, Detail: p.Detail, Fields: p.Errors}
	if p.Instance != nil {
		e.Instance = *p.Instance
	}
	return e
}

// responseError makes the Error of an answer that is not the success
// expected: its problem+json when it has one, else (a proxy's page, say) its
// status and the start of its body.
func responseError(op string, resp *http.Response, body []byte) *Error {
	var p apiclient.Problem
	var e *Error
	if err := json.Unmarshal(body, &p); err == nil && p.Status != 0 && p.Title != "" {
		e = problemError(op, p)
		e.StatusCode = resp.StatusCode
	} else {
		e = &Error{Op: op, StatusCode: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: snippet(body)}
		if resp.StatusCode < 400 {
			e.Title = "unexpected answer"
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter, _ = retryAfter(resp.Header, time.Now())
	}
	return e
}

// snippet is the start of an unexpected body, enough to recognise it.
func snippet(body []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(body))
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// result returns v, the decoded success of a call, or the Error of its
// answer when it is not a success.
func result[T any](op string, resp *http.Response, body []byte, v *T) (*T, error) {
	if resp.StatusCode/100 == 2 && v != nil {
		return v, nil
	}
	return nil, responseError(op, resp, body)
}
