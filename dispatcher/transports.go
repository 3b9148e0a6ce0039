package dispatcher

import (
	"context"
	"errors"
	"net"
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

// newTransport wraps the HTTP client in go-retryablehttp for the one kind of
// retry that is always safe: a connection that could not be made (refused,
// unreachable, DNS failure) carried no request, so it is tried again within
// the same attempt. Anything that may have reached the receiver is left to
// the attempt's retry policy, which records it.
func newTransport(client *http.Client, transportRetries prometheus.Counter) *retryablehttp.Client {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = client
	rc.Logger = nil
	rc.RetryMax = 2
	rc.RetryWaitMin = 20 * time.Millisecond
	rc.RetryWaitMax = 200 * time.Millisecond
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return resp == nil && unsent(err), nil
	}
	rc.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, retryNumber int) {
		if retryNumber > 0 {
			transportRetries.Inc()
		}
	}
	return rc
}

// unsent reports whether err means the request never left: the dial itself
// failed. A refused address is final, not a transient failure.
func unsent(err error) bool {
	var op *net.OpError
	return err != nil && !errors.Is(err, netguard.ErrBlocked) && errors.As(err, &op) && op.Op == "dial"
}

// MaxResponseHeader bounds the headers of a receiver's answer that a send
// reads: net/http's default is 10 MiB an answer, which a tenant's receivers
// answering every one of its sends in flight with megabytes of headers
// would turn into gigabytes on one node. An answer beyond it is a failed
// attempt (errResponseHeadersTooLarge); 64 KiB is far above what any
// receiver sends (an attempt stores 4 KiB of them).
const MaxResponseHeader = 64 << 10

// newHTTPClient returns the client webhooks go out through: connections are
// pooled per target, every dial is checked by the guard, no proxy from the
// environment is used (the guard would check the proxy's address, not the
// target's), redirects are never followed (a redirect is the receiver's
// answer, recorded and final), and an answer's headers are read up to
// MaxResponseHeader.
//
// Its ResponseHeaderTimeout is maxTimeout, the longest timeout an attempt
// may have: each attempt's own timeout, a deadline on its request's
// context, ends it sooner, and this one must never cut an attempt short of
// the timeout its task was allowed. It is the bound for a request that
// would somehow go out without a deadline.
func newHTTPClient(guard *netguard.Guard, maxTimeout time.Duration) *http.Client {
	transport := &http.Transport{
		DialContext:            guard.DialContext(),
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  maxTimeout,
		MaxResponseHeaderBytes: MaxResponseHeader,
		DisableCompression:     true,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
