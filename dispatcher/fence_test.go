package dispatcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// fenceStep is one step of TestFence: advance moves the clock; heartbeat,
// when set, is a heartbeat that began that long before the clock's new
// reading and succeeded then; sendable says whether the claim taken at the
// start may be sent afterwards.
type fenceStep struct {
	advance   time.Duration
	heartbeat *time.Duration
	sendable  bool
}

// TestFence: a claim may be sent only while the node's lease it was taken
// under holds, by the node's own clock, a margin before its end, and while
// the claim's own lease does; a heartbeat that renews the node's lease
// after it ran out (a node frozen past its TTL) does not make the claims
// taken before sendable again.
func TestFence(t *testing.T) {
	t.Parallel()
	const (
		ttl     = 3 * time.Second
		margin  = ttl / 10
		timeout = 2 * time.Second
		lease   = 30 * time.Second
	)
	took := func(d time.Duration) *time.Duration { return &d }
	cases := []struct {
		name  string
		steps []fenceStep
	}{
		// The claim is taken 20 ms after the heartbeat began.
		{"within the lease", []fenceStep{{advance: ttl - margin - 21*time.Millisecond, sendable: true}}},
		{"at the margin before the lease ends", []fenceStep{{advance: ttl - margin - 20*time.Millisecond, sendable: false}}},
		{"heartbeats keep it", []fenceStep{
			{advance: time.Second, heartbeat: took(10 * time.Millisecond), sendable: true},
			{advance: time.Second, heartbeat: took(10 * time.Millisecond), sendable: true},
			{advance: time.Second, heartbeat: took(10 * time.Millisecond), sendable: true},
			{advance: time.Second, sendable: true},
		}},
		{"frozen past the lease, then renewed", []fenceStep{
			{advance: 4 * time.Second, sendable: false},
			{advance: 10 * time.Millisecond, heartbeat: took(5 * time.Millisecond), sendable: false},
			{advance: time.Second, heartbeat: took(5 * time.Millisecond), sendable: false},
		}},
		{"a heartbeat that ends after the lease it renews", []fenceStep{
			// Began within the lease, but its transaction may have started
			// after the lease ran out: another node may have seen us dead.
			{advance: ttl + 100*time.Millisecond, heartbeat: took(ttl / 2), sendable: false},
		}},
		{"the claim's own lease runs out", claimLeaseSteps(timeout+lease-margin, took(time.Millisecond))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(time.Now())
			o := newOwnership(ownershipConfig{NodeTTL: ttl, FenceMargin: fenceMarginOf(ttl), Clock: fake, Logger: quietLogger()})
			d := &Dispatcher{cfg: Config{NodeTTL: ttl, LeaseMargin: lease}, ownership: o}
			claim := &model.ClaimedTask{Task: model.Task{Timeout: timeout}}
			require.False(t, d.mayStillSend(claim, fake.Now()), "no lease before the first heartbeat")

			began := fake.Now()
			fake.Advance(20 * time.Millisecond)
			o.renewed(began, fake.Now())
			claim.ClaimedAt, claim.LeaseEpoch = fake.Now(), o.leaseEpoch()
			require.True(t, d.mayStillSend(claim, fake.Now()))
			for i, s := range tc.steps {
				fake.Advance(s.advance)
				if s.heartbeat != nil {
					o.renewed(fake.Now().Add(-*s.heartbeat), fake.Now())
				}
				require.Equal(t, s.sendable, d.mayStillSend(claim, fake.Now()), "step %d", i+1)
			}
			// Whatever became of the old claim, one taken now under a
			// fresh lease may be sent.
			began = fake.Now()
			fake.Advance(time.Millisecond)
			o.renewed(began, fake.Now())
			fresh := &model.ClaimedTask{Task: model.Task{Timeout: timeout}, ClaimedAt: fake.Now(), LeaseEpoch: o.leaseEpoch()}
			require.True(t, d.mayStillSend(fresh, fake.Now()))
		})
	}
}

// claimLeaseSteps heartbeats every second: the claim stays sendable until
// ends after it was taken.
func claimLeaseSteps(ends time.Duration, heartbeat *time.Duration) []fenceStep {
	var steps []fenceStep
	for k := time.Second; k <= ends+time.Second; k += time.Second {
		steps = append(steps, fenceStep{advance: time.Second, heartbeat: heartbeat, sendable: k < ends})
	}
	return steps
}
