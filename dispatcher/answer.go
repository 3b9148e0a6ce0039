package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/retry"
	"github.com/hookwheel/hookwheel/store"
)

// attempt makes one delivery attempt of a claimed task and hands it to the
// recorders; its claim budget returns once it is written. A send begun is
// recorded whatever happens: when the dispatcher's shutdown bound cuts it
// off (interrupted), the attempt is recorded as such and the task is due
// again at once, for whichever node owns it next. outcome is what the
// answer says of the target (retry for a failure worth retrying, even on
// the last attempt), for its breaker; the recorded attempt may say fail.
// target is c's target key, for its health once the attempt is recorded;
// started is when the attempt starts, read by the caller as it checked the
// fence and the task's expiry. sent is false, and nothing is recorded, when
// the fence refused the claim once its request was ready (send).
func (s *sender) attempt(c *model.ClaimedTask, target string, keys signingKeys, started time.Time) (outcome retry.Outcome, interrupted, sent bool) {
	timeout := min(c.Timeout, s.cfg.MaxTimeout)
	tenantMax := model.Limits{MaxTimeout: c.TenantMaxTimeout}.Resolve(model.Limits{MaxTimeout: s.cfg.DefaultMaxTimeout}).MaxTimeout
	if tenantMax > 0 {
		timeout = min(timeout, tenantMax)
	}
	ctx, span := s.cfg.Spans.send(s.cfg.Sends, c, target)
	statusCode, header, respBody, received, sendErr := s.send(ctx, c, keys, timeout, started)
	endSend(span, statusCode, sendErr)
	if errors.Is(sendErr, errFencedAtSend) {
		return "", false, false
	}
	scheduledFor := c.RunAt
	if c.NextAttemptAt != nil {
		scheduledFor = *c.NextAttemptAt
	}
	lateness := started.Sub(scheduledFor)
	kind := "first"
	if c.Attempt-c.AttemptBase > 1 {
		kind = "retry"
	}
	s.cfg.Metrics.lateness.WithLabelValues(kind).Observe(lateness.Seconds())
	duration := s.cfg.Clock.Now().Sub(started)
	interrupted = sendErr != nil && s.cfg.Sends.Err() != nil
	outcome = retry.Classify(statusCode, header, sendErr)
	if errors.Is(sendErr, netguard.ErrBlocked) {
		// The target resolves to an address webhooks may not reach: no
		// retry will change that.
		outcome = retry.OutcomeFail
	}
	if interrupted {
		outcome = retry.OutcomeRetry
		sendErr = errInterrupted
	}
	policy := retry.Policy{MaxAttempts: c.MaxAttempts, MinBackoff: c.MinBackoff, MaxBackoff: c.MaxBackoff}
	result := model.AttemptResult{
		Attempt: model.Attempt{
			TaskID:    c.ID,
			Attempt:   c.Attempt,
			StartedAt: started,
			Duration:  duration,
			Outcome:   string(outcome),
		},
		ClaimToken: c.ClaimToken,
		// Metered with the attempt: the body is the request's whether or
		// not the receiver read it all; what came back is what was read.
		BytesSent:     int64(len(c.Body)),
		BytesReceived: received,
	}
	if sendErr != nil {
		msg := sendErr.Error()
		result.Error = &msg
	} else {
		result.StatusCode = &statusCode
		kept := validUTF8(respBody[:min(len(respBody), s.cfg.MaxResponseBody)])
		result.ResponseBody = &kept
		respHeaders := store.EncodeResponseHeaders(header)
		result.ResponseHeaders = &respHeaders
		switch {
		case outcome == retry.OutcomeSuccess:
		case retry.Stopped(header):
			msg := fmt.Sprintf("receiver answered %d %s with %s: %s; not retried",
				statusCode, http.StatusText(statusCode), retry.StopHeader, retry.StopValue)
			result.Error = &msg
		default:
			msg := fmt.Sprintf("receiver answered %d %s", statusCode, http.StatusText(statusCode))
			result.Error = &msg
		}
	}
	switch delay, again := policy.NextDelay(c.Attempt-c.AttemptBase, outcome, statusCode, header, s.cfg.Clock.Now(), s.cfg.Rand()); {
	case outcome == retry.OutcomeSuccess:
		result.Status = model.StatusDelivered
	case interrupted:
		// Not the task's failure: due again now, even after its last
		// attempt, so a shutdown never kills a task.
		next := s.cfg.Clock.Now()
		result.Status = model.StatusRetrying
		result.NextAttemptAt = &next
	case again && c.ExpiredAt(s.cfg.Clock.Now().Add(delay)):
		// The retry would start at or after the task's expiry: the task
		// ends expired now rather than waiting to be ended then, and the
		// attempt is its final one, as a last attempt's is.
		result.Outcome = string(retry.OutcomeFail)
		result.Status = model.StatusExpired
		msg := fmt.Sprintf("%s; not retried: the retry would start after the task expires at %s",
			derefOr(result.Error, "failed"), c.ExpiresAt.UTC().Format(time.RFC3339Nano))
		result.Error = &msg
		s.cfg.Metrics.expired.WithLabelValues("after_attempt").Inc()
	case again:
		next := s.cfg.Clock.Now().Add(delay)
		result.Status = model.StatusRetrying
		result.NextAttemptAt = &next
	default:
		// A retryable failure with no attempt left is the final one: the
		// attempt records it so, as the API documents its outcomes. The
		// breaker still hears of a failing target (outcome stays retry).
		result.Outcome = string(retry.OutcomeFail)
		result.Status = model.StatusDead
	}
	if url := callbackURL(c, result.Status); url != nil {
		cb, err := newCallbackTask(c, *url, &result, respBody, s.cfg.Clock.Now())
		if err != nil {
			s.cfg.Logger.Error("making a task's callback failed; the outcome is recorded without it", "task", c.ID, "err", err)
		}
		result.Callback = cb
	}
	if result.Status == model.StatusDelivered && result.Callback == nil {
		// Written before the recorder has it: should this node stop before
		// the attempt is committed, the node that recovers the claim records
		// it from here rather than sending it again. A delivery that makes a
		// callback is sent again instead, since the callback carries the
		// answer's body, which the journal does not keep.
		s.cfg.Journal.mark(model.AnsweredAttempt{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken,
			StatusCode: statusCode, StartedAt: started, Duration: duration,
			BytesSent: result.BytesSent, BytesReceived: result.BytesReceived})
	}
	s.cfg.Metrics.attempts.WithLabelValues(result.Outcome).Inc()
	s.cfg.Metrics.attemptDuration.Observe(duration.Seconds())
	s.cfg.Stats(c.TenantID, started, result.Status, lateness)

	s.cfg.Record(result, func(err error) {
		defer s.cfg.Settle(c.ID)
		if err != nil {
			s.cfg.Logger.Error("recording an attempt failed; the lease will expire and the task will be sent again with the same webhook-id",
				"task", c.ID, "attempt", c.Attempt, "err", err)
			return
		}
		s.cfg.Metrics.usage.recorded(c.TenantPlan, &result)
		if !interrupted {
			// An attempt cut off by our own shutdown says nothing of the
			// target.
			errMsg := ""
			if result.Error != nil {
				errMsg = *result.Error
			}
			s.cfg.Health(c.TenantID, target, started.Add(duration), result.Status == model.StatusDelivered, errMsg)
		}
		if result.NextAttemptAt != nil {
			s.cfg.Schedule(c.ID, *result.NextAttemptAt)
		}
		if cb := result.Callback; cb != nil {
			// Stored in this task's partition, so most likely ours: armed
			// here without waiting for the notification.
			s.cfg.Schedule(cb.ID, cb.RunAt)
		}
		// Checked first: the arguments alone cost six allocations a fire,
		// spent for nothing at the usual levels.
		if s.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
			s.cfg.Logger.Debug("attempt", "task", c.ID, "attempt", c.Attempt, "outcome", outcome, "status", statusCode, "lateness", lateness, "duration", duration)
		}
	})
	return outcome, interrupted, true
}

