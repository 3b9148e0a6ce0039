package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/retry"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// attemptThrough sends c through its tenant's dispatch limits for the host
// (a rate limit defers the task to its slot, a full concurrency limit makes
// it wait; see dispatchlimits.go) and its target's circuit breaker: an open
// breaker defers the task to the breaker's next probe. Neither costs an
// attempt. A send still unanswered after the breaker's StuckAfter counts as
// a failure of the target from then on (targetwatch.go). It reports whether c
// was sent. A claim whose task expired by then, on its arrival or as its
// send would start, is not sent: its task ends expired (expiry.go).
func (s *sender) attemptThrough(t *target, c *model.ClaimedTask) (sent bool) {
	if now := s.cfg.Clock.Now(); c.ExpiredAt(now) {
		// Before any limit or slot is spent on it.
		s.expire(c, now)
		return false
	}
	release, ok := s.cfg.Limits.admit(c)
	if !ok {
		return false
	}
	defer release()
	report, err := t.breaker.Allow()
	if err != nil {
		s.cfg.Metrics.deferrals.WithLabelValues("breaker").Inc()
		s.deferOne(c, s.cfg.Targets.deferUntil(t, s.cfg.Clock.Now()))
		return false
	}
	loaded := c.BodyDeferred()
	if !s.loadBody(c) {
		report(errNotSent)
		return false
	}
	keys, ok := s.signingKeys(c)
	if !ok {
		report(errNotSent)
		return false
	}
	if s.cfg.Held(c.TenantID) {
		// Suspended or deleted since the claim: no attempt, and none
		// counted; the task waits in Postgres, due as it was.
		report(errNotSent)
		s.cfg.Metrics.deferrals.WithLabelValues("tenant_held").Inc()
		s.deferOne(c, time.Time{})
		return false
	}
	if s.cfg.Paused(c.TenantID, t.key) {
		// The target was paused since the claim: as above.
		report(errNotSent)
		s.cfg.Metrics.deferrals.WithLabelValues("target_paused").Inc()
		s.deferOne(c, time.Time{})
		return false
	}
	start := s.cfg.Clock.Now()
	if !s.cfg.Fence(c, start) {
		// Whatever it waited for, this node can no longer prove its claim:
		// another may be sending it. Given back (a no-op if it was handed
		// back already), never sent.
		report(errNotSent)
		s.cfg.Metrics.deferrals.WithLabelValues("lease_lapsed").Inc()
		s.deferOne(c, time.Time{})
		return false
	}
	if c.ExpiredAt(start) {
		// Claimed in time, but what it waited for (its instant, a share, a
		// slot, a limit, its body) took it past its expiry: the attempt
		// would start too late. Checked by the reading the attempt starts
		// at, so no attempt recorded starts at or after expires_at.
		report(errNotSent)
		s.expire(c, start)
		return false
	}
	finish := s.cfg.Targets.sending(t, report)
	outcome, interrupted, wentOut := s.attempt(c, t.key, keys, start)
	if !wentOut {
		// The fence refused it once its request was ready: as above.
		finish(errNotSent)
		s.cfg.Metrics.deferrals.WithLabelValues("lease_lapsed").Inc()
		s.deferOne(c, time.Time{})
		return false
	}
	if outcome == retry.OutcomeRetry && !interrupted {
		finish(errTargetFailed)
	} else if interrupted {
		// An attempt cut off by our own shutdown says nothing of the target.
		finish(errNotSent)
	} else {
		finish(nil)
	}
	if loaded {
		// Read for this send alone: free it now rather than when the
		// attempt is written.
		c.Body = nil
	}
	return true
}

// loadBody reads c's body when its claim left it out. A claim no longer
// held is dropped (whoever holds it now sends it); one whose body cannot be
// read now is given back.
func (s *sender) loadBody(c *model.ClaimedTask) bool {
	if !c.BodyDeferred() {
		return true
	}
	ctx, cancel := context.WithTimeout(s.cfg.Sends, bodyReadTimeout)
	defer cancel()
	body, err := s.cfg.Bodies.ClaimedBody(ctx, c.ID, c.ClaimToken)
	switch {
	case err == nil:
		c.Body = body
		return true
	case errors.Is(err, model.ErrNotFound):
		s.cfg.Logger.Warn("a claim was lost before its body was read; not sending it", "task", c.ID, "attempt", c.Attempt)
		s.cfg.Settle(c.ID)
	default:
		s.cfg.Metrics.storeErrors.WithLabelValues("body").Inc()
		s.cfg.Logger.Error("reading a task's body failed; giving the claim back", "task", c.ID, "err", err)
		s.deferOne(c, s.cfg.Clock.Now().Add(time.Second))
	}
	return false
}

