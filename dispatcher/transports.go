package dispatcher

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
)

// transports hands out the client each claim is sent through. Most claims
// go through the node's one client. A tenant granted private ranges
// (target_allow_cidrs) sends through a client of its own per set of grants,
// with a connection pool of its own: pools are keyed by host and port and
// the guard runs only when a connection is dialled, so a connection opened
// to a granted address for one tenant would otherwise carry another
// tenant's request to the same host name. Grants are set by the operator,
// so there are few sets; a client is kept for the life of the node.
type transports struct {
	base    *retryablehttp.Client
	guard   *netguard.Guard
	retries prometheus.Counter
	// maxTimeout is the grants' clients' ResponseHeaderTimeout
	// (newHTTPClient).
	maxTimeout time.Duration

	mu       sync.Mutex
	byGrants map[string]*retryablehttp.Client
}

// newTransports sends through base, and the claims of tenants granted
// private ranges through clients made as newHTTPClient makes them (the same
// bounds on answers), with maxTimeout the longest timeout of an attempt.
func newTransports(base *http.Client, guard *netguard.Guard, retries prometheus.Counter, maxTimeout time.Duration) *transports {
	return &transports{
		base:       newTransport(base, retries),
		guard:      guard,
		retries:    retries,
		maxTimeout: maxTimeout,
		byGrants:   map[string]*retryablehttp.Client{},
	}
}

// forClaim is the client c is sent through.
func (ts *transports) forClaim(c *model.ClaimedTask) *retryablehttp.Client {
	if len(c.TargetAllowCIDRs) == 0 {
		return ts.base
	}
	key := grantsKey(c.TargetAllowCIDRs)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	client, ok := ts.byGrants[key]
	if !ok {
		client = newTransport(newHTTPClient(ts.guard.Allowing(c.TargetAllowCIDRs), ts.maxTimeout), ts.retries)
		ts.byGrants[key] = client
	}
	return client
}

// grantsKey names a set of ranges whatever their order.
func grantsKey(cidrs []netip.Prefix) string {
	names := make([]string, len(cidrs))
	for i, p := range cidrs {
		names[i] = p.Masked().String()
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}
