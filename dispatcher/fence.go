package dispatcher

import (
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The fence: a node sends a claim only while it can prove, by its own
// monotonic clock, that nobody else may be sending the same attempt.
//
// Another node hands a claim back, and then sends it, only once Postgres
// says the claim is stale (store.staleClaim): its lease ran out, or the node
// that took it is no longer live. Both deadlines were set by Postgres's
// clock, from an instant after one this node read before sending the
// statement (the claim's ClaimedAt; the heartbeat's start), so both hold at
// least until that reading plus the same duration by this node's clock.
// A process frozen by SIGSTOP, a long pause or a CPU quota wakes up with
// these readings unchanged and its clock moved on, and so finds out before
// sending what it held.
//
// What the fence cannot stop is a send already on the wire when the node
// froze, or sent and not yet recorded: those may go out twice, with the
// same webhook-id.

// fenceMarginOf is how long before a lease runs out a node stops acting on
// it: a tenth of the node TTL, room for the moment between the check and the
// request leaving and for a clock a little slower than Postgres's.
func fenceMarginOf(nodeTTL time.Duration) time.Duration { return nodeTTL / 10 }

// mayStillSend reports whether c may be sent at now: the node's lease under
// which c was claimed still holds (the same epoch, FenceMargin ahead of its
// end), and so does the claim's own lease.
func (d *Dispatcher) mayStillSend(c *model.ClaimedTask, now time.Time) bool {
	if !d.ownership.leaseValid(c.LeaseEpoch, now) {
		return false
	}
	claimEnds := c.ClaimedAt.Add(c.Timeout + d.cfg.LeaseMargin - fenceMarginOf(d.cfg.NodeTTL))
	return now.Before(claimEnds)
}
