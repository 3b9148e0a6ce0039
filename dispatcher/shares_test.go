package dispatcher

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func shareClaim(tenant uuid.UUID, bodySize int) *model.ClaimedTask {
	return &model.ClaimedTask{Task: model.Task{ID: uuid.New(), TenantID: tenant}, BodySize: bodySize}
}

func TestSharesPerTenant(t *testing.T) {
	t.Parallel()
	s := newShares(sharesConfig{MaxTotal: 10, MaxPerTenant: 2, MaxBytes: 1 << 30, MaxBytesPerTenant: 1 << 30, MaxWaitingPerTenant: 2})
	noisy, quiet := uuid.New(), uuid.New()

	a1, a2, a3, a4 := shareClaim(noisy, 10), shareClaim(noisy, 10), shareClaim(noisy, 10), shareClaim(noisy, 10)
	for _, c := range []*model.ClaimedTask{a1, a2} {
		d, _ := s.admit(c)
		require.Equal(t, shareTaken, d)
	}
	// The noisy tenant's share is full: its next claims wait, up to
	// MaxWaitingPerTenant, and the surplus is given back.
	d, _ := s.admit(a3)
	require.Equal(t, shareWaiting, d)
	d, _ = s.admit(a4)
	require.Equal(t, shareWaiting, d)
	d, wait := s.admit(shareClaim(noisy, 10))
	require.Equal(t, shareFull, d)
	require.GreaterOrEqual(t, wait, time.Second)

	// Another tenant is not held up by it.
	b1 := shareClaim(quiet, 10)
	d, _ = s.admit(b1)
	require.Equal(t, shareTaken, d)
	require.Empty(t, s.release(b1, time.Millisecond), "the quiet tenant's release admits none of the noisy tenant's claims")

	// A noisy send ending hands its share to the noisy tenant's next claim,
	// in order.
	require.Equal(t, []*model.ClaimedTask{a3}, s.release(a1, time.Millisecond))
	require.Equal(t, []*model.ClaimedTask{a4}, s.release(a2, time.Millisecond))
}

func TestSharesRoundRobinWhenNodeFull(t *testing.T) {
	t.Parallel()
	s := newShares(sharesConfig{MaxTotal: 2, MaxPerTenant: 2, MaxBytes: 1 << 30, MaxBytesPerTenant: 1 << 30, MaxWaitingPerTenant: 10})
	first, second := uuid.New(), uuid.New()
	a1, a2 := shareClaim(first, 1), shareClaim(first, 1)
	for _, c := range []*model.ClaimedTask{a1, a2} {
		d, _ := s.admit(c)
		require.Equal(t, shareTaken, d)
	}
	// The node is full. The first tenant queues three more, then the
	// second tenant two.
	var firstWaiting, secondWaiting []*model.ClaimedTask
	for range 3 {
		c := shareClaim(first, 1)
		d, _ := s.admit(c)
		require.Equal(t, shareWaiting, d)
		firstWaiting = append(firstWaiting, c)
	}
	for range 2 {
		c := shareClaim(second, 1)
		d, _ := s.admit(c)
		require.Equal(t, shareWaiting, d)
		secondWaiting = append(secondWaiting, c)
	}
	// Each freed share goes to the tenants in turn, not to whoever queued
	// the most first.
	got := s.release(a1, time.Millisecond)
	require.Equal(t, []*model.ClaimedTask{firstWaiting[0]}, got)
	got = s.release(a2, time.Millisecond)
	require.Equal(t, []*model.ClaimedTask{secondWaiting[0]}, got)
	got = s.release(firstWaiting[0], time.Millisecond)
	require.Equal(t, []*model.ClaimedTask{firstWaiting[1]}, got)
	got = s.release(secondWaiting[0], time.Millisecond)
	require.Equal(t, []*model.ClaimedTask{secondWaiting[1]}, got)
}

