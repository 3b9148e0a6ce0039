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
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/retry"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/store"
)

// limitsGate decides, at the instant of sending, whether the tenant's
// dispatch limits let a claim go (ratelimit.go).
type limitsGate interface {
	admit(c *model.ClaimedTask) (release func(), ok bool)
}

// bodyStore reads the bodies that claims leave out.
type bodyStore interface {
	ClaimedBody(ctx context.Context, id, token uuid.UUID) ([]byte, error)
	SigningSecrets(ctx context.Context, tenantID uuid.UUID) ([]model.SigningSecret, error)
}

// senderConfig configures newSender. Every field is required.
type senderConfig struct {
	// Claimed carries the claims to send; Run returns once it is closed and
	// every send has ended.
	Claimed <-chan *model.ClaimedTask
	// Sends is the context of every send: canceling it interrupts the sends
	// in flight (see interrupted).
	Sends   context.Context
	Shares  *shares
	Targets *targets
	Limits  limitsGate
	Bodies  bodyStore
	// Transports send webhooks, redialling connections that failed before
	// the request left.
	Transports *transports
	Signer     *signing.Signer
	// Keyring opens the signing secrets.
	Keyring *keyring.Keyring
	// Record hands a finished attempt to the recorders.
	Record func(r store.AttemptResult, then func(err error))
	// Stats counts a finished attempt in its tenant's statistics: the
	// status it leaves the task in, and how late it started.
	Stats func(tenant uuid.UUID, started time.Time, status model.TaskStatus, lateness time.Duration)
	// Defer gives back claims the sender will not send now.
	Defer func(claims []*model.ClaimedTask, until func(i int) time.Time)
	// Settle returns a claim's share of the claim budget once its attempt
	// is written.
	Settle  func(id uuid.UUID)
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Schedule arms the next attempt of a task to retry.
	Schedule func(id uuid.UUID, at time.Time)
	// Stopping reports that the dispatcher is stopping: claims waiting for a
	// share or a target are given back rather than sent.
	Stopping func() bool
	// Fence reports whether a claim may still be sent at now (fence.go);
	// one that may not is given back unsent, just before its request.
	Fence func(c *model.ClaimedTask, now time.Time) bool
	// MaxTimeout caps every attempt's timeout, whatever the task asked for
	// when it was created.
	MaxTimeout time.Duration
	// DefaultMaxTimeout is the node's max_timeout for tenants without one
	// of their own; 0 sets none.
	DefaultMaxTimeout time.Duration
	LeaseMargin       time.Duration
	UserAgent         string
	MaxResponseBody   int
	Rand              func() float64
}

// sender signs and sends claimed tasks, one attempt each, through their
// tenant's share of the senders, their target's send slots and circuit
// breaker, and hands the attempts to the recorders.
//
// Each send runs on a goroutine of its own, started when the claim gets its
// tenant's share (shares.go) and its target's slot (targets.go); a claim
// that finds either full waits there without holding a goroutine, and
// whoever finishes a send hands the freed share or slot on. So the
// goroutines are bounded by the shares, and one tenant's receivers that
// never answer hold that tenant's share and no one else's.
type sender struct {
	cfg   senderConfig
	sends sync.WaitGroup
	// responseBuffers holds *bytes.Buffer to read answers into.
	responseBuffers sync.Pool
}

func newSender(cfg senderConfig) *sender { return &sender{cfg: cfg} }

// deferOne gives c back, to wait until notBefore (zero: due as it was).
func (s *sender) deferOne(c *model.ClaimedTask, notBefore time.Time) {
	s.cfg.Defer([]*model.ClaimedTask{c}, func(int) time.Time { return notBefore })
}

