package dispatcher

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

func TestDrainMeter(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var m drainMeter
	m.start = start
	for range 3 {
		m.finished(start.Add(100 * time.Millisecond))
	}
	require.Equal(t, 3, m.recent(start.Add(400*time.Millisecond)))
	m.finished(start.Add(600 * time.Millisecond))
	require.Equal(t, 4, m.recent(start.Add(900*time.Millisecond)), "the last bucket still counts")
	require.Equal(t, 1, m.recent(start.Add(1100*time.Millisecond)), "a bucket a second old does not")
	require.Zero(t, m.recent(start.Add(3*time.Second)), "nothing finished lately")
}

func TestDrainRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		floor, ceiling, recent int
		want                   int
	}{
		{"hanging: the floor", 32, 2048, 0, 32},
		{"slow: the floor", 32, 2048, 3, 32},
		{"ten drains' worth", 32, 2048, 100, 1000},
		{"fast: the budget", 32, 2048, 500, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, drainRoom(tc.floor, tc.ceiling, tc.recent))
		})
	}
}

// TestLineWait: a claim given back waits its turn at the line's pace, never
// less than a second nor more than 30.
func TestLineWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		ahead, slots int
		per          time.Duration
		want         time.Duration
	}{
		{"a fast line: at least a second", 10, 32, 5 * time.Millisecond, time.Second},
		{"the line's pace", 640, 32, 100 * time.Millisecond, 2 * time.Second},
		{"no slots counts as one", 3, 0, time.Second, 3 * time.Second},
		{"no pace yet counts as a millisecond", 4000, 1, 0, 4 * time.Second},
		{"a hung line: at most 30 s", 64, 32, time.Minute, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, lineWait(tc.ahead, tc.slots, tc.per))
		})
	}
}

// TestSharesRoomFollowsDrain: a tenant's first burst waits in memory up to
// half the claim budget; once it has sent for a second, it may keep waiting
// what its sends finish in that time, ten times over, and a tenant whose
// sends finish nothing falls back to MaxWaitingPerTenant.
func TestSharesRoomFollowsDrain(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	s := newShares(sharesConfig{
		MaxTotal: 100, MaxPerTenant: 1, MaxBytes: 1 << 30, MaxBytesPerTenant: 1 << 30,
		MaxWaitingPerTenant: 2, MaxWaitingDrained: 40, Clock: clk,
	})
	bursting, hanging, healthy := uuid.New(), uuid.New(), uuid.New()

	admitAll := func(tenant uuid.UUID, n int) (claims []*model.ClaimedTask, decisions []shareDecision) {
		for range n {
			c := shareClaim(tenant, 1)
			d, _ := s.admit(c)
			claims, decisions = append(claims, c), append(decisions, d)
		}
		return claims, decisions
	}

	// A first burst: one sending, half the budget waiting, the rest back.
	_, decisions := admitAll(bursting, 22)
	require.Equal(t, shareTaken, decisions[0])
	require.Equal(t, slices.Repeat([]shareDecision{shareWaiting}, 20), decisions[1:21])
	require.Equal(t, shareFull, decisions[21])

	// A second on with nothing finished, the pace is known, and nil: the
	// room is the floor.
	_, decisions = admitAll(hanging, 3)
	require.Equal(t, []shareDecision{shareTaken, shareWaiting, shareWaiting}, decisions)
	healthyClaims, _ := admitAll(healthy, 1)
	clk.Advance(1100 * time.Millisecond)
	_, decisions = admitAll(hanging, 1)
	require.Equal(t, []shareDecision{shareFull}, decisions, "2 waiting, room 2")

	// What the bursting tenant queued beyond its room now goes back, the
	// newest first, each in its turn.
	burst := slices.Clone(s.byTenant[bursting].waiting)
	trimmed, waits := s.trim()
	require.Equal(t, burst[2:], trimmed, "the floor of 2 stays waiting")
	require.Len(t, waits, len(trimmed))
	require.GreaterOrEqual(t, waits[0], time.Second)
	require.True(t, slices.IsSorted(waits))
	require.Len(t, s.byTenant[bursting].waiting, 2)
	again, _ := s.trim()
	require.Empty(t, again)

	// The healthy tenant's sends finish three in the last second: room 30.
	sending := healthyClaims[0]
	for range 3 {
		clk.Advance(100 * time.Millisecond)
		next, _ := admitAll(healthy, 1)
		admitted := s.release(sending, 10*time.Millisecond)
		require.Equal(t, next, admitted)
		sending = next[0]
	}
	_, decisions = admitAll(healthy, 31)
	require.Equal(t, slices.Repeat([]shareDecision{shareWaiting}, 30), decisions[:30])
	require.Equal(t, shareFull, decisions[30])
}

