package model

import (
	"time"

	"github.com/google/uuid"
)

// DispatchLimit is what applies to the webhooks of one tenant to one host,
// or, when Flow is set, to the tasks of one of its flow keys.
type DispatchLimit struct {
	TenantID uuid.UUID
	// Host is the target's host name, lowercase, without port.
	Host string
	// Flow is the flow key limited instead of a host; "" for a host's limit.
	Flow string
	// Rate is webhooks per second, Concurrency webhooks in flight; 0 means
	// unlimited.
	Rate        float64
	Concurrency int
	// Period is the window the rate is promised over (a flow key's period;
	// a second when zero): no window of it holds more than Rate x Period
	// sends, plus one (store's dispatchSpacing).
	Period time.Duration
}

// Limited reports whether the limit limits anything.
func (l DispatchLimit) Limited() bool { return l.Rate > 0 || l.Concurrency > 0 }

// DispatchOutcome is the answer of store.Redis.AdmitDispatch.
type DispatchOutcome int

const (
	// DispatchNow: send now. A concurrency slot, if limited, is held until
	// store.Redis.ReleaseDispatch or the lease ends.
	DispatchNow DispatchOutcome = iota
	// DispatchLater: send no sooner than Wait from now; that slot of the
	// rate is reserved for this task, which must come back for it.
	DispatchLater
	// DispatchBusy: every concurrency slot is taken; nothing was reserved.
	DispatchBusy
)

// DispatchAdmission is the answer of store.Redis.AdmitDispatch.
type DispatchAdmission struct {
	Outcome DispatchOutcome
	Wait    time.Duration
}

// minDispatchGrace is the least lateness a task coming back for its reserved
// slot is forgiven, however high the rate: below it, ordinary scheduling
// jitter would make tasks lose their slots over and over.
const minDispatchGrace = 20 * time.Millisecond

// DispatchGrace is how late a task may come back for its reserved slot (or
// be sent after the slot it was given) and still use it: half an interval,
// so that the other half absorbs the jitter between sending and arriving and
// a receiver never sees more than one extra webhook in any window (a rate of
// 20/s shows at most 21 in a second), and never less than minDispatchGrace.
// (Just under a whole interval was measured to let 22 through now and then.)
func DispatchGrace(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return max(time.Duration(float64(time.Second)/rate/2), minDispatchGrace)
}

// DispatchRequest asks whether one claimed task may be sent under Limit;
// only the limits it sets are checked (a zero Rate or Concurrency is not).
type DispatchRequest struct {
	Limit  DispatchLimit
	TaskID uuid.UUID
	// Attempt is the attempt the task is claimed for: a slot reserved for
	// it is its own.
	Attempt int
	// Token is the claim token: with TaskID it names the holder of a
	// concurrency slot.
	Token uuid.UUID
	// Lease bounds how long a concurrency slot stays held if
	// store.Redis.ReleaseDispatch never comes (the node died).
	Lease time.Duration
	// At is when the task is meant to be sent, by the dispatcher's clock (a
	// claim is taken a little ahead of its due time); the rate is decided
	// for that instant. The slots of a rate are on the dispatchers' clocks
	// (keep them synchronised): a wait converted from Redis's clock would be
	// off by the unknown part of a round trip, and a task would come back
	// a hair before its slot.
	At time.Time
}