// Run takes claims until the channel is closed, then gives back those still
// waiting for a share and waits for the sends in flight.
func (s *sender) Run() {
	for c := range s.cfg.Claimed {
		// Claims to give back are gathered from whatever else is queued and
		// given back together, on a goroutine of their own: the write takes
		// a round trip, and this loop admits every tenant's claims.
		var back []*model.ClaimedTask
		var until []time.Time
		for n := 0; c != nil; n++ {
			switch decision, wait := s.cfg.Shares.admit(c); decision {
			case shareTaken:
				s.start(c)
			case shareFull:
				s.cfg.Metrics.deferrals.WithLabelValues("tenant_busy").Inc()
				back = append(back, c)
				until = append(until, s.cfg.Clock.Now().Add(wait))
			}
			c = nil
			if n+1 < maxAdmitRun {
				select {
				case c = <-s.cfg.Claimed: // nil once closed
				default:
				}
			}
		}
		if len(back) > 0 {
			s.sends.Add(1)
			go func() {
				defer s.sends.Done()
				s.cfg.Defer(back, func(i int) time.Time { return until[i] })
			}()
		}
	}
	if waiting := s.cfg.Shares.takeAll(); len(waiting) > 0 {
		s.cfg.Defer(waiting, asDue)
	}
	s.sends.Wait()
}

// maxAdmitRun bounds the claims Run admits before giving back those it
// must, so a steady stream does not keep them waiting.
const maxAdmitRun = 256

// start sends c, which holds its tenant's share, on a goroutine of its own.
func (s *sender) start(c *model.ClaimedTask) {
	s.sends.Add(1)
	go func() {
		defer s.sends.Done()
		s.sendThroughTarget(c)
	}()
}

// releaseShare gives back c's share and starts the claims it goes to.
func (s *sender) releaseShare(c *model.ClaimedTask, took time.Duration) {
	s.startAll(s.cfg.Shares.release(c, took))
}

// startAll starts the claims a freed share went to, or, when stopping,
// gives them back unsent.
func (s *sender) startAll(admitted []*model.ClaimedTask) {
	if !s.cfg.Stopping() {
		for _, next := range admitted {
			s.start(next)
		}
		return
	}
	// Stopping: give them back unsent, together, and the shares they took
	// with them (which admit no one else: nothing waits once stopping).
	var back []*model.ClaimedTask
	for len(admitted) > 0 {
		next := admitted[0]
		admitted = append(admitted[1:], s.cfg.Shares.release(next, 0)...)
		back = append(back, next)
	}
	if len(back) > 0 {
		s.cfg.Defer(back, asDue)
	}
}

// sendThroughTarget takes a send slot of c's target and sends c, then the
// claims parked for the same target one after the other; or parks c with
// the target when every slot is taken (giving its tenant's share back while
// it waits, and counted with the tenant's waiting claims), or gives it back
// when too many wait already, for the target or for the tenant. So a slow
// target holds at most MaxPerTarget sends, however many of its tasks fall
// due, and a tenant's claims parked behind its slow targets are bounded.
func (s *sender) sendThroughTarget(c *model.ClaimedTask) {
	if s.cfg.Stopping() || s.tooOld(c) {
		// Waited too long for its share to trust its lease, or we are
		// shutting down: give it back unsent rather than send it late.
		s.deferOne(c, time.Time{})
		s.releaseShare(c, 0)
		return
	}
	t := s.cfg.Targets.get(targetKey(c.URL), c.TenantID)
	if t.breaker.State() == gobreaker.StateOpen {
		// Do not park behind a target known to be failing: the wait would
		// hold the tenant's share until its stuck sends time out.
		s.cfg.Metrics.deferrals.WithLabelValues("breaker").Inc()
		s.deferOne(c, s.cfg.Targets.deferUntil(t, s.cfg.Clock.Now()))
		s.releaseShare(c, 0)
		return
	}
	switch decision, wait := s.cfg.Targets.admit(t, c, s.cfg.Shares.mayPark(c)); decision {
	case parked:
		// It waits for its target without its tenant's share, so that a
		// slow target does not hold the tenant's sends to other targets;
		// it takes a share again when a slot is handed to it.
		s.startAll(s.cfg.Shares.park(c))
		return
	case full:
		s.cfg.Metrics.deferrals.WithLabelValues("target_busy").Inc()
		s.deferOne(c, s.cfg.Clock.Now().Add(wait))
		s.releaseShare(c, 0)
		return
	}
	for c != nil {
		started := s.cfg.Clock.Now()
		var took time.Duration
		if sent := s.attemptThrough(t, c); sent {
			// Only a send says how long the target takes.
			took = s.cfg.Clock.Now().Sub(started)
		}
		s.releaseShare(c, took)
		c = s.cfg.Targets.done(t, took)
		c = s.takeOver(t, c)
	}
}

