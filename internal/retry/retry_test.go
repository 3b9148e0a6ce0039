package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	t.Parallel()

	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	stop := http.Header{"Hookwheel-Retry": {"stop"}}
	tests := []struct {
		name   string
		status int
		header http.Header
		err    error
		want   Outcome
	}{
		{"200", 200, nil, nil, OutcomeSuccess},
		{"201", 201, nil, nil, OutcomeSuccess},
		{"204", 204, nil, nil, OutcomeSuccess},
		{"299", 299, nil, nil, OutcomeSuccess},

		{"connection refused", 0, nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), OutcomeRetry},
		{"timeout", 0, nil, timeout, OutcomeRetry},
		{"context deadline", 0, nil, context.DeadlineExceeded, OutcomeRetry},
		{"error wins over a 2xx status", 200, nil, errors.New("body read failed"), OutcomeRetry},
		{"408", 408, nil, nil, OutcomeRetry},
		{"425", 425, nil, nil, OutcomeRetry},
		{"429", 429, nil, nil, OutcomeRetry},
		{"500", 500, nil, nil, OutcomeRetry},
		{"502", 502, nil, nil, OutcomeRetry},
		{"503", 503, nil, nil, OutcomeRetry},
		{"504", 504, nil, nil, OutcomeRetry},
		{"599", 599, nil, nil, OutcomeRetry},

		{"100", 100, nil, nil, OutcomeFail},
		{"199", 199, nil, nil, OutcomeFail},
		{"300", 300, nil, nil, OutcomeFail},
		{"301", 301, nil, nil, OutcomeFail},
		{"302", 302, nil, nil, OutcomeFail},
		{"304", 304, nil, nil, OutcomeFail},
		{"307", 307, nil, nil, OutcomeFail},
		{"308", 308, nil, nil, OutcomeFail},
		{"400", 400, nil, nil, OutcomeFail},
		{"401", 401, nil, nil, OutcomeFail},
		{"403", 403, nil, nil, OutcomeFail},
		{"404", 404, nil, nil, OutcomeFail},
		{"409", 409, nil, nil, OutcomeFail},
		{"410", 410, nil, nil, OutcomeFail},
		{"413", 413, nil, nil, OutcomeFail},
		{"422", 422, nil, nil, OutcomeFail},
		{"424", 424, nil, nil, OutcomeFail},
		{"426", 426, nil, nil, OutcomeFail},
		{"499", 499, nil, nil, OutcomeFail},
		{"600", 600, nil, nil, OutcomeFail},
		{"no status, no error", 0, nil, nil, OutcomeFail},

		// Hookwheel-Retry: stop makes any non-2xx final, beside the
		// statuses that are final by themselves.
		{"503 with stop", 503, stop, nil, OutcomeFail},
		{"500 with stop", 500, stop, nil, OutcomeFail},
		{"429 with stop", 429, stop, nil, OutcomeFail},
		{"408 with stop", 408, stop, nil, OutcomeFail},
		{"410 with stop", 410, stop, nil, OutcomeFail},
		{"302 with stop", 302, stop, nil, OutcomeFail},
		{"stop in any case, with spaces", 503, http.Header{"Hookwheel-Retry": {" STOP "}}, nil, OutcomeFail},
		{"stop among other values", 503, http.Header{"Hookwheel-Retry": {"later", "stop"}}, nil, OutcomeFail},
		{"2xx with stop is delivered", 200, stop, nil, OutcomeSuccess},
		{"204 with stop is delivered", 204, stop, nil, OutcomeSuccess},
		{"error with stop is retried", 0, stop, errors.New("read: connection reset by peer"), OutcomeRetry},
		{"another value is ignored", 503, http.Header{"Hookwheel-Retry": {"no"}}, nil, OutcomeRetry},
		{"an empty value is ignored", 503, http.Header{"Hookwheel-Retry": {""}}, nil, OutcomeRetry},
		{"a misspelt value is ignored", 503, http.Header{"Hookwheel-Retry": {"stopp"}}, nil, OutcomeRetry},
		{"another header is ignored", 503, http.Header{"Upstash-Nonretryable-Error": {"true"}}, nil, OutcomeRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Classify(tt.status, tt.header, tt.err))
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()

	p := DefaultPolicy()
	require.Equal(t, Policy{MaxAttempts: 10, MinBackoff: time.Second, MaxBackoff: time.Hour}, p)
	require.NoError(t, p.Validate())
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()

	valid := DefaultPolicy()
	tests := []struct {
		name       string
		edit       func(*Policy)
		wantFields []string
	}{
		{"default", func(*Policy) {}, nil},
		{"one attempt", func(p *Policy) { p.MaxAttempts = 1 }, nil},
		{"100 attempts", func(p *Policy) { p.MaxAttempts = 100 }, nil},
		{"smallest backoff", func(p *Policy) { p.MinBackoff = 100 * time.Millisecond }, nil},
		{"constant backoff", func(p *Policy) { p.MinBackoff, p.MaxBackoff = time.Minute, time.Minute }, nil},
		{"7 days", func(p *Policy) { p.MaxBackoff = 7 * 24 * time.Hour }, nil},
		{"zero attempts", func(p *Policy) { p.MaxAttempts = 0 }, []string{"max_attempts"}},
		{"101 attempts", func(p *Policy) { p.MaxAttempts = 101 }, []string{"max_attempts"}},
		{"zero min", func(p *Policy) { p.MinBackoff = 0 }, []string{"min_backoff"}},
		{"99ms min", func(p *Policy) { p.MinBackoff = 99 * time.Millisecond }, []string{"min_backoff"}},
		{"max below min", func(p *Policy) { p.MaxBackoff = 500 * time.Millisecond }, []string{"max_backoff"}},
		{"max past 7 days", func(p *Policy) { p.MaxBackoff = 7*24*time.Hour + 1 }, []string{"max_backoff"}},
		{"all wrong", func(p *Policy) { *p = Policy{MaxAttempts: -1, MinBackoff: -1, MaxBackoff: -2} },
			[]string{"max_attempts", "min_backoff", "max_backoff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := valid
			tt.edit(&p)
			err := p.Validate()
			if tt.wantFields == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)

			var first *FieldError
			require.ErrorAs(t, err, &first)
			require.Equal(t, tt.wantFields[0], first.Field)

			var fields []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *FieldError
				require.ErrorAs(t, e, &fe)
				require.NotEmpty(t, fe.Message)
				require.Contains(t, e.Error(), fe.Field)
				fields = append(fields, fe.Field)
			}
			require.Equal(t, tt.wantFields, fields)
		})
	}
}