// derefOr is *p, or def when p is nil.
func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// errInterrupted is the error of an attempt cut off by the dispatcher's
// shutdown bound.
var errInterrupted = errors.New("interrupted: the node stopped before the receiver answered; sent again at once")

// ResponseBodyReadMax bounds what a send reads of an answer's body: what
// the attempt keeps (MaxResponseBody, or CallbackBodyMax for a task with a
// callback, and one byte more to tell a longer body) and what is read past
// it and discarded so the connection can be reused, together. A longer
// body is not read: its connection is closed instead.
const ResponseBodyReadMax = 64 << 10

// readAnswer reads the first limit bytes of an answer's body, which it
// returns, then discards what else comes within ResponseBodyReadMax so the
// connection can be reused: a receiver that streams more back loses its
// connection (closing a body not read to its end closes it) rather than
// making the node read it. read is every byte read, kept or discarded: the
// attempt's bytes received.
func (s *sender) readAnswer(r io.Reader, limit int) (body []byte, read int64) {
	body = s.readResponseBody(r, limit)
	read = int64(len(body))
	if rest := ResponseBodyReadMax - len(body); rest > 0 {
		n, _ := io.Copy(io.Discard, io.LimitReader(r, int64(rest)))
		read += n
	}
	return body, read
}

// readResponseBody reads up to limit bytes of an answer's body into a
// reused buffer and returns an exact copy: io.ReadAll starts every read
// with a fresh 512-byte buffer and grows it, where an answer is mostly a few
// bytes. A read that fails keeps what came before it, as an attempt records
// what it got.
func (s *sender) readResponseBody(r io.Reader, limit int) []byte {
	buf, _ := s.responseBuffers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() {
		// A buffer grown by a long answer is left to the collector, so
		// that one receiver's megabytes are not kept for every send.
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			s.responseBuffers.Put(buf)
		}
	}()
	_, _ = buf.ReadFrom(io.LimitReader(r, int64(limit)))
	return bytes.Clone(buf.Bytes())
}

