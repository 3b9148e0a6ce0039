// Package hookwheel is the Go client of hookwheel's HTTP API, for programs
// that schedule webhooks: create, follow, cancel and replay tasks, manage
// recurring schedules, and tell the API's refusals apart with typed errors.
//
// It exists so that a Go program need not hand-roll requests, pagination,
// problem+json decoding and retries. The wire types and calls come from a
// client generated from the server's OpenAPI document (so they cannot drift
// from the API); this package puts a small, context-first surface on it:
//
//	c, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
//	task, err := c.CreateTask(ctx, hookwheel.TaskRequest{URL: "https://example.com/hook", Delay: time.Minute})
//	for task, err := range c.ListTasks(ctx, hookwheel.TaskFilter{Status: hookwheel.StatusDead}) { ... }
//
// Calls are retried on 429 and 503 answers, honouring Retry-After, and on
// network errors, but only when repeating them cannot do anything twice (see
// New). Package webhook, beside this one, verifies the webhooks hookwheel
// sends.
package hookwheel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// Defaults of the options of New.
const (
	// DefaultRetries is how many times a call is retried after its first
	// try, at most.
	DefaultRetries = 3
	// DefaultMaxRetryWait is the longest a call waits before one retry. A
	// Retry-After asking for longer is not waited for: the call fails at once
	// with an *Error whose RetryAfter says when to come back.
	DefaultMaxRetryWait = 30 * time.Second
	// DefaultTimeout bounds each try of a call (connecting, sending, reading
	// the answer), unless WithHTTPClient gives a client of one's own.
	DefaultTimeout = 30 * time.Second
	// minRetryWait is the first wait of the exponential backoff used when
	// the server gives no Retry-After.
	minRetryWait = 250 * time.Millisecond
)

// Client calls one hookwheel server as one tenant. It is safe for concurrent
// use; make one and share it.
type Client struct {
	api *apiclient.ClientWithResponses
}

// Option changes a default of New.
type Option func(*config)

type config struct {
	httpClient   *http.Client
	retries      int
	maxRetryWait time.Duration
	userAgent    string
}

// WithHTTPClient sends the requests through hc (its transport, timeout,
// proxy settings) instead of a client with DefaultTimeout per try. Retries
// happen around it.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) { c.httpClient = hc }
}

// WithRetries sets how many times a call may be retried after its first try
// (default DefaultRetries); 0 turns retries off.
func WithRetries(n int) Option {
	return func(c *config) { c.retries = max(0, n) }
}

// WithMaxRetryWait sets the longest wait before one retry (default
// DefaultMaxRetryWait).
func WithMaxRetryWait(d time.Duration) Option {
	return func(c *config) { c.maxRetryWait = d }
}

// WithUserAgent puts ua before the SDK's own User-Agent, so that the
// server's logs name the calling program.
func WithUserAgent(ua string) Option {
	return func(c *config) { c.userAgent = ua + " " + c.userAgent }
}

// userAgent identifies the SDK in the server's logs.
const userAgent = "hookwheel-go"

// New returns a client of the server at baseURL (such as
// http://localhost:8080) acting with apiKey (hw_<key id>_<secret>).
//
// Retries: a call that gets 429 is retried, whatever it is, since the API
// answers 429 before doing anything (rate limit, quota). A call that gets
// 503 or a network error is retried only when doing it twice is harmless:
// reads; CreateTask, because every create carries an Idempotency-Key (the
// caller's, or a random one New's client adds), so the server stores a
// repeat once; CreateTasks, whose items get such keys too; PauseSchedule,
// ResumeSchedule and CancelTasks, which a repeat leaves as the first left
// them. ReplayTask and ReplayDead are never retried on those: a repeat would
// send the webhooks again. CancelTask, RescheduleTask, DeleteSchedule and
// CreateSchedule are not either: the first try may have taken effect, and a
// repeat would then answer 409 or 404, or make a second schedule. The wait
// before a retry is the answer's Retry-After (seconds or an HTTP date), else
// an exponential backoff from 250 ms, at most WithMaxRetryWait.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	if apiKey == "" {
		return nil, errors.New("hookwheel: no API key (hw_<key id>_<secret>)")
	}
	api, err := newAPI(baseURL, apiKey, opts)
	if err != nil {
		return nil, err
	}
	return &Client{api: api}, nil
}