// errFencedAtSend is send's answer when the fence refused the claim once its
// request was ready: nothing went out, and the attempt is not recorded.
var errFencedAtSend = errors.New("the claim could no longer be proven held when its request was ready; not sent")

// bodyReadTimeout bounds reading a body the claim left out.
const bodyReadTimeout = 5 * time.Second

// send makes the HTTP request of one attempt. It returns the status code, the
// response header, the start of the response body and how many bytes of the
// body were read (readAnswer), or the error that prevented a response. The body read is MaxResponseBody bytes, or for a
// task with a callback URL one byte more than the callback carries (so it
// can tell a longer body), whichever is more.
func (s *sender) send(ctx context.Context, c *model.ClaimedTask, keys signingKeys, timeout time.Duration, now time.Time) (int, http.Header, []byte, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reqBody any
	if len(c.Body) > 0 {
		// An empty body is passed as none: an empty reader of unknown length
		// would go out chunked instead of with Content-Length: 0.
		reqBody = c.Body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, c.Method, c.URL, reqBody)
	if err != nil {
		return 0, nil, nil, 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	for name, value := range c.Headers {
		// The API refuses these; a row written by other means must not
		// shadow the signature either.
		if !signing.IsSignatureHeader(name) {
			req.Header.Set(name, value)
		}
	}
	// The send's trace context (spans.send), over a traceparent of the
	// task's own headers, when the task was created in a trace or tracing
	// is on; none otherwise.
	tracing.Inject(ctx, req.Header)
	webhookID := c.ID.String()
	secrets, keyID := keys.at(now)
	signed, err := s.cfg.Signer.Sign(secrets, signing.Message{WebhookID: webhookID, URL: c.URL, Body: c.Body, KeyID: keyID}, now)
	if err != nil {
		return 0, nil, nil, 0, fmt.Errorf("sign webhook: %w", err)
	}
	for name, values := range signed {
		req.Header[name] = values
	}
	idempotencyKey := webhookID
	if c.IdempotencyKey != nil {
		idempotencyKey = *c.IdempotencyKey
	}
	req.Header.Set("Idempotency-Key", idempotencyKey)
	req.Header.Set("Hookwheel-Attempt", strconv.Itoa(c.Attempt))
	req.Header.Set("Hookwheel-Scheduled-At", c.RunAt.UTC().Format(time.RFC3339Nano))
	if c.ScheduleID != nil {
		req.Header.Set("Hookwheel-Schedule-Id", c.ScheduleID.String())
	}
	if c.PublishID != nil && c.Topic != nil {
		req.Header.Set("Hookwheel-Topic", *c.Topic)
		req.Header.Set("Hookwheel-Publish-Id", c.PublishID.String())
	}

	// The fence again, by a reading taken once the request is built and
	// signed (an Ed25519 key takes some 50 µs to sign): a node frozen in
	// between wakes up here with its readings unchanged and its clock
	// moved on, and gives the claim back rather than sending what another
	// node may have sent meanwhile. What is left between this check and
	// the request leaving is getting a connection and writing.
	if !s.cfg.Fence(c, s.cfg.Clock.Now()) {
		return 0, nil, nil, 0, errFencedAtSend
	}
	resp, err := s.cfg.Transports.forClaim(c).Do(req)
	if err != nil {
		return 0, nil, nil, 0, describeSendError(err, timeout, c.URL)
	}
	defer resp.Body.Close()
	limit := s.cfg.MaxResponseBody
	if wantsResponseBody(c) {
		limit = max(limit, CallbackBodyMax+1)
	}
	body, read := s.readAnswer(resp.Body, limit)
	return resp.StatusCode, resp.Header, body, read, nil
}
