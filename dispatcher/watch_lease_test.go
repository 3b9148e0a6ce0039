package dispatcher

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
)

// TestTargetsWatchOpenBreakerPastCooldown: reading the state of an open
// breaker whose cooldown has passed turns it half-open, and its state
// change takes the targets' lock: watch must not read it under that lock.
func TestTargetsWatchOpenBreakerPastCooldown(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	ts := newTargets(targetsConfig{
		Breaker:     BreakerConfig{ConsecutiveFailures: 1, IdleAfter: time.Minute, Cooldown: 10 * time.Millisecond},
		MaxInflight: 1, MaxWaiting: 1, Clock: clk,
	})
	open := ts.get("http://open:80", uuid.New())
	report, err := open.breaker.Allow()
	require.NoError(t, err)
	report(errTargetFailed) // open
	// gobreaker's cooldown runs on the real clock: let it pass.
	time.Sleep(30 * time.Millisecond)
	clk.Advance(time.Minute)
	done := make(chan struct{})
	go func() { ts.watch(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("watch deadlocked")
	}
}

// TestSenderShareWaitPastLease: a claim that waited for its tenant's share
// longer than its lease can be trusted is given back, not sent: its owner
// may have recovered and claimed it again.
func TestSenderShareWaitPastLease(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{senders: 4, perTenant: 1, maxPerTarget: 4, hold: true})
	tenant := uuid.New()
	c1, c2 := b.claim(), b.claim()
	c1.TenantID, c2.TenantID = tenant, tenant
	b.claimed <- c1
	b.claimed <- c2
	receive(t, b.requests)
	require.Eventually(t, func() bool {
		_, _, w := b.shares.totals()
		return w == 1
	}, 5*time.Second, time.Millisecond)
	// c2's lease (timeout 5s + margin 30s) has long run out.
	b.clock.Advance(2 * time.Minute)
	close(b.hold)
	receive(t, b.records)
	select {
	case d := <-b.deferred:
		require.Equal(t, c2.ID, d.id)
	case r := <-b.requests:
		t.Fatalf("claim %s sent %s after it was claimed, past its lease; headers %v", c2.ID, 2*time.Minute, r.header.Get("Hookwheel-Attempt"))
	case <-time.After(5 * time.Second):
		t.Fatal("the claim was neither sent nor given back")
	}
}
