// Package retry is the retry policy of hookwheel's contract, shared by the
// API that validates a task's policy and the dispatcher that applies it:
// which outcomes are retried, the jittered backoff between attempts, and
// how a receiver's Retry-After and Hookwheel-Retry headers are honoured.
package retry

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Outcome is how one delivery attempt ended, as recorded in the attempt's
// outcome field.
type Outcome string

const (
	// OutcomeSuccess: the receiver answered 2xx; the task is delivered.
	OutcomeSuccess Outcome = "success"
	// OutcomeRetry: the attempt failed in a way that may pass later.
	OutcomeRetry Outcome = "retry"
	// OutcomeFail: the receiver refused the webhook for good; the task is
	// dead at once, however many attempts remain.
	OutcomeFail Outcome = "fail"
)

// StopHeader is the response header with which a receiver refuses every
// further attempt of a webhook: with the value StopValue on a non-2xx
// response, the task is dead at once, whatever its status code and
// however many attempts remain (Classify). It lets a receiver say "this
// webhook will never succeed" without giving up the status it answers
// with: a 503 stays a 503 in its own logs and proxies.
const (
	StopHeader = "Hookwheel-Retry"
	StopValue  = "stop"
)

// Stopped reports whether response header h asks for no further attempt:
// StopHeader is StopValue, in any case, around any spaces. Any other value
// is ignored, so a misspelt header retries as usual rather than losing a
// webhook.
func Stopped(h http.Header) bool {
	for _, v := range h.Values(StopHeader) {
		if strings.EqualFold(strings.TrimSpace(v), StopValue) {
			return true
		}
	}
	return false
}

// Classify decides the outcome of an attempt from its response status code
// and header h, or from err when no response came. Any err (connection
// refused, reset, TLS failure, timeout) is retried: the receiver never got
// to answer. Of the statuses, 2xx succeeds, whatever h says; a response
// carrying StopHeader (see Stopped) fails, since the receiver asked for no
// more attempts; 408, 425, 429 and 5xx are retried, being transient by
// definition; everything else, 1xx, 3xx (redirects are not followed) and
// the other 4xx (410 Gone among them) included, fails, since sending the
// same request again would get the same answer.
func Classify(statusCode int, h http.Header, err error) Outcome {
	switch {
	case err != nil:
		return OutcomeRetry
	case statusCode >= 200 && statusCode <= 299:
		return OutcomeSuccess
	case Stopped(h):
		return OutcomeFail
	case statusCode == http.StatusRequestTimeout,
		statusCode == http.StatusTooEarly,
		statusCode == http.StatusTooManyRequests,
		statusCode >= 500 && statusCode <= 599:
		return OutcomeRetry
	default:
		return OutcomeFail
	}
}

// Bounds of Policy, checked by Validate.
const (
	retryMaxAttemptsLimit = 100
	retryMinBackoffLimit  = 100 * time.Millisecond
	retryMaxBackoffLimit  = 7 * 24 * time.Hour

	// retryAfterLimit caps a receiver's Retry-After, so that one response
	// cannot park a task for days.
	retryAfterLimit = time.Hour
)

// Policy is a task's retry policy. The zero value is not usable: start
// from DefaultPolicy, set what the task asks for, then Validate.
type Policy struct {
	// MaxAttempts counts every attempt, the first included. Default 10;
	// 1 to 100.
	MaxAttempts int

	// MinBackoff is the delay after the first failed attempt, before jitter.
	// Default 1s; at least 100ms.
	MinBackoff time.Duration

	// MaxBackoff caps the delay between attempts, after jitter. Default 1h;
	// at least MinBackoff and at most 7 days. A Retry-After response header
	// may exceed it.
	MaxBackoff time.Duration
}

// DefaultPolicy returns the policy of a task that gives none: 10
// attempts, backoff from 1s to 1h.
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: 10, MinBackoff: time.Second, MaxBackoff: time.Hour}
}

// FieldError is one invalid field of a Policy. Field is the
// field's name in the task request's "retry" object, so that the API can
// report it as is.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	return "invalid retry policy: " + e.Field + " " + e.Message
}

