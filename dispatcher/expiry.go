package dispatcher

import (
	"fmt"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/retry"
)

// A task's expires_at bounds when its attempts may start. Three places keep
// to it, each with the clock the sender sends by:
//   - the sender checks it as a claim arrives and again as the send
//     starts, after the fence (send.go): a claim taken in time whose send
//     would start too late, having waited for its instant, a share, a slot
//     or a limit, is not sent;
//   - a failed attempt whose retry would start too late ends the task
//     rather than scheduling it (answer.go);
//   - a claim given back to come due at or past it ends there instead
//     (deferrer.go), rather than waiting in Postgres to be claimed only to
//     be ended.
// Each ends the task expired, fenced by its claim like any outcome, with
// its failure callback, and the first and the last without an attempt.

// expire ends c's task expired without sending it: its next attempt could
// start only at or after its expiry, now or later. The claim is recorded
// like an attempt's outcome (under its token, with the failure callback in
// the same commit) but writes no attempt, meters none and gives back the
// attempt number it took.
func (s *sender) expire(c *model.ClaimedTask, now time.Time) {
	msg := fmt.Sprintf("expired at %s before attempt %d could start",
		c.ExpiresAt.UTC().Format(time.RFC3339Nano), c.Attempt)
	result := model.AttemptResult{
		Attempt: model.Attempt{
			TaskID: c.ID, Attempt: c.Attempt, StartedAt: now,
			Outcome: string(retry.OutcomeFail), Error: &msg,
		},
		ClaimToken:  c.ClaimToken,
		Status:      model.StatusExpired,
		Unattempted: true,
	}
	if url := callbackURL(c, result.Status); url != nil {
		cb, err := newCallbackTask(c, *url, &result, nil, now)
		if err != nil {
			s.cfg.Logger.Error("making a task's callback failed; its expiry is recorded without it", "task", c.ID, "err", err)
		}
		result.Callback = cb
	}
	s.cfg.Metrics.expired.WithLabelValues("before_attempt").Inc()
	s.cfg.Record(result, func(err error) {
		defer s.cfg.Settle(c.ID)
		if err != nil {
			// Lost: the claim lapses and is recovered, and whoever claims
			// the task next finds it expired too.
			s.cfg.Logger.Warn("recording a task's expiry failed; its claim will lapse and the task end expired on its next claim",
				"task", c.ID, "err", err)
			return
		}
		if cb := result.Callback; cb != nil {
			s.cfg.Schedule(cb.ID, cb.RunAt)
		}
	})
}

// expireOrDefer splits claims to give back into those that would come due
// again at or after their expiry, which end expired now (by expire), and
// the rest, deferred as asked. dueAgain is when claims[i] would be due
// again: until(i), or its due time if later, and never before now.
func expireOrDefer(claims []*model.ClaimedTask, until func(i int) time.Time, now time.Time,
	expire func(c *model.ClaimedTask, now time.Time),
) (kept []*model.ClaimedTask, keptUntil func(i int) time.Time) {
	var (
		expiring []int
		times    []time.Time
	)
	for i, c := range claims {
		if c.ExpiresAt == nil {
			continue
		}
		at := until(i)
		if c.NextAttemptAt != nil && c.NextAttemptAt.After(at) {
			at = *c.NextAttemptAt
		}
		if c.ExpiredAt(at) || c.ExpiredAt(now) {
			expiring = append(expiring, i)
		}
	}
	if len(expiring) == 0 {
		return claims, until
	}
	kept = make([]*model.ClaimedTask, 0, len(claims)-len(expiring))
	times = make([]time.Time, 0, len(claims)-len(expiring))
	next := 0
	for i, c := range claims {
		if next < len(expiring) && expiring[next] == i {
			next++
			expire(c, now)
			continue
		}
		kept = append(kept, c)
		times = append(times, until(i))
	}
	return kept, func(i int) time.Time { return times[i] }
}