// TestTargetRoomShedsWhenHung: a target's claims park up to MaxWaiting
// while its pace is unknown; when its sends stop finishing, a watch a
// second later gives back the newest beyond MaxInflight, to the Shed
// callback with a wait, and new claims find no room. A target that keeps
// answering keeps the room its pace earns.
func TestTargetRoomShedsWhenHung(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	var shed []*model.ClaimedTask
	var shedWaits []time.Duration
	ts := newTargets(targetsConfig{
		Breaker:     BreakerConfig{ConsecutiveFailures: 1000, IdleAfter: time.Hour, ForgetOpenAfter: time.Hour},
		MaxInflight: 2, MaxWaiting: 50, Clock: clk,
		Shed: func(claims []*model.ClaimedTask, waits []time.Duration) {
			shed = append(shed, claims...)
			shedWaits = append(shedWaits, waits...)
		},
	})
	tenant := uuid.New()
	hung, answering := ts.get("http://hung:80", tenant), ts.get("http://answering:80", tenant)
	admit := func(tg *target, n int) (claims []*model.ClaimedTask, decisions []admission) {
		for range n {
			c := &model.ClaimedTask{Task: model.Task{ID: uuid.New(), TenantID: tenant}}
			d, _ := ts.admit(tg, c, true)
			claims, decisions = append(claims, c), append(decisions, d)
		}
		return claims, decisions
	}
	all := func(d admission, n int) []admission {
		var want []admission
		for range n {
			want = append(want, d)
		}
		return want
	}

	_, decisions := admit(hung, 2)
	require.Equal(t, all(sendNow, 2), decisions)
	for range 2 {
		ts.sending(hung, func(error) {}) // never answered
	}
	hungParked, decisions := admit(hung, 50)
	require.Equal(t, all(parked, 50), decisions, "its pace unknown, a burst parks up to MaxWaiting")

	// The answering target always has a send in flight and finishes one
	// every 50 ms, for a second.
	_, decisions = admit(answering, 2)
	require.Equal(t, all(sendNow, 2), decisions)
	for range 22 {
		clk.Advance(50 * time.Millisecond)
		require.Nil(t, ts.done(answering, 50*time.Millisecond))
		_, decisions = admit(answering, 1)
		require.Equal(t, all(sendNow, 1), decisions)
	}
	_, decisions = admit(answering, 20)
	require.Equal(t, all(parked, 20), decisions, "at least 10 finished in the last half second: room for MaxWaiting")

	ts.watch()
	require.Equal(t, hungParked[2:], shed, "the newest beyond MaxInflight go back")
	// Each comes back in its turn, at the pace of the oldest unanswered
	// send (a second old), never within milliseconds.
	require.Len(t, shedWaits, len(shed))
	require.GreaterOrEqual(t, shedWaits[0], time.Second)
	require.True(t, slices.IsSorted(shedWaits), "spread in line order: %v", shedWaits)
	require.Greater(t, shedWaits[len(shedWaits)-1], shedWaits[0])
	decision, wait := ts.admit(hung, &model.ClaimedTask{}, true)
	require.Equal(t, full, decision)
	require.GreaterOrEqual(t, wait, time.Second)
	parkedAt := map[string]int{}
	for _, st := range ts.statuses() {
		parkedAt[st.Target] = st.Parked
	}
	require.Equal(t, map[string]int{"http://hung:80": 2, "http://answering:80": 20}, parkedAt)
}
