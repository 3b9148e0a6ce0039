package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Rate limits and quotas: what a tenant may do, kept with the tenant in
// Postgres, and the decisions, taken in Redis by Lua scripts (one round trip
// each, atomic, shared by every node).

const queryTenantLimits = `-- name: TenantLimits
SELECT limits FROM tenants WHERE id = $1`

// TenantLimits reads a tenant's limits alone, for the dispatcher's cache.
func (db *DB) TenantLimits(ctx context.Context, tenantID uuid.UUID) (model.Limits, error) {
	var l model.Limits
	err := db.pool.QueryRow(ctx, queryTenantLimits, tenantID).Scan(&l)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.Limits{}, model.ErrNotFound
	}
	if err != nil {
		return model.Limits{}, fmt.Errorf("get limits of tenant %s: %w", tenantID, err)
	}
	return l, nil
}

// The inner LIMIT bounds the scan: a quota check needs to know only whether
// the count reaches the quota, not by how much it exceeds it. NULL counts all.
// Both walk tasks_tenant_status_recent, one range per status.
const queryCountPendingTasks = `-- name: CountPendingTasks
SELECT count(*) FROM (
	SELECT 1 FROM tasks
	WHERE tenant_id = $1 AND status IN ('scheduled', 'retrying', 'dispatching')
	LIMIT $2
) pending`

// CountPendingTasks counts the tenant's waiting tasks (scheduled, retrying
// or dispatching), stopping at upTo when upTo > 0. It costs an index range
// scan over those tasks: proportional to the count, so bounded by the quota
// when one is checked.
func (db *DB) CountPendingTasks(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error) {
	var limit *int64
	if upTo > 0 {
		n := int64(upTo)
		limit = &n
	}
	var n int
	if err := db.pool.QueryRow(ctx, queryCountPendingTasks, tenantID, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending tasks of tenant %s: %w", tenantID, err)
	}
	return n, nil
}

const queryHasIdempotencyKey = `-- name: HasIdempotencyKey
SELECT EXISTS (SELECT 1 FROM tasks WHERE tenant_id = $1 AND idempotency_key = $2 AND idempotency_key IS NOT NULL)`

// HasIdempotencyKey reports whether the tenant already created a task with
// this Idempotency-Key: a repeat of that request creates nothing, so no
// quota stands in its way.
func (db *DB) HasIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error) {
	var ok bool
	if err := db.pool.QueryRow(ctx, queryHasIdempotencyKey, tenantID, key).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up idempotency key of tenant %s: %w", tenantID, err)
	}
	return ok, nil
}

var (
	//go:embed lua/gcra.lua
	gcraLua string
	//go:embed lua/dispatch_admit.lua
	dispatchAdmitLua string
)

