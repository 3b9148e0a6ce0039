package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The sign-up limits of POST /v1/signup, decided in Redis so that they
// hold across every node: per client address, and for every address
// together. They are GCRA limits like the tenants' API rate and share its
// script, lua/gcra.lua: count sign-ups per period, all of them at once,
// then one every period/count.

func (r *Redis) signupKey(client string) string {
	if client == "" {
		return r.prefix + "{signup}:signup_rate"
	}
	return r.prefix + "{signup/" + client + "}:signup_rate"
}

// AllowSignup decides, in one round trip, whether one more sign-up passes a
// limit of count per period, and counts it if so: the limit of the client
// address client, or with client "" the one of every address together.
func (r *Redis) AllowSignup(ctx context.Context, client string, count int, period time.Duration) (model.RateDecision, error) {
	if count < 1 || period <= 0 {
		return model.RateDecision{}, fmt.Errorf("sign-up limit: count %d and period %s must be positive", count, period)
	}
	// A brace would end the hash tag early and put the key elsewhere.
	if strings.ContainsAny(client, "{}") {
		return model.RateDecision{}, fmt.Errorf("sign-up limit: client %q is not an address", client)
	}
	vals, err := r.scripts.gcra.run(ctx, r.client, []string{r.signupKey(client)},
		formatMicros(float64(period.Microseconds())/float64(count)), count, 1).Int64Slice()
	if err != nil {
		return model.RateDecision{}, fmt.Errorf("sign-up limit of %q: %w", client, err)
	}
	if len(vals) != 4 {
		return model.RateDecision{}, fmt.Errorf("sign-up limit of %q: script returned %d values", client, len(vals))
	}
	return model.RateDecision{
		Allowed:    vals[0] == 1,
		Limit:      count,
		Remaining:  int(vals[1]),
		Reset:      time.Duration(vals[2]) * time.Microsecond,
		RetryAfter: time.Duration(vals[3]) * time.Microsecond,
	}, nil
}
