package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The limiters, decided in Redis so that every node shares them: tenants' API
// rate (lua/gcra.lua) and their dispatch rate and concurrency per target host
// (lua/dispatch_admit.lua).
//
// Why our own scripts rather than go-redis/redis_rate, which implements GCRA
// in Lua too: dispatch_admit.lua does what no rate limiter library does — it
// always books (each caller gets the next free slot, so tasks sent in due
// order keep it), reserves a slot per task with a grace for coming back late,
// and holds a concurrency semaphore with leases, all or nothing in one round
// trip. For the API rate alone redis_rate's algorithm would fit, but it writes
// its keys under a fixed "rate:" prefix outside HOOKWHEEL_REDIS_PREFIX (so
// installations, and test packages, sharing a Redis would share limits and
// leave keys no cleanup finds), takes rates as whole requests per period where
// tenants set fractional rates per second, and could not share the
// microsecond arithmetic and key layout both limiters here use. gcra.lua is 30
// lines, tested through AllowAPIRequest in limits_test.go.

func (r *Redis) apiRateKey(tenantID uuid.UUID) string {
	return r.prefix + "{" + tenantID.String() + "}:api_rate"
}

// AllowAPIRequest decides, in one round trip, whether one API request of the
// tenant passes a limit of rate per second with bursts of burst, and counts
// it if so.
func (r *Redis) AllowAPIRequest(ctx context.Context, tenantID uuid.UUID, rate float64, burst int) (model.RateDecision, error) {
	if rate <= 0 || burst < 1 {
		return model.RateDecision{}, fmt.Errorf("api rate limit of tenant %s: rate %v and burst %d must be positive", tenantID, rate, burst)
	}
	vals, err := r.scripts.gcra.run(ctx, r.client, []string{r.apiRateKey(tenantID)},
		formatMicros(1e6/rate), burst, 1).Int64Slice()
	if err != nil {
		return model.RateDecision{}, fmt.Errorf("api rate limit of tenant %s: %w", tenantID, err)
	}
	if len(vals) != 4 {
		return model.RateDecision{}, fmt.Errorf("api rate limit of tenant %s: script returned %d values", tenantID, len(vals))
	}
	return model.RateDecision{
		Allowed:    vals[0] == 1,
		Limit:      burst,
		Remaining:  int(vals[1]),
		Reset:      time.Duration(vals[2]) * time.Microsecond,
		RetryAfter: time.Duration(vals[3]) * time.Microsecond,
	}, nil
}

// dispatchEarly is how early a caller may come for its slot and still be on
// time (the script's "early": timers and Postgres's microseconds round).
const dispatchEarly = time.Millisecond

// dispatchSpacing is the time between two slots of l's rate, in
// microseconds. A slot is used up to model.DispatchGrace late and up to
// dispatchEarly early, so with slots exactly 1/Rate apart a window of
// Period could see (Period + grace + early) / interval + 1 sends: more than
// Rate x Period + 1 once the grace passes half an interval, which its floor
// (model's minDispatchGrace) does above 25 a second (a limit of 100 a second was
// measured at 104 in a second). The spacing grows just enough that no
// window of Period holds more than Rate x Period + 1 (rounded down): by
// about 1% at 100 a second and 2% at the highest rates.
func dispatchSpacing(l model.DispatchLimit) float64 {
	period := l.Period
	if period <= 0 {
		period = time.Second
	}
	interval := 1e6 / l.Rate
	most := math.Floor(l.Rate*period.Seconds()) + 1
	reach := float64((period + model.DispatchGrace(l.Rate) + dispatchEarly).Microseconds())
	// A nanosecond more keeps the bound strict.
	return max(interval, reach/most+0.001)
}

// dispatchKeys are the keys of dispatch_admit.lua for a task's attempt
// under l. The reserved slot is the attempt's, not the task's: a deferral
// keeps the attempt and finds its slot again, a retry or a replay is a new
// attempt and books its own, never sending on a slot its earlier attempt
// left unused.
//
// A flow key's rate schedule and slots are named by their spacing too: a
// tenant may change a key's rate from one a day to a hundred a second, and
// the schedule booked at the old rate must not hold the new one back. A
// host's schedule keeps its old name: an operator's change of a host's rate
// still waits for the slots booked before it, which a slow rate (0.01 a
// second, say) can stretch over hours. The sends in flight are counted
// whatever the rate.
func (r *Redis) dispatchKeys(l model.DispatchLimit, taskID uuid.UUID, attempt int) []string {
	// '/' cannot occur in a host name, nor '#' in a host name or a flow key
	// (tasks.FlowKeyProblem), so the tags are unambiguous; neither may hold
	// a brace, which would cut the hash tag short.
	base := r.prefix + "{" + l.TenantID.String() + "/" + l.Host + "}:"
	rate := base
	if l.Flow != "" {
		base = r.prefix + "{" + l.TenantID.String() + "#" + l.Flow + "}:"
		rate = base
		if l.Rate > 0 {
			rate = base + formatMicros(dispatchSpacing(l)) + ":"
		}
	}
	return []string{rate + "dispatch_rate", rate + "dispatch_slot:" + taskID.String() + ":" + strconv.Itoa(attempt),
		base + "inflight"}
}

