package tasks

import (
	"slices"
	"time"
)

// Expiry resolves a request's expires_at or expires_in (expires_in counts
// from now, as delay does) to the instant from which no attempt of the task
// may start, or nil when neither is given; of the request, only ExpiresAt,
// ExpiresIn and Unreadable are read. It must come after runAt, the instant
// the task falls due: a task that could never be attempted is refused, not
// stored to expire. Both given are refused as a pair.
//
// The instant is cut to the microsecond Postgres keeps, down, so that the
// stored expiry is never later than the one asked for.
func (r Rules) Expiry(rep Reporter, req *Request, runAt, now time.Time) *time.Time {
	atGiven := req.ExpiresAt != nil || slices.ContainsFunc(req.Unreadable, func(e FieldError) bool { return e.Field == "expires_at" })
	inGiven := req.ExpiresIn != nil || slices.ContainsFunc(req.Unreadable, func(e FieldError) bool { return e.Field == "expires_in" })
	if atGiven && inGiven {
		rep.Add("expires_at", "and expires_in are exclusive: give only one")
		return nil
	}
	if reportUnreadable(rep, req.Unreadable, "expires_at", "expires_in") {
		return nil
	}
	var (
		at    time.Time
		field string
	)
	switch {
	case req.ExpiresAt != nil:
		at, field = *req.ExpiresAt, "expires_at"
	case req.ExpiresIn != nil:
		if *req.ExpiresIn <= 0 {
			rep.Add("expires_in", "must be positive")
			return nil
		}
		at, field = now.Add(*req.ExpiresIn), "expires_in"
	default:
		return nil
	}
	at = at.Truncate(time.Microsecond)
	if !at.After(runAt) {
		rep.Add(field, "must be after the task is due (%s): no attempt could start before it",
			runAt.UTC().Format(time.RFC3339Nano))
		return nil
	}
	return &at
}