// shed gives back claims their target no longer has room to keep parked
// (targets.watch), claims[i] to come back after waits[i].
func (s *sender) shed(claims []*model.ClaimedTask, waits []time.Duration) {
	for _, c := range claims {
		s.cfg.Shares.unpark(c)
	}
	s.giveBack("target_busy", claims, waits)
}

// giveBack counts claims as deferred for reason and gives them back,
// claims[i] to be claimed again no sooner than waits[i] from now.
func (s *sender) giveBack(reason string, claims []*model.ClaimedTask, waits []time.Duration) {
	s.cfg.Metrics.deferrals.WithLabelValues(reason).Add(float64(len(claims)))
	now := s.cfg.Clock.Now()
	s.cfg.Defer(claims, func(i int) time.Time { return now.Add(waits[i]) })
}

// watchShares gives back, every second until ctx ends, the claims waiting
// beyond their tenant's room, which shrinks when its sends stop finishing
// (shares.trim): they would hold the claim budget until their age gives
// them back.
func (s *sender) watchShares(ctx context.Context) {
	clock.Every(ctx, s.cfg.Clock, watchEvery, func() {
		if claims, waits := s.cfg.Shares.trim(); len(claims) > 0 {
			s.giveBack("tenant_busy", claims, waits)
		}
	})
}

// takeOver decides what becomes of c, parked for target t and just handed
// t's free slot: it is sent (returned) if it gets its tenant's share;
// otherwise the slot goes on to the next parked claim, and c waits for its
// share or is given back.
func (s *sender) takeOver(t *target, c *model.ClaimedTask) *model.ClaimedTask {
	for c != nil {
		s.cfg.Shares.unpark(c)
		if s.cfg.Stopping() || s.tooOld(c) {
			// Parked too long for its lease, or we are shutting down:
			// give it back unsent rather than send it late.
			s.cfg.Metrics.deferrals.WithLabelValues("target_busy").Inc()
			s.deferOne(c, time.Time{})
			c = s.cfg.Targets.done(t, 0)
			continue
		}
		decision, wait := s.cfg.Shares.admit(c)
		switch decision {
		case shareTaken:
			return c
		case shareFull:
			s.cfg.Metrics.deferrals.WithLabelValues("tenant_busy").Inc()
			s.deferOne(c, s.cfg.Clock.Now().Add(wait))
		}
		// Waiting for its share (it comes back through a target slot of its
		// own), or given back: the slot goes on.
		c = s.cfg.Targets.done(t, 0)
	}
	return nil
}

// tooOld reports whether c was claimed so long ago that its lease may run
// out before its send ends: the partition's owner would then hand it back
// and claim it again, and sending this claim too would send the attempt
// twice.
func (s *sender) tooOld(c *model.ClaimedTask) bool {
	return s.cfg.Clock.Now().Sub(c.ClaimedAt) > s.cfg.LeaseMargin/2
}