// errResponseHeadersTooLarge is the error of an attempt whose answer's
// headers went past MaxResponseHeader.
var errResponseHeadersTooLarge = fmt.Errorf("the receiver's response headers exceed %d KiB; the answer was not read", MaxResponseHeader>>10)

// describeSendError is what an attempt records of a send that got no
// answer, err, to rawURL: the tenant reads it. It names the URL's host, never
// an address the host resolved to (net.OpError carries the address dialled),
// nor the node's own address or its DNS server's: those tell a tenant the
// operator's internal network. An address the tenant wrote in the URL stays.
func describeSendError(err error, timeout time.Duration, rawURL string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no response within the %s timeout", timeout)
	}
	if headersTooLarge(err) {
		return errResponseHeadersTooLarge
	}
	msg := err.Error()
	var hostPort string
	if u, perr := url.Parse(rawURL); perr == nil && u.Hostname() != "" {
		if _, literal := netip.ParseAddr(u.Hostname()); literal != nil {
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			hostPort = net.JoinHostPort(u.Hostname(), port)
		}
	}
	changed := false
	replace := func(old, new string) {
		if old != "" && old != new && strings.Contains(msg, old) {
			msg, changed = strings.ReplaceAll(msg, old, new), true
		}
	}
	eachError(err, func(e error) {
		switch e := e.(type) {
		case *net.OpError:
			if e.Source != nil && e.Addr != nil {
				replace(e.Source.String()+"->", "")
			} else if e.Source != nil {
				replace(e.Source.String(), "")
			}
			if e.Addr != nil && hostPort != "" {
				replace(e.Addr.String(), hostPort)
			}
		case *net.DNSError:
			if e.Server != "" {
				replace(" on "+e.Server, "")
			}
		}
	})
	if !changed {
		return err
	}
	// Wrapped, so that errors.Is still sees what failed (a refused address
	// is ErrBlocked, and final).
	return sanitizedError{msg: msg, err: err}
}

// sanitizedError is a send's error with another message.
type sanitizedError struct {
	msg string
	err error
}

func (e sanitizedError) Error() string { return e.msg }
func (e sanitizedError) Unwrap() error { return e.err }

// eachError calls f with err and every error it wraps.
func eachError(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		eachError(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			eachError(e, f)
		}
	}
}

// headersTooLarge reports whether err is net/http refusing an answer whose
// headers exceed the transport's MaxResponseHeaderBytes (over HTTP/1 and
// HTTP/2): it has no sentinel error for it.
func headersTooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") ||
		strings.Contains(msg, "response header list larger than advertised limit")
}

// validUTF8 keeps a response body storable as text.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
