package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/retry"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/store"
)

// runSender sends claimed tasks until the claimers close the channel. A
// sender that finds its task's target at its limit of concurrent sends
// parks the task with the target and moves on; whoever finishes a send to
// that target takes the parked task next. So a slow target holds at most
// MaxPerTarget senders, however many of its tasks fall due.
func (d *Dispatcher) runSender() {
	for c := range d.claimed {
		t := d.targets.get(targetKey(c.URL))
		switch decision, wait := d.targets.admit(t, c); decision {
		case parked:
			continue
		case full:
			d.metrics.deferrals.WithLabelValues("target_busy").Inc()
			d.deferClaims([]*model.ClaimedTask{c}, d.clock.Now().Add(wait))
			continue
		}
		for c != nil {
			started := d.clock.Now()
			d.attemptThrough(t, c)
			c = d.targets.done(t, d.clock.Now().Sub(started))
			for c != nil && (d.stopping.Load() || d.clock.Now().Sub(c.ClaimedAt) > d.cfg.LeaseMargin/2) {
				// Parked too long for its lease, or we are shutting down:
				// give it back unsent rather than send it late.
				d.metrics.deferrals.WithLabelValues("target_busy").Inc()
				d.deferClaims([]*model.ClaimedTask{c}, time.Time{})
				c = d.targets.done(t, 0)
			}
		}
	}
}

// attemptThrough sends c through its tenant's dispatch limits for the host
// (a rate limit defers the task to its slot, a full concurrency limit makes
// it wait; see ratelimit.go) and its target's circuit breaker: an open
// breaker defers the task to the breaker's next probe. Neither costs an
// attempt.
func (d *Dispatcher) attemptThrough(t *target, c *model.ClaimedTask) {
	release, ok := d.limits.admit(c)
	if !ok {
		return
	}
	defer release()
	report, err := t.breaker.Allow()
	if err != nil {
		d.metrics.deferrals.WithLabelValues("breaker").Inc()
		d.deferClaims([]*model.ClaimedTask{c}, d.targets.deferUntil(t, d.clock.Now()))
		return
	}
	if d.attempt(c) == retry.OutcomeRetry {
		report(errTargetFailed)
	} else {
		report(nil)
	}
}

// attempt makes one delivery attempt of a claimed task and hands it to the
// recorders; its claim budget returns once it is written. It
// runs to completion even while the dispatcher shuts down: the claim is
// ours, and a send begun must be recorded.
func (d *Dispatcher) attempt(c *model.ClaimedTask) retry.Outcome {
	ctx := context.Background()

	scheduledFor := c.RunAt
	if c.NextAttemptAt != nil {
		scheduledFor = *c.NextAttemptAt
	}
	started := d.clock.Now()
	lateness := started.Sub(scheduledFor)
	kind := "first"
	if c.Attempt-c.AttemptBase > 1 {
		kind = "retry"
	}
	d.metrics.lateness.WithLabelValues(kind).Observe(lateness.Seconds())

	statusCode, header, respBody, sendErr := d.send(ctx, c, started)
	duration := d.clock.Now().Sub(started)
	outcome := retry.Classify(statusCode, sendErr)
	if errors.Is(sendErr, netguard.ErrBlocked) {
		// The target resolves to an address webhooks may not reach: no
		// retry will change that.
		outcome = retry.OutcomeFail
	}
	d.metrics.attempts.WithLabelValues(string(outcome)).Inc()
	d.metrics.attemptDuration.Observe(duration.Seconds())

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
	switch delay, again := policy.NextDelay(c.Attempt-c.AttemptBase, outcome, statusCode, header, d.clock.Now(), d.cfg.Rand()); {
	case outcome == retry.OutcomeSuccess:
		result.Status = model.StatusDelivered
	case again:
		next := d.clock.Now().Add(delay)
		result.Status = model.StatusRetrying
		result.NextAttemptAt = &next
	default:
		result.Status = model.StatusDead
	}

	d.record(result, func(err error) {
		defer d.settle(c.ID)
		if err != nil {
			d.logger.Error("recording an attempt failed; the lease will expire and the task will be sent again with the same webhook-id",
				"task", c.ID, "attempt", c.Attempt, "err", err)
			return
		}
		if result.NextAttemptAt != nil {
			d.Schedule(c.ID, *result.NextAttemptAt)
		}
		d.logger.Debug("attempt", "task", c.ID, "attempt", c.Attempt, "outcome", outcome, "status", statusCode, "lateness", lateness, "duration", duration)
	})
	return outcome
}

// send makes the HTTP request of one attempt. It returns the status code, the
// response header and the start of the response body, or the error that
// prevented a response.
func (d *Dispatcher) send(ctx context.Context, c *model.ClaimedTask, now time.Time) (int, http.Header, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := retryablehttp.NewRequestWithContext(ctx, c.Method, c.URL, c.Body)
	if err != nil {
		return 0, nil, "", fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	for name, value := range c.Headers {
		// The API refuses these; a row written by other means must not
		// shadow the signature either.
		if !signing.IsSignatureHeader(name) {
			req.Header.Set(name, value)
		}
	}
	webhookID := c.ID.String()
	signed, err := d.signer.Sign([]string{c.SigningSecret}, signing.Message{WebhookID: webhookID, URL: c.URL, Body: c.Body}, now)
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

	resp, err := d.transport.Do(req)
	if err != nil {
		return 0, nil, "", describeSendError(err, c.Timeout)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(d.cfg.MaxResponseBody)))
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
