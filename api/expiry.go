package api

import (
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// parseExpiry reads expires_at and expires_in as sent (nil: not given),
// reporting under its name each that does not parse.
func parseExpiry(rep tasks.Reporter, expiresAt, expiresIn *string) (*time.Time, *time.Duration) {
	var (
		at *time.Time
		in *time.Duration
	)
	if expiresAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *expiresAt); err != nil {
			rep.Add("expires_at", "must be an RFC 3339 time such as 2026-11-22T10:10:00Z")
		} else {
			at = &t
		}
	}
	if expiresIn != nil {
		if d, err := time.ParseDuration(*expiresIn); err != nil {
			rep.Add("expires_in", "must be a duration such as 10m or 1h")
		} else {
			in = &d
		}
	}
	return at, in
}

// minReportedAttempt is the least attempt number a report of status
// carries: an expiry before the first attempt reports attempt 0.
func minReportedAttempt(status openapi.CallbackPayloadStatus) int {
	if status == openapi.CallbackPayloadStatusExpired {
		return 0
	}
	return 1
}

// expiresBy reports whether a waiting task refused a reschedule to at
// because it expires by then: it could never be attempted there.
func expiresBy(t *model.Task, at time.Time) bool {
	waiting := t.Status == model.StatusScheduled || t.Status == model.StatusRetrying
	return waiting && t.ExpiredAt(at)
}

// rescheduleAfterExpiry is the problem of a reschedule to or past the task's
// expires_at, under the field that gave the time: delay, else run_at.
func rescheduleAfterExpiry(t *model.Task, byDelay bool) error {
	field := "run_at"
	if byDelay {
		field = "delay"
	}
	var fe fieldErrors
	fe.add(field, "must come before the task expires (%s): no attempt could start after it",
		t.ExpiresAt.UTC().Format(time.RFC3339Nano))
	return fe.problem()
}
