package dispatcher

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// flowClaim is a claim of the bundle's tenant to host, due now, of flow key
// key under limit.
func (b *limitsBundle) flowClaim(host, key string, limit model.FlowLimit) *model.ClaimedTask {
	c := b.claim(host)
	c.FlowKey = &key
	limit.TenantID, limit.Key = b.tenant, key
	c.Flow = limit
	return c
}

// TestFlowRate: sends of one flow key get slots one interval apart, decided
// as each is about to be sent: the first goes now, one within holdWithin is
// held for its slot and uses it when it comes back, one further off is
// given back due at its slot. Another key, and the key's tasks to other
// hosts, share nothing but what they should.
func TestFlowRate(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{}, nil)
	now := b.clock.Now()
	perSecond := model.FlowLimit{Rate: 1, Period: time.Second}
	first, second, third := b.flowClaim("a.example", "k", perSecond), b.flowClaim("b.example", "k", perSecond),
		b.flowClaim("a.example", "k", perSecond)

	release, ok := b.limits.admit(first)
	require.True(t, ok)
	release()
	_, ok = b.limits.admit(second)
	require.False(t, ok, "same key, another host: the key's rate holds")
	held := receive(t, b.held)
	require.Equal(t, second.ID, held.id)
	require.True(t, now.Add(time.Second).Equal(held.at), "held for its slot: %s", held.at.Sub(now))
	_, ok = b.limits.admit(third)
	require.False(t, ok)
	back := receive(t, b.deferred)
	require.Equal(t, third.ID, back.id)
	require.True(t, now.Add(2*time.Second).Equal(back.at), "given back due at its slot: %s", back.at.Sub(now))
	require.Equal(t, 2.0, counterValue(t, b.metrics.deferrals.WithLabelValues("flow_rate")))

	// Another key of the tenant is limited apart.
	release, ok = b.limits.admit(b.flowClaim("a.example", "other", perSecond))
	require.True(t, ok)
	release()

	// The held claim comes back at its slot and uses it without queueing
	// again; so does the one given back, at its own.
	b.clock.Set(held.at)
	release, ok = b.limits.admit(second)
	require.True(t, ok, "its reserved slot")
	release()
	b.clock.Set(back.at)
	release, ok = b.limits.admit(third)
	require.True(t, ok, "its reserved slot")
	release()
	require.Empty(t, b.deferred)
	require.Empty(t, b.held)
}

// TestFlowParallelism: with every slot of a key taken, its claims wait here
// in due order, and the first is handed back to the senders when a send of
// the key finishes, whichever host it went to.
func TestFlowParallelism(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{}, nil)
	b.runWaker(t)
	one := model.FlowLimit{Parallelism: 1}
	first, second, third := b.flowClaim("a.example", "k", one), b.flowClaim("b.example", "k", one), b.flowClaim("c.example", "k", one)

	releaseFirst, ok := b.limits.admit(first)
	require.True(t, ok)
	for _, c := range []*model.ClaimedTask{second, third} {
		_, ok = b.limits.admit(c)
		require.False(t, ok)
	}
	require.Equal(t, 2.0, b.limits.waitingCount())

	// Another key is not held up by this one's.
	release, ok := b.limits.admit(b.flowClaim("a.example", "other", one))
	require.True(t, ok)
	release()

	releaseFirst()
	require.Equal(t, second.ID, receive(t, b.sent).ID, "first in line first")
	releaseSecond, ok := b.limits.admit(second)
	require.True(t, ok)
	require.Equal(t, third.ID, receive(t, b.sent).ID)
	_, ok = b.limits.admit(third)
	require.False(t, ok, "the one slot is the second's")
	releaseSecond()
	require.Equal(t, third.ID, receive(t, b.sent).ID)
	releaseThird, ok := b.limits.admit(third)
	require.True(t, ok)
	releaseThird()
	require.Empty(t, b.deferred)
}

// TestFlowAndTargetLimits: a send must pass its key's limits and its
// target's; one its target holds back gives its key's slot back at once, so
// that the key's other tasks, to other hosts, are not held up by it.
func TestFlowAndTargetLimits(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{DispatchConcurrency: 1}, nil)
	b.runWaker(t)
	one := model.FlowLimit{Parallelism: 1}

	releaseBusy, ok := b.limits.admit(b.claim("a.example"))
	require.True(t, ok, "a task without a key takes a.example's one slot")
	blocked := b.flowClaim("a.example", "k", one)
	_, ok = b.limits.admit(blocked)
	require.False(t, ok, "the key lets it through, its target does not")

	elsewhere := b.flowClaim("b.example", "k", one)
	releaseElsewhere, ok := b.limits.admit(elsewhere)
	require.True(t, ok, "the key's slot was given back when the target held the first back")

	// Once the target frees up, the blocked one meets its key's limit, now
	// taken by the other, and waits for it instead.
	releaseBusy()
	require.Equal(t, blocked.ID, receive(t, b.sent).ID)
	_, ok = b.limits.admit(blocked)
	require.False(t, ok)
	releaseElsewhere()
	require.Equal(t, blocked.ID, receive(t, b.sent).ID)
	release, ok := b.limits.admit(blocked)
	require.True(t, ok)
	release()
	require.Empty(t, b.deferred, "waiting in memory, not given back")
}