// attemptThrough sends c through its tenant's dispatch limits for the host
// (a rate limit defers the task to its slot, a full concurrency limit makes
// it wait; see ratelimit.go) and its target's circuit breaker: an open
// breaker defers the task to the breaker's next probe. Neither costs an
// attempt. A send still unanswered after the breaker's StuckAfter counts as
// a failure of the target from then on (targets.go). It reports whether c
// was sent.
func (s *sender) attemptThrough(t *target, c *model.ClaimedTask) (sent bool) {
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
	if !s.cfg.Fence(c, s.cfg.Clock.Now()) {
		// Whatever it waited for, this node can no longer prove its claim:
		// another may be sending it. Given back (a no-op if it was handed
		// back already), never sent.
		report(errNotSent)
		s.cfg.Metrics.deferrals.WithLabelValues("lease_lapsed").Inc()
		s.deferOne(c, time.Time{})
		return false
	}
	finish := s.cfg.Targets.sending(t, report)
	outcome, interrupted := s.attempt(c, keys)
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

// attempt makes one delivery attempt of a claimed task and hands it to the
// recorders; its claim budget returns once it is written. A send begun is
// recorded whatever happens: when the dispatcher's shutdown bound cuts it
// off (interrupted), the attempt is recorded as such and the task is due
// again at once, for whichever node owns it next. outcome is what the
// answer says of the target (retry for a failure worth retrying, even on
// the last attempt), for its breaker; the recorded attempt may say fail.
func (s *sender) attempt(c *model.ClaimedTask, keys signingKeys) (outcome retry.Outcome, interrupted bool) {
	scheduledFor := c.RunAt
	if c.NextAttemptAt != nil {
		scheduledFor = *c.NextAttemptAt
	}
	started := s.cfg.Clock.Now()
	lateness := started.Sub(scheduledFor)
	kind := "first"
	if c.Attempt-c.AttemptBase > 1 {
		kind = "retry"
	}
	s.cfg.Metrics.lateness.WithLabelValues(kind).Observe(lateness.Seconds())

	timeout := min(c.Timeout, s.cfg.MaxTimeout)
	tenantMax := model.Limits{MaxTimeout: c.TenantMaxTimeout}.Resolve(model.Limits{MaxTimeout: s.cfg.DefaultMaxTimeout}).MaxTimeout
	if tenantMax > 0 {
		timeout = min(timeout, tenantMax)
	}
	statusCode, header, respBody, sendErr := s.send(s.cfg.Sends, c, keys, timeout, started)
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
	result := store.AttemptResult{
		Attempt: model.Attempt{
			TaskID:    c.ID,
			Attempt:   c.Attempt,
			StartedAt: started,
			Duration:  duration,
			Outcome:   string(outcome),
		},
		ClaimToken: c.ClaimToken,
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
	return outcome, interrupted
}

// errInterrupted is the error of an attempt cut off by the dispatcher's
// shutdown bound.
var errInterrupted = errors.New("interrupted: the node stopped before the receiver answered; sent again at once")

// bodyReadTimeout bounds reading a body the claim left out.
const bodyReadTimeout = 5 * time.Second

// send makes the HTTP request of one attempt. It returns the status code, the
// response header and the start of the response body, or the error that
// prevented a response. The body read is MaxResponseBody bytes, or for a
// task with a callback URL one byte more than the callback carries (so it
// can tell a longer body), whichever is more.
func (s *sender) send(ctx context.Context, c *model.ClaimedTask, keys signingKeys, timeout time.Duration, now time.Time) (int, http.Header, []byte, error) {
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
		return 0, nil, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	for name, value := range c.Headers {
		// The API refuses these; a row written by other means must not
		// shadow the signature either.
		if !signing.IsSignatureHeader(name) {
			req.Header.Set(name, value)
		}
	}
	webhookID := c.ID.String()
	secrets, keyID := keys.at(now)
	signed, err := s.cfg.Signer.Sign(secrets, signing.Message{WebhookID: webhookID, URL: c.URL, Body: c.Body, KeyID: keyID}, now)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("sign webhook: %w", err)
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

	resp, err := s.cfg.Transports.forClaim(c).Do(req)
	if err != nil {
		return 0, nil, nil, describeSendError(err, timeout, c.URL)
	}
	defer resp.Body.Close()
	limit := s.cfg.MaxResponseBody
	if wantsResponseBody(c) {
		limit = max(limit, CallbackBodyMax+1)
	}
	return resp.StatusCode, resp.Header, s.readAnswer(resp.Body, limit), nil
}

// readAnswer reads the first limit bytes of an answer's body, which it
// returns, then discards what else comes within ResponseBodyReadMax so the
// connection can be reused: a receiver that streams more back loses its
// connection (closing a body not read to its end closes it) rather than
// making the node read it.
func (s *sender) readAnswer(r io.Reader, limit int) []byte {
	body := s.readResponseBody(r, limit)
	if rest := ResponseBodyReadMax - len(body); rest > 0 {
		_, _ = io.Copy(io.Discard, io.LimitReader(r, int64(rest)))
	}
	return body
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

// newTransport wraps the HTTP client in go-retryablehttp for the one kind of
// retry that is always safe: a connection that could not be made (refused,
// unreachable, DNS failure) carried no request, so it is tried again within
// the same attempt. Anything that may have reached the receiver is left to
// the attempt's retry policy, which records it.
func newTransport(client *http.Client, transportRetries prometheus.Counter) *retryablehttp.Client {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = client
	rc.Logger = nil
	rc.RetryMax = 2
	rc.RetryWaitMin = 20 * time.Millisecond
	rc.RetryWaitMax = 200 * time.Millisecond
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return resp == nil && unsent(err), nil
	}
	rc.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, retryNumber int) {
		if retryNumber > 0 {
			transportRetries.Inc()
		}
	}
	return rc
}

// unsent reports whether err means the request never left: the dial itself
// failed. A refused address is final, not a transient failure.
func unsent(err error) bool {
	var op *net.OpError
	return err != nil && !errors.Is(err, netguard.ErrBlocked) && errors.As(err, &op) && op.Op == "dial"
}

// secretsFreshFor is how old a claim's copy of its tenant's signing secrets
// may be when it is signed. A claim usually goes out within milliseconds of
// being taken, with the secrets it was taken with; one that waited (for its
// target, its tenant's share, a rate limit) reads them again, so a rotation
// reaches its webhooks within this time rather than after the wait.
const secretsFreshFor = time.Second

// secretUnreadableRetry is when a claim whose secret this node cannot open
// is due again: long enough not to spin, short enough that a node whose
// keyring is fixed (or another node that has the key) soon sends it.
const secretUnreadableRetry = 30 * time.Second

// signingKey is one of a tenant's signing secrets, opened.
type signingKey struct {
	id, secret string
	expiresAt  *time.Time
}

// signingKeys are a claim's signing secrets in plaintext, current first.
type signingKeys []signingKey

// at returns the secrets that sign at now, current first, and the current
// one's id: during a rotation's grace period every webhook carries a
// signature by each.
func (k signingKeys) at(now time.Time) (secrets []string, keyID string) {
	for _, key := range k {
		if key.expiresAt == nil || now.Before(*key.expiresAt) {
			secrets = append(secrets, key.secret)
		}
	}
	if len(k) > 0 {
		keyID = k[0].id
	}
	return secrets, keyID
}

// signingKeys opens the signing secrets c is to be signed with, read again
// when the claim is older than secretsFreshFor. A secret this node cannot
// open (its HOOKWHEEL_ENCRYPTION_KEY lacks the key that sealed it) is the
// node's fault, not the task's nor the target's: the claim is given back
// without spending an attempt, and said loudly.
func (s *sender) signingKeys(c *model.ClaimedTask) (signingKeys, bool) {
	now := s.cfg.Clock.Now()
	if now.Sub(c.ClaimedAt) > secretsFreshFor {
		ctx, cancel := context.WithTimeout(s.cfg.Sends, bodyReadTimeout)
		defer cancel()
		fresh, err := s.cfg.Bodies.SigningSecrets(ctx, c.TenantID)
		if err != nil {
			s.cfg.Metrics.storeErrors.WithLabelValues("secrets").Inc()
			s.cfg.Logger.Error("reading a tenant's signing secrets failed; giving the claim back", "task", c.ID, "err", err)
			s.deferOne(c, now.Add(time.Second))
			return nil, false
		}
		c.SigningSecrets = fresh
	}
	active := model.ActiveSigningSecrets(c.SigningSecrets, now)
	keys := make(signingKeys, 0, len(active))
	for _, secret := range active {
		plain, err := s.cfg.Keyring.Open(secret.Value, secret.SealContext(c.TenantID))
		if err != nil {
			s.unreadableSecret(c, now, "secret", secret.ID, "err", err)
			return nil, false
		}
		keys = append(keys, signingKey{id: secret.ID, secret: plain, expiresAt: secret.ExpiresAt})
	}
	if len(keys) == 0 {
		s.unreadableSecret(c, now, "err", "the tenant has no signing secret")
		return nil, false
	}
	return keys, true
}

func (s *sender) unreadableSecret(c *model.ClaimedTask, now time.Time, args ...any) {
	s.cfg.Metrics.deferrals.WithLabelValues("secret_unreadable").Inc()
	s.cfg.Logger.Error("cannot sign a webhook: a signing secret of its tenant does not open with this node's "+
		"HOOKWHEEL_ENCRYPTION_KEY; the claim is given back without spending an attempt",
		append([]any{"task", c.ID, "tenant", c.TenantID}, args...)...)
	s.deferOne(c, now.Add(secretUnreadableRetry))
}
