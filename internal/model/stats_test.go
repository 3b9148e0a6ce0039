package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLatenessBucket(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0},
		{0, 0},
		{249 * time.Microsecond, 0},
		{250 * time.Microsecond, 1},
		{499 * time.Microsecond, 1},
		{500 * time.Microsecond, 2},
		{time.Millisecond, 3},
		{3 * time.Millisecond, 4},
		{4 * time.Millisecond, 5},
		{time.Second, 12}, // [512 ms, 1.024 s)
		{time.Minute, 18}, // [32.768 s, 65.536 s)
		{time.Hour, 24},   // [34.95 min, 69.9 min)
		{70 * time.Minute, LatenessBuckets - 1},
		{30 * 24 * time.Hour, LatenessBuckets - 1},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, LatenessBucket(tt.d), "%s", tt.d)
		if tt.d >= 0 && tt.want < LatenessBuckets-1 {
			lo, hi := latenessBounds(tt.want)
			require.True(t, lo <= tt.d && tt.d < hi, "%s in [%s, %s)", tt.d, lo, hi)
		}
	}
}

func TestLatenessQuantile(t *testing.T) {
	t.Parallel()
	var empty LatenessHistogram
	_, ok := empty.Quantile(0.5)
	require.False(t, ok, "no attempts, no quantile")

	// One attempt 3 ms late, in [2 ms, 4 ms): the median is half way
	// through the bucket, the 99th percentile nearly at its top.
	var one LatenessHistogram
	one.Observe(3 * time.Millisecond)
	p50, ok := one.Quantile(0.5)
	require.True(t, ok)
	require.Equal(t, 3*time.Millisecond, p50)
	p99, _ := one.Quantile(0.99)
	require.Equal(t, 2*time.Millisecond+1980*time.Microsecond, p99)

	// 100 attempts: 90 under 0.25 ms, 9 in [1 ms, 2 ms), 1 in [1.024 s,
	// 2.048 s). Rank 50 is 50/90 of the way through the first bucket; rank
	// 99 is the last of the nine, at the top of theirs; rank 99.5 half way
	// through the slow one's bucket.
	var h LatenessHistogram
	for range 90 {
		h.Observe(100 * time.Microsecond)
	}
	for range 9 {
		h.Observe(1500 * time.Microsecond)
	}
	h.Observe(1500 * time.Millisecond)
	require.EqualValues(t, 100, h.Count())
	p50, _ = h.Quantile(0.5)
	require.Equal(t, 138888*time.Nanosecond, p50) // 250 µs × 50/90
	p99, _ = h.Quantile(0.99)
	require.Equal(t, 2*time.Millisecond, p99)
	p995, _ := h.Quantile(0.995)
	require.Equal(t, 1536*time.Millisecond, p995)
	top, _ := h.Quantile(1)
	require.Equal(t, 2048*time.Millisecond, top)

	// Beyond the last bound, only the bound is known.
	var slow LatenessHistogram
	slow.Observe(5 * time.Hour)
	p50, _ = slow.Quantile(0.5)
	lo, _ := latenessBounds(LatenessBuckets - 1)
	require.Equal(t, lo, p50)
	require.Greater(t, lo, time.Hour)
}

func TestMinuteStatsAddAndMerge(t *testing.T) {
	t.Parallel()
	var a, b MinuteStats
	a.Add(StatusDelivered, time.Millisecond)
	a.Add(StatusRetrying, 2*time.Millisecond)
	a.Add(StatusScheduled, time.Millisecond) // ends no attempt
	b.Add(StatusDead, time.Second)
	b.Add(StatusDelivered, time.Millisecond)
	a.Merge(&b)
	require.EqualValues(t, 2, a.Delivered)
	require.EqualValues(t, 1, a.Retried)
	require.EqualValues(t, 1, a.Dead)
	require.EqualValues(t, 4, a.Attempts())
	require.Equal(t, a.Attempts(), a.Lateness.Count())
	require.EqualValues(t, 2, a.Lateness[LatenessBucket(time.Millisecond)])
}