// backoffBase is d of the documented formula, computed step by step: each
// retry waits the same factor longer than the one before, from MinBackoff
// after attempt 1 to MaxBackoff before attempt N.
func backoffBase(p Policy, n int) time.Duration {
	steps := p.MaxAttempts - 2
	if steps <= 0 {
		return p.MinBackoff
	}
	factor := math.Pow(float64(p.MaxBackoff)/float64(p.MinBackoff), 1/float64(steps))
	d := float64(p.MinBackoff)
	for i := 1; i < min(n, p.MaxAttempts-1); i++ {
		d *= factor
	}
	if d >= float64(p.MaxBackoff) {
		return p.MaxBackoff
	}
	return time.Duration(d)
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()

	policies := []Policy{
		DefaultPolicy(),
		{MaxAttempts: 100, MinBackoff: 100 * time.Millisecond, MaxBackoff: 7 * 24 * time.Hour},
		{MaxAttempts: 10, MinBackoff: time.Minute, MaxBackoff: time.Minute},
		{MaxAttempts: 10, MinBackoff: 3 * time.Second, MaxBackoff: 10 * time.Second},
		{MaxAttempts: 10, MinBackoff: 1500 * time.Millisecond, MaxBackoff: 1501 * time.Millisecond},
		// Beyond Validate's limits: Backoff must still not overflow.
		{MaxAttempts: 10, MinBackoff: time.Nanosecond, MaxBackoff: math.MaxInt64},
		{MaxAttempts: 10, MinBackoff: math.MaxInt64 / 3, MaxBackoff: math.MaxInt64},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	us := []float64{0, math.Nextafter(0, 1), 0.25, 0.5, 0.75, math.Nextafter(1, 0)}
	for range 60 {
		us = append(us, rng.Float64())
	}

	for _, p := range policies {
		t.Run(fmt.Sprintf("%s..%s", p.MinBackoff, p.MaxBackoff), func(t *testing.T) {
			t.Parallel()
			for _, u := range us {
				prev := time.Duration(0)
				for n := 1; n <= 200; n++ {
					d := backoffBase(p, n)
					delay := p.Backoff(n, u)
					require.GreaterOrEqual(t, delay, p.MinBackoff, "n=%d u=%v", n, u)
					require.LessOrEqual(t, delay, p.MaxBackoff, "n=%d u=%v", n, u)
					// 1e-9 relative slack for the float rounding of a product
					// of up to 200 factors against one math.Pow.
					require.LessOrEqual(t, math.Abs(float64(delay)-float64(d)), 0.2*float64(d)*(1+1e-9)+1,
						"n=%d u=%v d=%s delay=%s", n, u, d, delay)
					// d never decreases with n, and neither may the delay.
					require.GreaterOrEqual(t, delay, prev, "n=%d u=%v", n, u)
					prev = delay
				}
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()

	p := DefaultPolicy() // 10 attempts, 1s to 1h: factor 3600^(1/8) ≈ 2.783 per retry
	tests := []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0.5, time.Second}, // 1s exactly, no jitter at u=0.5
		{1, 0, time.Second},   // 0.8s, raised to MinBackoff
		{1, 0.75, 1100 * time.Millisecond},
		{2, 0.5, 2783157683}, // 3600^(1/8) s
		{3, 0.5, 7745966692}, // 3600^(2/8) s
		{5, 0.5, time.Minute},
		{5, 0, 48 * time.Second},
		{5, 1, 72 * time.Second},
		{9, 0.5, time.Hour}, // before the last attempt: MaxBackoff
		{9, 0, 48 * time.Minute},
		{9, 1, time.Hour},
		{10, 0.5, time.Hour},
		{1000, 0.5, time.Hour},
		{math.MaxInt, 0.5, time.Hour},
		// Out of range arguments are clamped, not trusted.
		{0, 0.5, time.Second},
		{-5, 0.5, time.Second},
		{5, -1, 48 * time.Second},
		{5, math.NaN(), 48 * time.Second},
		{5, 7, 72 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d,u=%v", tt.n, tt.u), func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, float64(tt.want), float64(p.Backoff(tt.n, tt.u)), float64(time.Microsecond))
		})
	}

	t.Run("two attempts retry once after MinBackoff", func(t *testing.T) {
		t.Parallel()
		two := Policy{MaxAttempts: 2, MinBackoff: 5 * time.Second, MaxBackoff: time.Hour}
		require.Equal(t, 5*time.Second, two.Backoff(1, 0.5))
	})
}

func TestAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 22, 10, 0, 0, 300_000_000, time.UTC)
	httpDate := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	tests := []struct {
		name     string
		status   int
		value    string // "" for no header
		wantWait time.Duration
		wantOK   bool
	}{
		{"seconds", 429, "120", 2 * time.Minute, true},
		{"seconds on 503", 503, "7", 7 * time.Second, true},
		{"zero seconds", 429, "0", 0, true},
		{"surrounding spaces", 429, " 30 ", 30 * time.Second, true},
		{"seconds capped at 1h", 429, "3601", time.Hour, true},
		{"exactly 1h", 503, "3600", time.Hour, true},
		{"huge seconds capped", 429, "99999999999999999999999", time.Hour, true},
		{"negative seconds", 429, "-30", 0, true},
		{"huge negative seconds", 429, "-99999999999999999999999", 0, true},
		{"HTTP date", 503, httpDate(now.Add(90 * time.Second).Truncate(time.Second)), 89700 * time.Millisecond, true},
		{"RFC 850 date", 429, now.Add(time.Minute).Format(time.RFC850), 59700 * time.Millisecond, true},
		{"ANSI C date", 429, now.Add(time.Minute).Format(time.ANSIC), 59700 * time.Millisecond, true},
		{"HTTP date capped at 1h", 429, httpDate(now.Add(48 * time.Hour)), time.Hour, true},
		{"past HTTP date", 503, httpDate(now.Add(-time.Hour)), 0, true},
		{"HTTP date this very second", 503, httpDate(now), 0, true},
		{"garbage", 429, "soon", 0, false},
		{"fractional seconds", 429, "1.5", 0, false},
		{"ISO date", 429, now.Add(time.Minute).Format(time.RFC3339), 0, false},
		{"absent on 429", 429, "", 0, false},
		{"ignored on 500", 500, "120", 0, false},
		{"ignored on 502", 502, "120", 0, false},
		{"ignored on 408", 408, "120", 0, false},
		{"ignored on 200", 200, "120", 0, false},
		{"ignored on network error", 0, "120", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.value != "" {
				h.Set("Retry-After", tt.value)
			}
			wait, ok := After(tt.status, h, now)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.wantWait, wait)
		})
	}

	wait, ok := After(429, nil, now)
	require.False(t, ok)
	require.Zero(t, wait)
}

