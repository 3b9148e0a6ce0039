package dispatcher

import "time"

// drainMeter counts the sends a tenant or a target finished lately: about
// what it will finish in the next second, and so how many of its claims may
// wait for it in memory without aging there. Waiting claims hold the node's
// claim budget, and each one given back instead costs Postgres two writes
// (the deferral and the claim again); a fixed bound either gives back the
// surplus of a busy, healthy tenant at every burst (measured: a quarter of
// the claims of one tenant's 100,000-task burst, each written twice more) or
// lets one whose receivers hang fill the budget. A bound that follows the
// drain does neither.
//
// Two half-second buckets, the current and the last: the count covers
// between half a second and a second of finished sends.
type drainMeter struct {
	start     time.Time // when the current bucket began
	cur, prev int
}

const drainBucket = 500 * time.Millisecond

// roll moves the buckets on to now.
func (m *drainMeter) roll(now time.Time) {
	switch d := now.Sub(m.start); {
	case d < drainBucket:
	case d < 2*drainBucket:
		m.prev, m.cur = m.cur, 0
		m.start = m.start.Add(drainBucket)
	default:
		m.prev, m.cur = 0, 0
		m.start = now
	}
}

// finished counts one send finished at now.
func (m *drainMeter) finished(now time.Time) {
	m.roll(now)
	m.cur++
}

// recent is the number of sends finished in about the last second.
func (m *drainMeter) recent(now time.Time) int {
	m.roll(now)
	return m.prev + m.cur
}

// drainMeasured is how long a tenant must have had claims on the node, or
// a target sends in flight, before its meter tells its pace; until then
// its room is half the claim budget (a tenant) or all of its tenant's room
// (a target), so that the first burst of a new one waits in memory.
const drainMeasured = time.Second

// drainRoom is how many claims may wait for a tenant or target whose drain
// meter reads recent: five to ten seconds of its pace (drainHorizon times
// what it finished in the last half to whole second), at least floor and
// at most ceiling (the node's claim budget). Within the age at which a
// waiting claim is given back (LeaseMargin/2, 15 s); and long enough that
// a busy receiver's pace must fall far below the budget's worth before its
// claims are given back: each one given back costs Postgres two writes,
// which slows every send, which would shrink a shorter room further
// (measured with a room of one to two seconds and a budget of 8,192: 43,000
// claims of 100,000 given back, 1,770 deliveries a second). A receiver
// that hangs earns the floor within a second all the same.
func drainRoom(floor, ceiling, recent int) int {
	return max(floor, min(drainHorizon*recent, ceiling))
}

// drainHorizon turns a drain meter's count into a room: see drainRoom.
const drainHorizon = 10

// lineWait is how long until a slot is likely free for the claim ahead
// claims back in a line served by slots sends at a time, each taking per:
// between a second and 30 seconds, so that a claim given back is not
// claimed again within milliseconds (two writes each time), nor held back
// past what its lease would allow a waiting claim.
func lineWait(ahead, slots int, per time.Duration) time.Duration {
	wait := time.Duration(float64(ahead) / float64(max(1, slots)) * float64(max(per, time.Millisecond)))
	return min(max(wait, time.Second), 30*time.Second)
}