// Validate reports every invalid field of p, each as a *FieldError,
// joined with errors.Join so that an API response can list them all;
// errors.As finds the first.
func (p Policy) Validate() error {
	var errs []error
	if p.MaxAttempts < 1 || p.MaxAttempts > retryMaxAttemptsLimit {
		errs = append(errs, &FieldError{"max_attempts", fmt.Sprintf(
			"must be between 1 and %d, got %d", retryMaxAttemptsLimit, p.MaxAttempts)})
	}
	if p.MinBackoff < retryMinBackoffLimit {
		errs = append(errs, &FieldError{"min_backoff", fmt.Sprintf(
			"must be at least %s, got %s", retryMinBackoffLimit, p.MinBackoff)})
	}
	switch {
	case p.MaxBackoff < p.MinBackoff:
		errs = append(errs, &FieldError{"max_backoff", fmt.Sprintf(
			"must be at least min_backoff (%s), got %s", p.MinBackoff, p.MaxBackoff)})
	case p.MaxBackoff > retryMaxBackoffLimit:
		errs = append(errs, &FieldError{"max_backoff", fmt.Sprintf(
			"must be at most 7 days (%s), got %s", retryMaxBackoffLimit, p.MaxBackoff)})
	}
	return errors.Join(errs...)
}

// Backoff returns the delay after failed attempt n (1-based), given u drawn
// uniformly from [0, 1).
//
// The delays grow geometrically from MinBackoff after the first attempt to
// MaxBackoff before the last, so that a policy spans the whole range it
// names whatever MaxAttempts is: with N = MaxAttempts,
//
//	d = MinBackoff · (MaxBackoff/MinBackoff)^((n−1)/(N−2))   for 1 ≤ n ≤ N−1
//
// (d = MinBackoff when N ≤ 2). The defaults (10 attempts, 1s to 1h) wait 1s,
// 2.8s, 7.7s, 22s, 1m, 2.8m, 7.7m, 21m and 1h: about an hour and a half of
// retrying, where plain doubling from 1s would give up after 8.5 minutes.
// Jitter spreads each delay over ±20 %, so that tasks that failed together
// do not retry together: delay = d·(0.8 + 0.4·u), clamped to [MinBackoff,
// MaxBackoff]. The clamp only moves the delay towards d, so it stays within
// ±20 % of d.
//
// Backoff is defined for every n and u: n is clamped to [1, N−1], u to [0, 1].
func (p Policy) Backoff(n int, u float64) time.Duration {
	if !(u >= 0) { // also catches NaN
		u = 0
	}
	u = min(u, 1)
	lo, hi := max(p.MinBackoff, 1), max(p.MaxBackoff, p.MinBackoff, 1)

	d := float64(lo)
	if steps := p.MaxAttempts - 2; steps > 0 {
		n = min(max(n, 1), p.MaxAttempts-1)
		d *= math.Pow(float64(hi)/float64(lo), float64(n-1)/float64(steps))
	}
	// Clamped in float64 before converting back: a jittered MaxBackoff near
	// the top of int64 would not fit in a Duration.
	f := d * (0.8 + 0.4*u)
	switch {
	case f >= float64(hi):
		return hi
	case f <= float64(lo):
		return lo
	default:
		return time.Duration(f)
	}
}

// RetryAfter returns the wait a Retry-After header asks for, relative to now:
// delta seconds or an HTTP date. Only 429 and 503 responses are honoured, as
// the contract says. The wait is capped at one hour; a negative delta or a
// past date gives 0. ok is false when the header is absent, not honoured for
// statusCode, or unparseable.
func After(statusCode int, h http.Header, now time.Time) (wait time.Duration, ok bool) {
	if statusCode != http.StatusTooManyRequests && statusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil:
		return clampRetryAfter(secs, time.Second), true
	case errors.Is(err, strconv.ErrRange):
		// A number, just too long for int64: beyond the cap either way.
		if strings.HasPrefix(v, "-") {
			return 0, true
		}
		return retryAfterLimit, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return clampRetryAfter(int64(t.Sub(now)), 1), true
}

// clampRetryAfter returns n·unit within [0, retryAfterLimit] without
// overflowing.
func clampRetryAfter(n int64, unit time.Duration) time.Duration {
	switch {
	case n <= 0:
		return 0
	case n >= int64(retryAfterLimit/unit):
		return retryAfterLimit
	default:
		return time.Duration(n) * unit
	}
}

// NextDelay decides what follows attempt n (1-based), which ended with
// outcome, statusCode and response header h at now. It retries after delay
// when the outcome is retry and attempts remain; otherwise retry is false and
// the task is final. The delay is the response's Retry-After when it is
// honoured (see RetryAfter), even past MaxBackoff, else Backoff(n, u).
//
// A Retry-After below MinBackoff (0 and past dates included) is raised to
// MinBackoff: waiting longer than asked still honours it, and a receiver
// answering "Retry-After: 0" must not be able to burn every attempt in a
// tight loop.
func (p Policy) NextDelay(n int, outcome Outcome, statusCode int, h http.Header, now time.Time, u float64) (delay time.Duration, retry bool) {
	if outcome != OutcomeRetry || n >= p.MaxAttempts {
		return 0, false
	}
	if wait, ok := After(statusCode, h, now); ok {
		return max(wait, p.MinBackoff), true
	}
	return p.Backoff(n, u), true
}