func TestSharesBytes(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	s := newShares(sharesConfig{MaxTotal: 100, MaxPerTenant: 100, MaxBytes: 3 * mib, MaxBytesPerTenant: 2 * mib, MaxWaitingPerTenant: 10})
	big, other := uuid.New(), uuid.New()

	// A body larger than the tenant's whole budget still goes, alone.
	huge := shareClaim(big, 5*mib/2)
	d, _ := s.admit(huge)
	require.Equal(t, shareTaken, d)
	next := shareClaim(big, mib)
	d, _ = s.admit(next)
	require.Equal(t, shareWaiting, d, "over the tenant's byte budget")

	// The node's budget binds every tenant: the other tenant's first body
	// fits beside the huge one only while the node has room.
	small := shareClaim(other, mib/4)
	d, _ = s.admit(small)
	require.Equal(t, shareTaken, d)
	tooMuch := shareClaim(other, mib/2)
	d, _ = s.admit(tooMuch)
	require.Equal(t, shareWaiting, d, "over the node's byte budget")

	// Once the huge body is sent, both waiting claims fit.
	require.ElementsMatch(t, []*model.ClaimedTask{next, tooMuch}, s.release(huge, time.Millisecond))
	tenants, sending, bytes := s.statuses()
	require.Len(t, tenants, 2)
	require.Equal(t, 3, sending)
	require.Equal(t, int64(mib+mib/4+mib/2), bytes)
}

func TestSharesTakeAll(t *testing.T) {
	t.Parallel()
	s := newShares(sharesConfig{MaxTotal: 1, MaxPerTenant: 1, MaxBytes: 1 << 30, MaxBytesPerTenant: 1 << 30, MaxWaitingPerTenant: 10})
	tenant := uuid.New()
	sending := shareClaim(tenant, 1)
	d, _ := s.admit(sending)
	require.Equal(t, shareTaken, d)
	waiting := []*model.ClaimedTask{shareClaim(tenant, 1), shareClaim(uuid.New(), 1)}
	for _, c := range waiting {
		d, _ := s.admit(c)
		require.Equal(t, shareWaiting, d)
	}
	require.ElementsMatch(t, waiting, s.takeAll())
	require.Empty(t, s.release(sending, 0), "nothing waits once taken")
	tenants, n, bytes := s.statuses()
	require.Empty(t, tenants)
	require.Zero(t, n)
	require.Zero(t, bytes)
}

// TestSharesParked: a claim parked with its target gives its share to the
// tenant's next claim, but counts with the tenant's waiting claims, so a
// tenant whose targets never answer cannot park more than
// MaxWaitingPerTenant claims behind them.
func TestSharesParked(t *testing.T) {
	t.Parallel()
	s := newShares(sharesConfig{MaxTotal: 10, MaxPerTenant: 1, MaxBytes: 1 << 30, MaxBytesPerTenant: 1 << 30, MaxWaitingPerTenant: 2})
	noisy := uuid.New()
	a1, a2, a3 := shareClaim(noisy, 10), shareClaim(noisy, 10), shareClaim(noisy, 10)
	d, _ := s.admit(a1)
	require.Equal(t, shareTaken, d)
	d, _ = s.admit(a2)
	require.Equal(t, shareWaiting, d)

	require.True(t, s.mayPark(a1))
	require.Equal(t, []*model.ClaimedTask{a2}, s.park(a1), "the parked claim's share goes to the next")
	require.True(t, s.mayPark(a2))
	require.Empty(t, s.park(a2))
	require.False(t, s.mayPark(a3), "two parked: as many as may wait")
	d, _ = s.admit(a3)
	require.Equal(t, shareTaken, d, "parked claims hold no share")
	d, _ = s.admit(shareClaim(noisy, 10))
	require.Equal(t, shareFull, d, "nor may more wait")

	// Taken over by their target, they count no more.
	s.unpark(a1)
	require.True(t, s.mayPark(a3))
	s.unpark(a2)
	s.release(a3, 0)
	tenants, sending, _ := s.statuses()
	require.Empty(t, tenants, "a tenant with nothing sending, waiting or parked is forgotten")
	require.Zero(t, sending)
}
