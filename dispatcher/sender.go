package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookwheel/hookwheel/internal/retry"
	"github.com/hookwheel/hookwheel/store"
)

// runSender sends claimed tasks until the claimers close the channel.
func (d *Dispatcher) runSender() {
	for c := range d.claimed {
		d.attempt(c)
	}
}

// attempt makes one delivery attempt of a claimed task and records it. It
// runs to completion even while the dispatcher shuts down: the claim is
// ours, and a send begun must be recorded.
func (d *Dispatcher) attempt(c *store.ClaimedTask) {
	defer d.settle(c.ID)
	ctx := context.Background()

	scheduledFor := c.RunAt
	if c.NextAttemptAt != nil {
		scheduledFor = *c.NextAttemptAt
	}
	started := d.clock.Now()
	lateness := started.Sub(scheduledFor)
	kind := "first"
	if c.Attempt > 1 {
		kind = "retry"
	}
	d.metrics.lateness.WithLabelValues(kind).Observe(lateness.Seconds())

	statusCode, header, respBody, sendErr := d.send(ctx, c, started)
	duration := d.clock.Now().Sub(started)
	outcome := retry.Classify(statusCode, sendErr)
	d.metrics.attempts.WithLabelValues(string(outcome)).Inc()
	d.metrics.attemptDuration.Observe(duration.Seconds())

	policy := retry.Policy{MaxAttempts: c.MaxAttempts, MinBackoff: c.MinBackoff, MaxBackoff: c.MaxBackoff}
	result := store.AttemptResult{
		Attempt: store.Attempt{
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
		result.Status = store.StatusDelivered
	case again:
		next := d.clock.Now().Add(delay)
		result.Status = store.StatusRetrying
		result.NextAttemptAt = &next
	default:
		result.Status = store.StatusDead
	}

	if err := d.record(result); err != nil {
		d.logger.Error("recording an attempt failed; the lease will expire and the task will be sent again with the same webhook-id",
			"task", c.ID, "attempt", c.Attempt, "err", err)
		return
	}
	if result.NextAttemptAt != nil {
		d.Schedule(c.ID, *result.NextAttemptAt)
	}
	d.logger.Debug("attempt", "task", c.ID, "attempt", c.Attempt, "outcome", outcome, "status", statusCode, "lateness", lateness, "duration", duration)
}

// send makes the HTTP request of one attempt. It returns the status code, the
// response header and the start of the response body, or the error that
// prevented a response.
func (d *Dispatcher) send(ctx context.Context, c *store.ClaimedTask, now time.Time) (int, http.Header, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.Method, c.URL, bytes.NewReader(c.Body))
	if err != nil {
		return 0, nil, "", fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	for name, value := range c.Headers {
		// The API refuses these; a row written by other means must not
		// shadow the signature either.
		if !IsSignatureHeader(name) {
			req.Header.Set(name, value)
		}
	}
	webhookID := c.ID.String()
	signed, err := d.signer.Sign([]string{c.SigningSecret}, Message{WebhookID: webhookID, URL: c.URL, Body: c.Body}, now)
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

	resp, err := d.cfg.HTTPClient.Do(req)
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