func TestNextDelay(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	retryAfter := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	p := Policy{MaxAttempts: 5, MinBackoff: time.Second, MaxBackoff: time.Minute}
	tests := []struct {
		name      string
		n         int
		outcome   Outcome
		status    int
		header    http.Header
		wantDelay time.Duration
		wantRetry bool
	}{
		{"first failure", 1, OutcomeRetry, 500, nil, time.Second, true},
		{"network error", 2, OutcomeRetry, 0, nil, 3914867641, true}, // 60^(1/3) s
		{"last retry waits MaxBackoff", 4, OutcomeRetry, 502, nil, time.Minute, true},
		{"last attempt", 5, OutcomeRetry, 500, nil, 0, false},
		{"past the last attempt", 6, OutcomeRetry, 500, nil, 0, false},
		{"last attempt ignores Retry-After", 5, OutcomeRetry, 429, retryAfter("10"), 0, false},
		{"success", 1, OutcomeSuccess, 200, nil, 0, false},
		{"fail", 1, OutcomeFail, 404, nil, 0, false},
		{"fail ignores Retry-After", 1, OutcomeFail, 403, retryAfter("10"), 0, false},
		{"Retry-After on 429", 1, OutcomeRetry, 429, retryAfter("30"), 30 * time.Second, true},
		{"Retry-After past MaxBackoff", 1, OutcomeRetry, 503, retryAfter("600"), 10 * time.Minute, true},
		{"Retry-After capped at 1h", 1, OutcomeRetry, 429, retryAfter("86400"), time.Hour, true},
		{"Retry-After HTTP date", 1, OutcomeRetry, 503,
			retryAfter(now.Add(45 * time.Second).Format(http.TimeFormat)), 45 * time.Second, true},
		{"Retry-After 0 raised to MinBackoff", 3, OutcomeRetry, 429, retryAfter("0"), time.Second, true},
		{"past Retry-After date raised to MinBackoff", 3, OutcomeRetry, 503,
			retryAfter(now.Add(-time.Hour).Format(http.TimeFormat)), time.Second, true},
		{"Retry-After ignored on 500", 2, OutcomeRetry, 500, retryAfter("30"), 3914867641, true},
		{"garbage Retry-After falls back to backoff", 2, OutcomeRetry, 429, retryAfter("later"), 3914867641, true},
		{"429 without Retry-After", 3, OutcomeRetry, 429, nil, 15326188647, true}, // 60^(2/3) s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			delay, retry := p.NextDelay(tt.n, tt.outcome, tt.status, tt.header, now, 0.5)
			require.Equal(t, tt.wantRetry, retry)
			require.Equal(t, tt.wantDelay, delay)
		})
	}

	t.Run("single attempt policy never retries", func(t *testing.T) {
		t.Parallel()
		one := Policy{MaxAttempts: 1, MinBackoff: time.Second, MaxBackoff: time.Hour}
		_, retry := one.NextDelay(1, OutcomeRetry, 503, retryAfter("1"), now, 0.5)
		require.False(t, retry)
	})

	t.Run("attempts of the default policy", func(t *testing.T) {
		t.Parallel()
		// Ten attempts: nine waits, then the task is dead.
		def := DefaultPolicy()
		var waits []string
		for n := 1; ; n++ {
			delay, retry := def.NextDelay(n, OutcomeRetry, 500, nil, now, 0.5)
			if !retry {
				require.Equal(t, 10, n)
				break
			}
			waits = append(waits, strconv.Itoa(int(delay/time.Second)))
		}
		// 3600^(k/8) seconds, k = 0..8, truncated: from 1s up to exactly 1h.
		require.Equal(t, []string{"1", "2", "7", "21", "60", "166", "464", "1293", "3600"}, waits)
	})
}
