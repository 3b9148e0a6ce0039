package dispatcher

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
)

// TestSenderTenantGrants: a private range granted to one tenant lets its
// webhooks through and no one else's, even to the same host right after,
// when a connection to it sits in a pool.
func TestSenderTenantGrants(t *testing.T) {
	t.Parallel()
	b := setupSender(t, senderOptions{guard: netguard.New(netguard.Config{})})

	granted := b.claim()
	granted.TargetAllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	b.claimed <- granted
	receive(t, b.requests)
	require.Equal(t, model.StatusDelivered, receive(t, b.records).Status)

	other := b.claim()
	b.claimed <- other
	r := receive(t, b.records)
	require.Equal(t, model.StatusDead, r.Status, "a blocked address is final")
	require.NotNil(t, r.Error)
	require.Contains(t, *r.Error, "blocked")
	select {
	case req := <-b.requests:
		t.Fatalf("the receiver got a request of the tenant without the grant: %v", req.header)
	default:
	}

	// The same grants, spelled otherwise, share a client.
	require.Same(t, b.transports.forClaim(granted), b.transports.forClaim(&model.ClaimedTask{
		TargetAllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.1.2.3/8"), netip.MustParsePrefix("127.0.0.0/8")}}))
	require.NotSame(t, b.transports.forClaim(granted), b.transports.forClaim(other))
}