func dispatchHolder(taskID, token uuid.UUID) string { return taskID.String() + ":" + token.String() }

// limitName says what l limits, for errors.
func limitName(l model.DispatchLimit) string {
	if l.Flow != "" {
		return "flow key " + l.Flow
	}
	return l.Host
}

func (r *Redis) admitArgs(q model.DispatchRequest) (keys []string, args []any) {
	interval := "0"
	if q.Limit.Rate > 0 {
		interval = formatMicros(dispatchSpacing(q.Limit))
	}
	if q.At.IsZero() {
		q.At = time.Now()
	}
	return r.dispatchKeys(q.Limit, q.TaskID, q.Attempt), []any{interval, max(q.Limit.Concurrency, 0), dispatchHolder(q.TaskID, q.Token),
		q.Lease.Microseconds(), model.DispatchGrace(q.Limit.Rate).Microseconds(), q.At.UnixMicro()}
}

func parseAdmission(q model.DispatchRequest, cmd *redis.Cmd) (model.DispatchAdmission, error) {
	vals, err := cmd.Int64Slice()
	if err != nil {
		return model.DispatchAdmission{}, fmt.Errorf("admit dispatch of task %s under %s: %w", q.TaskID, limitName(q.Limit), err)
	}
	if len(vals) != 2 {
		return model.DispatchAdmission{}, fmt.Errorf("admit dispatch of task %s under %s: script returned %d values", q.TaskID, limitName(q.Limit), len(vals))
	}
	switch vals[0] {
	case 1:
		return model.DispatchAdmission{Outcome: model.DispatchNow}, nil
	case 0:
		return model.DispatchAdmission{Outcome: model.DispatchLater, Wait: time.Duration(vals[1]) * time.Microsecond}, nil
	default:
		return model.DispatchAdmission{Outcome: model.DispatchBusy}, nil
	}
}

// AdmitDispatch decides, in one round trip, whether a task may be sent under
// its limits: see lua/dispatch_admit.lua.
func (r *Redis) AdmitDispatch(ctx context.Context, q model.DispatchRequest) (model.DispatchAdmission, error) {
	keys, args := r.admitArgs(q)
	return parseAdmission(q, r.scripts.dispatchAdmit.run(ctx, r.client, keys, args...))
}

// AdmitDispatches decides for several tasks in one round trip (a pipeline,
// run in order: tasks given in due order get their slots in due order, but
// for the rare pipeline a Redis server answers with NOSCRIPT, whose refused
// commands run after the others; see script.runEach).
func (r *Redis) AdmitDispatches(ctx context.Context, reqs []model.DispatchRequest) ([]model.DispatchAdmission, error) {
	cmds, err := r.scripts.dispatchAdmit.runEach(ctx, r.client, len(reqs), func(i int) ([]string, []any) {
		return r.admitArgs(reqs[i])
	})
	if err != nil {
		return nil, fmt.Errorf("admit %d dispatches: %w", len(reqs), err)
	}
	out := make([]model.DispatchAdmission, len(reqs))
	for i, cmd := range cmds {
		if out[i], err = parseAdmission(reqs[i], cmd); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReleaseDispatch gives back the concurrency slot the task holds under token,
// if any.
func (r *Redis) ReleaseDispatch(ctx context.Context, l model.DispatchLimit, taskID, token uuid.UUID) error {
	if err := r.client.ZRem(ctx, r.dispatchKeys(l, taskID, 0)[2], dispatchHolder(taskID, token)).Err(); err != nil {
		return fmt.Errorf("release dispatch slot of task %s under %s: %w", taskID, limitName(l), err)
	}
	return nil
}

// formatMicros spells a number of microseconds for a script argument,
// fraction included (1e6/3 per request is not a whole number).
func formatMicros(us float64) string {
	if math.IsInf(us, 0) || math.IsNaN(us) {
		us = 0
	}
	return strconv.FormatFloat(us, 'f', -1, 64)
}
