package hookwheel

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"Tue, 01 Jan 2030 12:00:30 GMT", 30 * time.Second, true},
		{"Tue, 01 Jan 2030 11:00:00 GMT", 0, true}, // in the past: now
		{"99999999999999999999", 0, false},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set("Retry-After", tc.value)
		}
		got, ok := retryAfter(h, now)
		require.Equal(t, tc.wantOK, ok, tc.value)
		require.Equal(t, tc.want, got, tc.value)
	}
}

// TestRetryPolicyOnNetworkErrors covers what an httptest server cannot
// produce reliably: a network error is retried only for calls whose repeat
// is harmless, and never when the server's certificate is not trusted.
func TestRetryPolicyOnNetworkErrors(t *testing.T) {
	t.Parallel()
	p := retryPolicy{maxWait: time.Minute, now: time.Now}
	safe := repeatable(context.Background())
	unsafe := context.Background()
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	untrusted := x509.UnknownAuthorityError{}

	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"repeatable call, connection refused", safe, refused, true},
		{"other call, connection refused", unsafe, refused, false},
		{"repeatable call, untrusted certificate", safe, untrusted, false},
	} {
		retry, err := p.check(tc.ctx, nil, tc.err)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, retry, tc.name)
	}

	canceled, cancel := context.WithCancel(safe)
	cancel()
	retry, err := p.check(canceled, nil, refused)
	require.False(t, retry)
	require.ErrorIs(t, err, context.Canceled)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := retryPolicy{maxWait: 10 * time.Second, now: time.Now}
	for attempt := range 40 {
		wait := p.backoff(minRetryWait, p.maxWait, attempt, nil)
		ceiling := p.maxWait
		if attempt < 30 {
			ceiling = min(minRetryWait<<attempt, p.maxWait)
		}
		require.LessOrEqual(t, wait, ceiling, "attempt %d", attempt)
		require.GreaterOrEqual(t, wait, ceiling/2, "attempt %d", attempt)
	}
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"3"}}}
	require.Equal(t, 3*time.Second, p.backoff(minRetryWait, p.maxWait, 0, resp))
	resp.Header.Set("Retry-After", "300")
	require.Equal(t, p.maxWait, p.backoff(minRetryWait, p.maxWait, 0, resp))
}
