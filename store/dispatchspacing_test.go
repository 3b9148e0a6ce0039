package store

import (
	"math"
	"testing"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/stretchr/testify/require"
)

// TestDispatchSpacing: slots are spaced so that, with each slot used
// anywhere from dispatchEarly early to DispatchGrace late, no window of the
// limit's period holds more than its rate per period plus one; and never
// further apart than that needs.
func TestDispatchSpacing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		perSecond float64
		period    time.Duration
		// exact: the spacing is the plain interval, 1/rate (a grace of
		// half an interval or less needs no more; 2.5 a second is one
		// rate where the early millisecond alone would let a fourth in).
		exact bool
	}{
		{1, time.Second, true},
		{2.5, time.Second, false},
		{20, time.Second, true},
		{25, time.Second, true},
		{26, time.Second, true},
		{50, time.Second, false},
		{100, time.Second, false},
		{1000, time.Second, false},
		{1_000_000, time.Second, false},
		{100.0 / 60, time.Minute, true},
		{6000.0 / 60, time.Minute, false},
		{1.0 / 86400, 24 * time.Hour, true},
	}
	for _, tc := range cases {
		l := model.DispatchLimit{Rate: tc.perSecond, Period: tc.period}
		spacing := dispatchSpacing(l)
		interval := 1e6 / tc.perSecond
		if tc.exact {
			require.Equal(t, interval, spacing, "%v/s over %s", tc.perSecond, tc.period)
		} else {
			require.Greater(t, spacing, interval, "%v/s over %s", tc.perSecond, tc.period)
			require.Less(t, spacing, interval*1.03, "%v/s over %s: slower than it needs", tc.perSecond, tc.period)
		}
		// The worst window opens on a slot used as late as it may be and
		// takes every later slot used as early as it may be: the slots
		// within period + grace + early of the first.
		reach := float64((tc.period + model.DispatchGrace(tc.perSecond) + dispatchEarly).Microseconds())
		inWindow := int(math.Ceil(reach / spacing))
		perPeriod := tc.perSecond * tc.period.Seconds()
		require.LessOrEqual(t, float64(inWindow), math.Floor(perPeriod)+1, "%v/s over %s: spacing %.3f µs", tc.perSecond, tc.period, spacing)
	}
}