// TestFlowRateAtClaim: a key's rate is decided when its tasks are claimed,
// as a host's is: slots one interval apart in due order, the near ones held,
// the far ones given back due at their slots before they ask their host
// for anything; the kept ones then use their slots without asking again.
func TestFlowRateAtClaim(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{DispatchRate: 1000}, nil)
	now := b.clock.Now()
	perSecond := model.FlowLimit{Rate: 1, Period: time.Second}
	claims := []*model.ClaimedTask{b.flowClaim("a.example", "k", perSecond), b.flowClaim("b.example", "k", perSecond),
		b.flowClaim("a.example", "k", perSecond), b.claim("c.example")}

	kept := b.limits.rateLimitClaims(claims)
	require.Len(t, kept, 3)
	offsets := map[time.Duration]int{}
	for _, c := range kept {
		offsets[c.NextAttemptAt.Sub(now)]++
	}
	require.Equal(t, map[time.Duration]int{0: 2, time.Second: 1}, offsets, "the plain task and the key's first now, its second held")
	back := receive(t, b.deferred)
	require.True(t, now.Add(2*time.Second).Equal(back.at), "the third given back due at its slot: %s", back.at.Sub(now))
	require.Equal(t, 2.0, counterValue(t, b.metrics.deferrals.WithLabelValues("flow_rate")))
	require.Zero(t, counterValue(t, b.metrics.deferrals.WithLabelValues("rate_limit")), "the host's rate has room")

	for _, c := range kept {
		b.clock.Set(*c.NextAttemptAt)
		release, ok := b.limits.admit(c)
		require.True(t, ok, "its slot holds")
		release()
	}
	require.Empty(t, b.deferred)
	require.Empty(t, b.held)
}

// TestFlowWaitsBehindTargetFirst: a keyed claim that finds others waiting for
// its target's slots queues behind them before it takes anything of its
// key's, so the key's other tasks, to other hosts, keep its slots.
func TestFlowWaitsBehindTargetFirst(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{DispatchConcurrency: 1}, nil)
	b.runWaker(t)
	one := model.FlowLimit{Parallelism: 1}

	releaseBusy, ok := b.limits.admit(b.claim("a.example"))
	require.True(t, ok)
	_, ok = b.limits.admit(b.claim("a.example"))
	require.False(t, ok, "a plain claim waits for a.example")
	_, ok = b.limits.admit(b.flowClaim("a.example", "k", one))
	require.False(t, ok, "the keyed one queues behind it")
	release, ok := b.limits.admit(b.flowClaim("b.example", "k", one))
	require.True(t, ok, "the key's one slot was never taken by the claim queued at a.example")
	release()
	releaseBusy()
}

// TestFlowDeferAhead: a claim whose key's slot is further off than
// flowDeferAhead goes back to the queue for that long, not until its slot;
// coming back early it is told what is left and keeps its slot.
func TestFlowDeferAhead(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, model.Limits{}, nil)
	now := b.clock.Now()
	hourly := model.FlowLimit{Rate: 1, Period: time.Hour}
	first, second := b.flowClaim("a.example", "k", hourly), b.flowClaim("a.example", "k", hourly)

	kept := b.limits.rateLimitClaims([]*model.ClaimedTask{first, second})
	require.Len(t, kept, 1)
	if kept[0] == second { // due together, they are asked in id order
		first, second = second, first
	}
	back := receive(t, b.deferred)
	require.Equal(t, second.ID, back.id)
	require.Equal(t, flowDeferAhead, back.at.Sub(now), "back within a minute, not in an hour")

	// It comes back (claimed anew, the same attempt) a minute on: still
	// 59 minutes early, it goes back again, its slot kept, not booked anew.
	b.clock.Set(back.at)
	again := *second
	again.ClaimToken = uuid.New()
	due := back.at
	again.NextAttemptAt = &due
	require.Empty(t, b.limits.rateLimitClaims([]*model.ClaimedTask{&again}))
	back = receive(t, b.deferred)
	require.Equal(t, flowDeferAhead, back.at.Sub(b.clock.Now()))
	third := b.flowClaim("a.example", "k", hourly)
	require.Empty(t, b.limits.rateLimitClaims([]*model.ClaimedTask{third}))
	require.Equal(t, flowDeferAhead, receive(t, b.deferred).at.Sub(b.clock.Now()))

	// At its slot it goes.
	b.clock.Set(now.Add(time.Hour))
	at := b.clock.Now()
	again.NextAttemptAt = &at
	require.Len(t, b.limits.rateLimitClaims([]*model.ClaimedTask{&again}), 1)
}
