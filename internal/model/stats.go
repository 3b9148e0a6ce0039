package model

import (
	"math/bits"
	"time"

	"github.com/google/uuid"
)

// Lateness histograms have fixed buckets so that any number of them, from
// any node and any minute, add up bucket by bucket: the first holds what was
// later than zero and under LatenessBase, each next one the twice as wide
// span above the previous ([LatenessBase·2^(i-1), LatenessBase·2^i)), and
// the last everything from LatenessBase·2^(LatenessBuckets-2), about 70
// minutes, up. Doubling keeps a quantile within a factor of two of the truth
// before interpolation, over six orders of magnitude, in 26 counters: the
// width of a backlog after an outage as much as that of a send on time.
const (
	LatenessBase    = 250 * time.Microsecond
	LatenessBuckets = 26
)

// LatenessHistogram counts attempts by how late they started, in the buckets
// described above. The zero value is empty.
type LatenessHistogram [LatenessBuckets]int64

// LatenessBucket is the bucket of a lateness; early sends count as on time.
func LatenessBucket(d time.Duration) int {
	if d < LatenessBase {
		return 0
	}
	return min(bits.Len64(uint64(d/LatenessBase)), LatenessBuckets-1)
}

// latenessBounds is bucket i's span; the last has no upper bound (hi == lo).
func latenessBounds(i int) (lo, hi time.Duration) {
	switch {
	case i == 0:
		return 0, LatenessBase
	case i == LatenessBuckets-1:
		lo = LatenessBase << (i - 1)
		return lo, lo
	}
	return LatenessBase << (i - 1), LatenessBase << i
}

// Observe counts one attempt that started d after it was due.
func (h *LatenessHistogram) Observe(d time.Duration) { h[LatenessBucket(d)]++ }

// Merge adds o's counts to h's.
func (h *LatenessHistogram) Merge(o *LatenessHistogram) {
	for i := range h {
		h[i] += o[i]
	}
}

// Count is how many attempts h counts.
func (h *LatenessHistogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile estimates the lateness below which a fraction q (0 to 1) of the
// attempts fall, interpolating linearly inside the bucket the rank falls in,
// as Prometheus' histogram_quantile does: a bucket says only how many fell in
// its span, and spreading them evenly over it errs least on average. A rank
// in the last bucket gives its lower bound, the one thing known of it. ok is
// false when h is empty.
func (h *LatenessHistogram) Quantile(q float64) (d time.Duration, ok bool) {
	total := h.Count()
	if total == 0 {
		return 0, false
	}
	q = min(max(q, 0), 1)
	rank := q * float64(total)
	var below int64
	for i, c := range h {
		if c == 0 {
			continue
		}
		below += c
		if float64(below) >= rank || below == total {
			lo, hi := latenessBounds(i)
			frac := (rank - float64(below-c)) / float64(c)
			return lo + time.Duration(frac*float64(hi-lo)), true
		}
	}
	return 0, false // not reached: below ends at total
}

// MinuteStats is what a tenant's attempts did in one minute: each attempt
// is counted once, by the status it left its task in (an attempt cut off by
// a node's shutdown is retried), and by how late it started.
type MinuteStats struct {
	// Start is the minute's first instant.
	Start                    time.Time
	Delivered, Retried, Dead int64
	Lateness                 LatenessHistogram
}

// Attempts is how many attempts started in the minute.
func (m *MinuteStats) Attempts() int64 { return m.Delivered + m.Retried + m.Dead }

// Add counts one attempt that left its task in status, started lateness
// after it was due. A status that ends no attempt is ignored.
func (m *MinuteStats) Add(status TaskStatus, lateness time.Duration) {
	switch status {
	case StatusDelivered:
		m.Delivered++
	case StatusRetrying:
		m.Retried++
	case StatusDead, StatusExpired:
		// An attempt whose retry would have come after the task's expiry
		// failed for good, as a last attempt does.
		m.Dead++
	default:
		return
	}
	m.Lateness.Observe(lateness)
}

// Merge adds o's counts to m's.
func (m *MinuteStats) Merge(o *MinuteStats) {
	m.Delivered += o.Delivered
	m.Retried += o.Retried
	m.Dead += o.Dead
	m.Lateness.Merge(&o.Lateness)
}

// TenantMinuteStats is one tenant's MinuteStats, as a node adds them.
type TenantMinuteStats struct {
	TenantID uuid.UUID
	MinuteStats
}
