package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/clock"
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

// senderConfig configures newSender. Every field is required.
type senderConfig struct {
	// Claimed carries the claims to send; Run returns once it is closed.
	Claimed <-chan *model.ClaimedTask
	Targets *targets
	Limits  limitsGate
	// Transport sends webhooks, redialling connections that failed before
	// the request left.
	Transport *retryablehttp.Client
	Signer    *signing.Signer
	// Record hands a finished attempt to the recorders.
	Record func(r store.AttemptResult, then func(err error))
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
	// Stopping reports that the dispatcher is stopping: parked claims are
	// given back rather than sent.
	Stopping        func() bool
	LeaseMargin     time.Duration
	UserAgent       string
	MaxResponseBody int
	Rand            func() float64
}

// sender signs and sends claimed tasks, one attempt each, through their
// target's send slots and circuit breaker, and hands the attempts to the
// recorders.
type sender struct {
	cfg senderConfig
}

func newSender(cfg senderConfig) *sender { return &sender{cfg: cfg} }

// deferOne gives c back, to wait until notBefore (zero: due as it was).
func (s *sender) deferOne(c *model.ClaimedTask, notBefore time.Time) {
	s.cfg.Defer([]*model.ClaimedTask{c}, func(int) time.Time { return notBefore })
}

// Run sends claimed tasks until the claimers close the channel; several
// goroutines run it together. A sender that finds its task's target at its
// limit of concurrent sends parks the task with the target and moves on;
// whoever finishes a send to that target takes the parked task next. So a
// slow target holds at most MaxPerTarget senders, however many of its tasks
// fall due.
func (s *sender) Run() {
	for c := range s.cfg.Claimed {
		t := s.cfg.Targets.get(targetKey(c.URL))
		switch decision, wait := s.cfg.Targets.admit(t, c); decision {
		case parked:
			continue
		case full:
			s.cfg.Metrics.deferrals.WithLabelValues("target_busy").Inc()
			s.deferOne(c, s.cfg.Clock.Now().Add(wait))
			continue
		}
		for c != nil {
			started := s.cfg.Clock.Now()
			s.attemptThrough(t, c)
			c = s.cfg.Targets.done(t, s.cfg.Clock.Now().Sub(started))
			for c != nil && (s.cfg.Stopping() || s.cfg.Clock.Now().Sub(c.ClaimedAt) > s.cfg.LeaseMargin/2) {
				// Parked too long for its lease, or we are shutting down:
				// give it back unsent rather than send it late.
				s.cfg.Metrics.deferrals.WithLabelValues("target_busy").Inc()
				s.deferOne(c, time.Time{})
				c = s.cfg.Targets.done(t, 0)
			}
		}
	}
}

// attemptThrough sends c through its tenant's dispatch limits for the host
// (a rate limit defers the task to its slot, a full concurrency limit makes
// it wait; see ratelimit.go) and its target's circuit breaker: an open
// breaker defers the task to the breaker's next probe. Neither costs an
// attempt.
func (s *sender) attemptThrough(t *target, c *model.ClaimedTask) {
	release, ok := s.cfg.Limits.admit(c)
	if !ok {
		return
	}
	defer release()
	report, err := t.breaker.Allow()
	if err != nil {
		s.cfg.Metrics.deferrals.WithLabelValues("breaker").Inc()
		s.deferOne(c, s.cfg.Targets.deferUntil(t, s.cfg.Clock.Now()))
		return
	}
	if s.attempt(c) == retry.OutcomeRetry {
		report(errTargetFailed)
	} else {
		report(nil)
	}
}

// attempt makes one delivery attempt of a claimed task and hands it to the
// recorders; its claim budget returns once it is written. It
// runs to completion even while the dispatcher shuts down: the claim is
// ours, and a send begun must be recorded.
func (s *sender) attempt(c *model.ClaimedTask) retry.Outcome {
	ctx := context.Background()

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

	statusCode, header, respBody, sendErr := s.send(ctx, c, started)
	duration := s.cfg.Clock.Now().Sub(started)
	outcome := retry.Classify(statusCode, sendErr)
	if errors.Is(sendErr, netguard.ErrBlocked) {
		// The target resolves to an address webhooks may not reach: no
		// retry will change that.
		outcome = retry.OutcomeFail
	}
	s.cfg.Metrics.attempts.WithLabelValues(string(outcome)).Inc()
	s.cfg.Metrics.attemptDuration.Observe(duration.Seconds())

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
		result.ResponseBody = &respBody
		if outcome != retry.OutcomeSuccess {
			msg := fmt.Sprintf("receiver answered %d %s", statusCode, http.StatusText(statusCode))
			result.Error = &msg
		}
	}
	switch delay, again := policy.NextDelay(c.Attempt-c.AttemptBase, outcome, statusCode, header, s.cfg.Clock.Now(), s.cfg.Rand()); {
	case outcome == retry.OutcomeSuccess:
		result.Status = model.StatusDelivered
	case again:
		next := s.cfg.Clock.Now().Add(delay)
		result.Status = model.StatusRetrying
		result.NextAttemptAt = &next
	default:
		result.Status = model.StatusDead
	}

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
		s.cfg.Logger.Debug("attempt", "task", c.ID, "attempt", c.Attempt, "outcome", outcome, "status", statusCode, "lateness", lateness, "duration", duration)
	})
	return outcome
}

// send makes the HTTP request of one attempt. It returns the status code, the
// response header and the start of the response body, or the error that
// prevented a response.
func (s *sender) send(ctx context.Context, c *model.ClaimedTask, now time.Time) (int, http.Header, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := retryablehttp.NewRequestWithContext(ctx, c.Method, c.URL, c.Body)
	if err != nil {
		return 0, nil, "", fmt.Errorf("build request: %w", err)
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
	signed, err := s.cfg.Signer.Sign([]string{c.SigningSecret}, signing.Message{WebhookID: webhookID, URL: c.URL, Body: c.Body}, now)
	if err != nil {
		return 0, nil, "", fmt.Errorf("sign webhook: %w", err)
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

	resp, err := s.cfg.Transport.Do(req)
	if err != nil {
		return 0, nil, "", describeSendError(err, c.Timeout)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(s.cfg.MaxResponseBody)))
	// Drain a little more so the connection can be reused; a receiver that
	// streams megabytes back loses its connection instead.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header, validUTF8(body), nil
}

func describeSendError(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no response within the %s timeout", timeout)
	}
	return err
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