// newAPI is the generated client of the server at baseURL, sending token as
// its bearer token (none when empty), with the retries New describes.
func newAPI(baseURL, token string, opts []Option) (*apiclient.ClientWithResponses, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hookwheel: base URL %q: want an http or https URL such as http://localhost:8080", baseURL)
	}
	cfg := config{
		// A transport of its own: retryablehttp closes its client's idle
		// connections when a call gives up, which on http.DefaultTransport
		// would close the whole program's.
		httpClient:   &http.Client{Timeout: DefaultTimeout, Transport: cleanhttp.DefaultPooledTransport()},
		retries:      DefaultRetries,
		maxRetryWait: DefaultMaxRetryWait,
		userAgent:    userAgent,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	policy := retryPolicy{maxWait: cfg.maxRetryWait, now: time.Now}
	retrying := &retryablehttp.Client{
		HTTPClient:   cfg.httpClient,
		RetryWaitMin: minRetryWait,
		RetryWaitMax: cfg.maxRetryWait,
		RetryMax:     cfg.retries,
		CheckRetry:   policy.check,
		Backoff:      policy.backoff,
		// The last answer, a 429 say, goes back to the caller as it is, to be
		// read as an *Error, instead of retryablehttp's "giving up" error.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	hc := &http.Client{Transport: &retryablehttp.RoundTripper{Client: retrying}}
	authorization := "Bearer " + token
	api, err := apiclient.NewClientWithResponses(baseURL,
		apiclient.WithHTTPClient(hc),
		apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if token != "" {
				r.Header.Set("Authorization", authorization)
			}
			r.Header.Set("User-Agent", cfg.userAgent)
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("hookwheel: %w", err)
	}
	return api, nil
}

// retryKey marks the context of a call that may be repeated after a 503 or a
// network error (see New).
type retryKey struct{}

// repeatable returns ctx marked as the context of a call whose repeat is
// harmless.
func repeatable(ctx context.Context) context.Context {
	return context.WithValue(ctx, retryKey{}, true)
}

// retryPolicy decides which answers are retried and how long to wait.
type retryPolicy struct {
	maxWait time.Duration
	now     func() time.Time
}

// check is the retryablehttp.CheckRetry of the client.
func (p retryPolicy) check(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	safe, _ := ctx.Value(retryKey{}).(bool)
	if err != nil {
		return safe && !permanentTransportError(err), nil
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		// The API refuses before acting: any call may be repeated.
	case http.StatusServiceUnavailable:
		if !safe {
			return false, nil
		}
	default:
		return false, nil
	}
	if wait, ok := retryAfter(resp.Header, p.now()); ok && wait > p.maxWait {
		// Coming back earlier than asked would only be refused again.
		return false, nil
	}
	return true, nil
}

// backoff is the retryablehttp.Backoff of the client: the answer's
// Retry-After when it has one, else an exponential backoff with jitter.
func (p retryPolicy) backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if wait, ok := retryAfter(resp.Header, p.now()); ok {
			return min(wait, maxWait)
		}
	}
	wait := maxWait
	if attempt < 30 {
		wait = min(minWait<<attempt, maxWait)
	}
	// Half fixed, half random: clients refused together do not come back
	// together.
	return wait/2 + rand.N(wait/2+1)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(time.Duration(1<<62)/time.Second))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(0, at.Sub(now)), true
}

// permanentTransportError reports errors that a retry cannot cure: the
// server's certificate is not trusted.
func permanentTransportError(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}

// paginate walks the pages fetch returns, from the first (nil cursor) to the
// one without a next cursor. A page that hands back the cursor it was read
// with ends the walk with an error rather than reading it for ever.
func paginate[T any](fetch func(cursor *string) ([]T, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var cursor *string
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			if cursor != nil && *next == *cursor {
				var zero T
				yield(zero, fmt.Errorf("hookwheel: the server answered cursor %q with itself", *next))
				return
			}
			cursor = next
		}
	}
}

func ptr[T any](v T) *T { return &v }

// durationOrNil is d as the API spells durations, nil for zero.
func durationOrNil(d time.Duration) *string {
	if d == 0 {
		return nil
	}
	return ptr(d.String())
}

// apiRetry is the API's retry policy of the given fields, nil when none is
// set.
func apiRetry(maxAttempts int, minBackoff, maxBackoff time.Duration) *apiclient.RetryPolicy {
	if maxAttempts == 0 && minBackoff == 0 && maxBackoff == 0 {
		return nil
	}
	p := &apiclient.RetryPolicy{MinBackoff: durationOrNil(minBackoff), MaxBackoff: durationOrNil(maxBackoff)}
	if maxAttempts != 0 {
		p.MaxAttempts = &maxAttempts
	}
	return p
}