// The limiters' scripts. A redis.Script is immutable (its source and SHA-1),
// so sharing one between clients is safe; Run sends EVALSHA and falls back to
// EVAL once per server (NOSCRIPT), so a decision is one round trip.
var (
	gcraScript          = redis.NewScript(gcraLua)
	dispatchAdmitScript = redis.NewScript(dispatchAdmitLua)
)

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
	vals, err := gcraScript.Run(ctx, r.client, []string{r.apiRateKey(tenantID)},
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

// DispatchLimit is what applies to the webhooks of one tenant to one host.
type DispatchLimit struct {
	TenantID uuid.UUID
	// Host is the target's host name, lowercase, without port.
	Host string
	// Rate is webhooks per second, Concurrency webhooks in flight; 0 means
	// unlimited.
	Rate        float64
	Concurrency int
}

// Limited reports whether the limit limits anything.
func (l DispatchLimit) Limited() bool { return l.Rate > 0 || l.Concurrency > 0 }

// DispatchOutcome is the answer of AdmitDispatch.
type DispatchOutcome int

const (
	// DispatchNow: send now. A concurrency slot, if limited, is held until
	// ReleaseDispatch or the lease ends.
	DispatchNow DispatchOutcome = iota
	// DispatchLater: send no sooner than Wait from now; that slot of the
	// rate is reserved for this task, which must come back for it.
	DispatchLater
	// DispatchBusy: every concurrency slot is taken; nothing was reserved.
	DispatchBusy
)

// DispatchAdmission is the answer of AdmitDispatch.
type DispatchAdmission struct {
	Outcome DispatchOutcome
	Wait    time.Duration
}

// minDispatchGrace is the least lateness a task coming back for its reserved
// slot is forgiven, however high the rate: below it, ordinary scheduling
// jitter would make tasks lose their slots over and over.
const minDispatchGrace = 20 * time.Millisecond

// DispatchGrace is how late a task may come back for its reserved slot (or
// be sent after the slot it was given) and still use it: half an interval,
// so that the other half absorbs the jitter between sending and arriving and
// a receiver never sees more than one extra webhook in any window (a rate of
// 20/s shows at most 21 in a second), and never less than minDispatchGrace.
// (Just under a whole interval was measured to let 22 through now and then.)
func DispatchGrace(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return max(time.Duration(float64(time.Second)/rate/2), minDispatchGrace)
}

func (r *Redis) dispatchKeys(l DispatchLimit, taskID uuid.UUID) []string {
	// '/' cannot occur in a host name, so the tag is unambiguous.
	base := r.prefix + "{" + l.TenantID.String() + "/" + l.Host + "}:"
	return []string{base + "dispatch_rate", base + "dispatch_slot:" + taskID.String(), base + "inflight"}
}

func dispatchHolder(taskID, token uuid.UUID) string { return taskID.String() + ":" + token.String() }

// DispatchRequest asks whether one claimed task may be sent under Limit;
// only the limits it sets are checked (a zero Rate or Concurrency is not).
type DispatchRequest struct {
	Limit  DispatchLimit
	TaskID uuid.UUID
	// Token is the claim token: with TaskID it names the holder of a
	// concurrency slot.
	Token uuid.UUID
	// Lease bounds how long a concurrency slot stays held if ReleaseDispatch
	// never comes (the node died).
	Lease time.Duration
	// At is when the task is meant to be sent, by the dispatcher's clock (a
	// claim is taken a little ahead of its due time); the rate is decided
	// for that instant. The slots of a rate are on the dispatchers' clocks
	// (keep them synchronised): a wait converted from Redis's clock would be
	// off by the unknown part of a round trip, and a task would come back
	// a hair before its slot.
	At time.Time
}

func (r *Redis) admitArgs(q DispatchRequest) (keys []string, args []any) {
	interval := "0"
	if q.Limit.Rate > 0 {
		interval = formatMicros(1e6 / q.Limit.Rate)
	}
	if q.At.IsZero() {
		q.At = time.Now()
	}
	return r.dispatchKeys(q.Limit, q.TaskID), []any{interval, max(q.Limit.Concurrency, 0), dispatchHolder(q.TaskID, q.Token),
		q.Lease.Microseconds(), DispatchGrace(q.Limit.Rate).Microseconds(), q.At.UnixMicro()}
}

func parseAdmission(q DispatchRequest, cmd *redis.Cmd) (DispatchAdmission, error) {
	vals, err := cmd.Int64Slice()
	if err != nil {
		return DispatchAdmission{}, fmt.Errorf("admit dispatch of task %s to %s: %w", q.TaskID, q.Limit.Host, err)
	}
	if len(vals) != 2 {
		return DispatchAdmission{}, fmt.Errorf("admit dispatch of task %s to %s: script returned %d values", q.TaskID, q.Limit.Host, len(vals))
	}
	switch vals[0] {
	case 1:
		return DispatchAdmission{Outcome: DispatchNow}, nil
	case 0:
		return DispatchAdmission{Outcome: DispatchLater, Wait: time.Duration(vals[1]) * time.Microsecond}, nil
	default:
		return DispatchAdmission{Outcome: DispatchBusy}, nil
	}
}

// AdmitDispatch decides, in one round trip, whether a task may be sent under
// its limits: see lua/dispatch_admit.lua.
func (r *Redis) AdmitDispatch(ctx context.Context, q DispatchRequest) (DispatchAdmission, error) {
	keys, args := r.admitArgs(q)
	return parseAdmission(q, dispatchAdmitScript.Run(ctx, r.client, keys, args...))
}

// AdmitDispatches decides for several tasks in one round trip (a pipeline,
// run in order: tasks given in due order get their slots in due order).
func (r *Redis) AdmitDispatches(ctx context.Context, reqs []DispatchRequest) ([]DispatchAdmission, error) {
	run := func(eval func(redis.Pipeliner, []string, []any) *redis.Cmd) ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, len(reqs))
		_, err := r.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i, q := range reqs {
				keys, args := r.admitArgs(q)
				cmds[i] = eval(pipe, keys, args)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := run(func(pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return dispatchAdmitScript.EvalSha(ctx, pipe, keys, args...)
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// First use on this server: nothing ran (every command of the
		// pipeline failed alike), so send the script itself.
		cmds, err = run(func(pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd {
			return dispatchAdmitScript.Eval(ctx, pipe, keys, args...)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("admit %d dispatches: %w", len(reqs), err)
	}
	out := make([]DispatchAdmission, len(reqs))
	for i, cmd := range cmds {
		if out[i], err = parseAdmission(reqs[i], cmd); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReleaseDispatch gives back the concurrency slot the task holds under token,
// if any.
func (r *Redis) ReleaseDispatch(ctx context.Context, l DispatchLimit, taskID, token uuid.UUID) error {
	if err := r.client.ZRem(ctx, r.dispatchKeys(l, taskID)[2], dispatchHolder(taskID, token)).Err(); err != nil {
		return fmt.Errorf("release dispatch slot of task %s to %s: %w", taskID, l.Host, err)
	}
	return nil
}

// DeferredClaim is a claim to hand back unsent, to wait until NotBefore.
type DeferredClaim struct {
	ID        uuid.UUID
	Token     uuid.UUID
	NotBefore time.Time
}

// As DeferClaims (dispatch.go), each claim with a time of its own.
const queryDeferClaimsUntil = `-- name: DeferClaimsUntil
UPDATE tasks t SET status = CASE WHEN t.attempts > t.attempt_base + 1 THEN 'retrying' ELSE 'scheduled' END,
	attempts = t.attempts - 1, next_attempt_at = greatest(t.next_attempt_at, d.not_before),
	claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS d(id, token, not_before)
WHERE t.id = d.id AND t.status = 'dispatching' AND t.claim_token = d.token`

// DeferClaimsUntil hands claimed tasks back unsent, each to wait until its
// own NotBefore (or its due time, if later), in one statement: a rate limit
// defers hundreds of tasks at once, each to a slot of its own, and a commit
// apiece would take longer than the first slots are away. No attempt is
// spent; claims no longer held under their token are left alone.
func (db *DB) DeferClaimsUntil(ctx context.Context, claims []DeferredClaim) error {
	ids := make([]uuid.UUID, len(claims))
	tokens := make([]uuid.UUID, len(claims))
	notBefore := make([]time.Time, len(claims))
	for i, c := range claims {
		ids[i], tokens[i], notBefore[i] = c.ID, c.Token, c.NotBefore
	}
	if _, err := db.pool.Exec(ctx, queryDeferClaimsUntil, ids, tokens, notBefore); err != nil {
		return fmt.Errorf("defer %d claims: %w", len(claims), err)
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
