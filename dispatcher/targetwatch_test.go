package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// TestSenderStuckSendsTripBreaker: sends that wait StuckAfter for an answer
// count as failures of their target then, not when their timeout ends, and
// trip its breaker; the answers that come later are not counted again.
func TestSenderStuckSendsTripBreaker(t *testing.T) {
	t.Parallel()
	for _, trip := range []uint32{2, 3} {
		t.Run(fmt.Sprintf("trip after %d", trip), func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{senders: 4, maxPerTarget: 4, hold: true,
				breaker: BreakerConfig{ConsecutiveFailures: trip, StuckAfter: 5 * time.Second, Cooldown: time.Minute}})
			b.claimed <- b.claim()
			b.claimed <- b.claim()
			receive(t, b.requests)
			receive(t, b.requests)

			b.clock.Advance(4 * time.Second)
			b.targets.watch()
			status := b.targets.statuses()[0]
			require.Equal(t, "closed", status.State, "not stuck yet")
			require.Zero(t, status.Counts.TotalFailures)
			b.clock.Advance(time.Second)
			b.targets.watch()
			status = b.targets.statuses()[0]
			require.Equal(t, 2, status.InFlight)
			if trip == 2 {
				require.Equal(t, "open", status.State)
				c := b.claim()
				b.claimed <- c
				require.Equal(t, c.ID, receive(t, b.deferred).id, "deferred to the next probe")
			} else {
				require.Equal(t, "closed", status.State)
				require.Equal(t, uint32(2), status.Counts.ConsecutiveFailures)
			}

			close(b.hold)
			require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
			require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)
			require.Eventually(t, func() bool { return b.targets.statuses()[0].InFlight == 0 }, 10*time.Second, time.Millisecond)
			status = b.targets.statuses()[0]
			if trip == 2 {
				require.Equal(t, "open", status.State)
			} else {
				require.Equal(t, uint32(2), status.Counts.TotalFailures, "the late answers are not counted again")
				require.Zero(t, status.Counts.TotalSuccesses)
			}
		})
	}
}

// TestTargetsForgetIdle: a target unused for IdleAfter is forgotten, unless
// it has sends in flight or its breaker is open; an open one is forgotten
// after ForgetOpenAfter.
func TestTargetsForgetIdle(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	ts := newTargets(targetsConfig{
		Breaker:     BreakerConfig{ConsecutiveFailures: 1, IdleAfter: time.Minute, ForgetOpenAfter: time.Hour, Cooldown: 2 * time.Hour},
		MaxInflight: 1, MaxWaiting: 1, Clock: clk,
	})
	tenant := uuid.New()
	idle, open, busy := ts.get("http://idle:80", tenant), ts.get("http://open:80", tenant), ts.get("http://busy:80", tenant)
	require.NotNil(t, idle)
	report, err := open.breaker.Allow()
	require.NoError(t, err)
	report(errTargetFailed)
	decision, _ := ts.admit(busy, &model.ClaimedTask{}, true)
	require.Equal(t, sendNow, decision)

	remaining := func() []string {
		var left []string
		for _, s := range ts.statuses() {
			left = append(left, s.Target)
		}
		return left
	}
	clk.Advance(time.Minute)
	ts.watch()
	require.Equal(t, []string{"http://busy:80", "http://open:80"}, remaining())

	clk.Advance(time.Hour - time.Minute - time.Second)
	ts.watch()
	require.Equal(t, []string{"http://busy:80", "http://open:80"}, remaining(), "an open breaker outlives IdleAfter")
	clk.Advance(time.Second)
	ts.watch()
	require.Equal(t, []string{"http://busy:80"}, remaining(), "but not ForgetOpenAfter")
}
