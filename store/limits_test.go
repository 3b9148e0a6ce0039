package store_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

func ptrTo[T any](v T) *T { return &v }

// TestTenantLimits: limits are stored whole with the tenant, come back with
// it wherever a tenant is read (authentication included), and are replaced
// whole.
func TestTenantLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, keyID := createTenantWithKey(t, db)

	got, err := db.GetTenant(ctx, tenant.ID)
	require.NoError(t, err)
	require.True(t, got.Limits.Unset(), "a new tenant is unlimited")

	limits := model.Limits{
		APIRate: 2.5, APIBurst: 5, MaxPendingTasks: 100, DispatchRate: 20, DispatchConcurrency: 4,
		Targets: map[string]model.TargetLimits{
			"api.partner.com": {DispatchRate: ptrTo(0.5)},
			"slow.example":    {DispatchConcurrency: ptrTo(0)},
		},
	}
	set, err := db.SetTenantLimits(ctx, tenant.ID, limits, model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.limits_changed"})
	require.NoError(t, err)
	require.Equal(t, limits, set.Limits)
	require.Equal(t, tenant.Name, set.Name)

	got, err = db.GetTenant(ctx, tenant.ID)
	require.NoError(t, err)
	require.Equal(t, limits, got.Limits)
	_, authed, err := db.GetAPIKey(ctx, keyID)
	require.NoError(t, err)
	require.Equal(t, limits, authed.Limits, "authentication reads the limits with the tenant")
	only, err := db.TenantLimits(ctx, tenant.ID)
	require.NoError(t, err)
	require.Equal(t, limits, only)

	set, err = db.SetTenantLimits(ctx, tenant.ID, model.Limits{MaxPendingTasks: 1}, model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.limits_changed"})
	require.NoError(t, err)
	require.Equal(t, model.Limits{MaxPendingTasks: 1}, set.Limits, "replaced as a whole")

	_, err = db.SetTenantLimits(ctx, uuid.New(), limits, model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.limits_changed"})
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = db.TenantLimits(ctx, uuid.New())
	require.ErrorIs(t, err, model.ErrNotFound)
}

// TestCountPendingTasks: scheduled, retrying and dispatching tasks count,
// finished ones and other tenants' do not; a bound stops the count.
func TestCountPendingTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)
	now := dbNow(t, pool)
	statuses := []string{"scheduled", "scheduled", "scheduled", "retrying", "dispatching", "delivered", "dead", "canceled"}
	for _, status := range statuses {
		task := insertTask(t, db, acme.ID, now.Add(time.Hour))
		exec(t, pool, `UPDATE tasks SET status = $2 WHERE id = $1`, task.ID, status)
	}
	insertTask(t, db, other.ID, now.Add(time.Hour))
	keyed := newTask(other.ID, now)
	keyed.IdempotencyKey = ptrTo("order-42")
	_, created, err := db.InsertTask(ctx, keyed, false)
	require.NoError(t, err)
	require.True(t, created)

	tests := []struct {
		tenant uuid.UUID
		upTo   int
		want   int
	}{
		{acme.ID, 0, 5},
		{acme.ID, 2, 2},
		{acme.ID, 5, 5},
		{acme.ID, 100, 5},
		{other.ID, 0, 2},
		{uuid.New(), 0, 0},
	}
	for _, tt := range tests {
		n, err := db.CountPendingTasks(ctx, tt.tenant, tt.upTo)
		require.NoError(t, err)
		require.Equal(t, tt.want, n, "tenant %s up to %d", tt.tenant, tt.upTo)
	}

	ok, err := db.HasIdempotencyKey(ctx, other.ID, "order-42")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = db.HasIdempotencyKey(ctx, acme.ID, "order-42")
	require.NoError(t, err)
	require.False(t, ok, "keys are per tenant")
}

// redisNow is Redis's clock in Unix microseconds: the limiters run on it.
func redisNow(t *testing.T, raw *redis.Client) int64 {
	t.Helper()
	now, err := raw.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMicro()
}

func getMicros(t *testing.T, raw *redis.Client, key string) int64 {
	t.Helper()
	v, err := raw.Get(context.Background(), key).Int64()
	require.NoError(t, err, key)
	return v
}

// requireHashTag checks that every key is "<prefix>{<tag>}:..." with the tag given.
func requireHashTag(t *testing.T, keys []string, prefix, tag string) {
	t.Helper()
	require.NotEmpty(t, keys)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, prefix+"{"+tag+"}:"), "key %s has hash tag %q", k, tag)
	}
}

// TestAllowAPIRequest: a burst passes at once, then one request per interval;
// a refusal says when to come back and costs nothing; tenants are apart.
func TestAllowAPIRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	acme, other := uuid.New(), uuid.New()
	const rate, burst = 0.1, 3 // one per 10 s: the test's own pace cannot matter
	interval := 10 * time.Second

	for i := range burst {
		d, err := r.AllowAPIRequest(ctx, acme, rate, burst)
		require.NoError(t, err)
		require.True(t, d.Allowed, "request %d of the burst", i+1)
		require.Equal(t, burst, d.Limit)
		require.Equal(t, burst-1-i, d.Remaining)
		require.InDelta(t, float64(time.Duration(i+1)*interval), float64(d.Reset), float64(time.Second))
		require.Zero(t, d.RetryAfter)
	}
	key := prefix + "{" + acme.String() + "}:api_rate"
	tat := getMicros(t, raw, key)
	for range 2 {
		d, err := r.AllowAPIRequest(ctx, acme, rate, burst)
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.Zero(t, d.Remaining)
		require.InDelta(t, float64(interval), float64(d.RetryAfter), float64(time.Second))
		require.InDelta(t, float64(3*interval), float64(d.Reset), float64(time.Second))
		require.Equal(t, tat, getMicros(t, raw, key), "a refusal changes nothing")
	}
	ttl := raw.PTTL(ctx, key).Val()
	require.Greater(t, ttl, 25*time.Second)
	require.LessOrEqual(t, ttl, 31*time.Second, "the key lives only as long as it says anything")

	d, err := r.AllowAPIRequest(ctx, other, rate, burst)
	require.NoError(t, err)
	require.True(t, d.Allowed, "another tenant has its own limit")
	require.Equal(t, burst-1, d.Remaining)

	// One interval later (its theoretical arrival time moved back by one
	// interval), exactly one more passes.
	require.NoError(t, raw.Set(ctx, key, strconv.FormatInt(tat-interval.Microseconds(), 10), time.Minute).Err())
	d, err = r.AllowAPIRequest(ctx, acme, rate, burst)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Zero(t, d.Remaining)
	d, err = r.AllowAPIRequest(ctx, acme, rate, burst)
	require.NoError(t, err)
	require.False(t, d.Allowed)

	requireHashTag(t, []string{key}, prefix, acme.String())

	for _, bad := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		_, err := r.AllowAPIRequest(ctx, acme, bad.rate, bad.burst)
		require.Error(t, err, "rate %v burst %d", bad.rate, bad.burst)
	}
}

// TestAdmitDispatchRate: tasks falling due together get successive slots one
// interval apart, in the order they ask; a task coming back for its slot
// uses it without booking another; one coming back too late books anew.
// Slots are on the dispatchers' clock, which the test plays.
func TestAdmitDispatchRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	limit := model.DispatchLimit{TenantID: uuid.New(), Host: "api.partner.com", Rate: 20}
	const interval = 50 * time.Millisecond
	base := prefix + "{" + limit.TenantID.String() + "/" + limit.Host + "}:"
	scheduleKey := base + "dispatch_rate"
	slotKey := func(id uuid.UUID) string { return base + "dispatch_slot:" + id.String() + ":0" }
	t0 := time.Now().Truncate(time.Millisecond)
	admit := func(task uuid.UUID, at time.Time) model.DispatchAdmission {
		t.Helper()
		a, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: task, Token: uuid.New(), At: at})
		require.NoError(t, err)
		return a
	}

	tasks := make([]uuid.UUID, 5)
	for i := range tasks {
		tasks[i] = uuid.New()
		a := admit(tasks[i], t0)
		if i == 0 {
			require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchNow}, a, "the first goes at once")
			require.Zero(t, raw.Exists(ctx, slotKey(tasks[i])).Val(), "and reserves nothing")
			continue
		}
		require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchLater, Wait: time.Duration(i) * interval}, a, "task %d", i)
		require.Equal(t, t0.Add(time.Duration(i)*interval).UnixMicro(), getMicros(t, raw, slotKey(tasks[i])), "task %d keeps its slot", i)
	}
	schedule := getMicros(t, raw, scheduleKey)
	require.Equal(t, t0.Add(5*interval).UnixMicro(), schedule)

	// Back early: told to wait for the same slot; nothing is booked.
	require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchLater, Wait: 80 * time.Millisecond}, admit(tasks[2], t0.Add(20*time.Millisecond)))
	require.Equal(t, schedule, getMicros(t, raw, scheduleKey))

	// Back at its slot (or a hair before, or a little after): sent, the slot
	// used up, nothing booked.
	require.Equal(t, model.DispatchNow, admit(tasks[1], t0.Add(interval)).Outcome)
	require.Zero(t, raw.Exists(ctx, slotKey(tasks[1])).Val())
	require.Equal(t, model.DispatchNow, admit(tasks[2], t0.Add(2*interval-500*time.Microsecond)).Outcome)
	require.Equal(t, model.DispatchNow, admit(tasks[3], t0.Add(3*interval+20*time.Millisecond)).Outcome)
	require.Equal(t, schedule, getMicros(t, raw, scheduleKey))

	// Back a second late: its successors have gone meanwhile, so it takes
	// the next free slot, behind every task that asked before.
	late := t0.Add(4*interval + time.Second)
	require.Equal(t, model.DispatchNow, admit(tasks[4], late).Outcome, "the schedule is behind it by then")
	require.Equal(t, late.Add(interval).UnixMicro(), getMicros(t, raw, scheduleKey))
	require.Zero(t, raw.Exists(ctx, slotKey(tasks[4])).Val())

	keys, err := raw.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	requireHashTag(t, keys, prefix, limit.TenantID.String()+"/"+limit.Host)

	// Another host of the same tenant has a schedule of its own.
	a, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: model.DispatchLimit{TenantID: limit.TenantID, Host: "other.example", Rate: 20},
		TaskID: uuid.New(), Token: uuid.New(), At: t0})
	require.NoError(t, err)
	require.Equal(t, model.DispatchNow, a.Outcome)
}

// TestAdmitDispatchLateLosesSlot: a task back later than the grace (half an
// interval) after its slot takes a new one, so that it cannot
// crowd the sends after it.
func TestAdmitDispatchLateLosesSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, _, _ := openRedis(t)
	limit := model.DispatchLimit{TenantID: uuid.New(), Host: "late.example", Rate: 20}
	t0 := time.Now().Truncate(time.Millisecond)
	admit := func(task uuid.UUID, at time.Time) model.DispatchAdmission {
		t.Helper()
		a, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: task, Token: uuid.New(), At: at})
		require.NoError(t, err)
		return a
	}
	first, second, third := uuid.New(), uuid.New(), uuid.New()
	require.Equal(t, model.DispatchNow, admit(first, t0).Outcome)
	require.Equal(t, 50*time.Millisecond, admit(second, t0).Wait)
	require.Equal(t, 100*time.Millisecond, admit(third, t0).Wait)
	require.Equal(t, 25*time.Millisecond, model.DispatchGrace(20))

	// The second comes back 60 ms after its slot, when the third's is 10 ms
	// away: sending it now would put two sends 10 ms apart. It queues again.
	require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchLater, Wait: 40 * time.Millisecond},
		admit(second, t0.Add(110*time.Millisecond)))
	require.Equal(t, model.DispatchNow, admit(third, t0.Add(100*time.Millisecond)).Outcome)
}

// TestAdmitDispatchConcurrency: a semaphore across callers; a slot comes back
// when released, or when its holder's lease runs out.
func TestAdmitDispatchConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	limit := model.DispatchLimit{TenantID: uuid.New(), Host: "slow.example", Concurrency: 2}
	inflightKey := prefix + "{" + limit.TenantID.String() + "/" + limit.Host + "}:inflight"
	type holder struct{ task, token uuid.UUID }
	newHolder := func() holder { return holder{uuid.New(), uuid.New()} }
	admit := func(h holder) model.DispatchOutcome {
		t.Helper()
		a, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: h.task, Token: h.token, Lease: time.Minute})
		require.NoError(t, err)
		return a.Outcome
	}
	a, b, c, d := newHolder(), newHolder(), newHolder(), newHolder()

	require.Equal(t, model.DispatchNow, admit(a))
	require.Equal(t, model.DispatchNow, admit(b))
	require.Equal(t, model.DispatchBusy, admit(c))
	require.Equal(t, model.DispatchNow, admit(a), "a holder asking again keeps its slot")
	require.Equal(t, int64(2), raw.ZCard(ctx, inflightKey).Val())
	ttl := raw.PTTL(ctx, inflightKey).Val()
	require.Greater(t, ttl, 55*time.Second, "the set outlives its leases")

	require.NoError(t, r.ReleaseDispatch(ctx, limit, a.task, a.token))
	require.NoError(t, r.ReleaseDispatch(ctx, limit, a.task, a.token), "releasing twice is harmless")
	require.Equal(t, model.DispatchNow, admit(c))
	require.Equal(t, model.DispatchBusy, admit(d))

	// b's node died: its lease runs out and its slot comes back.
	require.NoError(t, raw.ZAdd(ctx, inflightKey, redis.Z{Score: float64(redisNow(t, raw) - 1), Member: b.task.String() + ":" + b.token.String()}).Err())
	require.Equal(t, model.DispatchNow, admit(d))
	require.Equal(t, int64(2), raw.ZCard(ctx, inflightKey).Val())

	// A holder with a shorter lease does not shorten the set's life.
	_, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: model.DispatchLimit{TenantID: limit.TenantID, Host: limit.Host, Concurrency: 3},
		TaskID: uuid.New(), Token: uuid.New(), Lease: time.Second})
	require.NoError(t, err)
	require.Greater(t, raw.PTTL(ctx, inflightKey).Val(), 55*time.Second)
}

// TestAdmitDispatchBothLimits: a refusal by one limit takes nothing from the
// other: a busy target reserves no rate slot, and a task told to come back
// later holds no concurrency slot meanwhile.
func TestAdmitDispatchBothLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	// One a second: the second's slot is still ahead when it asks, however
	// slow the machine is between the calls.
	limit := model.DispatchLimit{TenantID: uuid.New(), Host: "both.example", Rate: 1, Concurrency: 1}
	base := prefix + "{" + limit.TenantID.String() + "/" + limit.Host + "}:"
	first, second, third := uuid.New(), uuid.New(), uuid.New()

	a, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: first, Token: first, Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, model.DispatchNow, a.Outcome)
	schedule := getMicros(t, raw, base+"dispatch_rate")

	a, err = r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: second, Token: second, Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, model.DispatchBusy, a.Outcome)
	require.Equal(t, schedule, getMicros(t, raw, base+"dispatch_rate"), "busy: no rate slot taken")
	require.Zero(t, raw.Exists(ctx, base+"dispatch_slot:"+second.String()+":0").Val())

	require.NoError(t, r.ReleaseDispatch(ctx, limit, first, first))
	a, err = r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: second, Token: second, Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, model.DispatchLater, a.Outcome)
	require.Zero(t, raw.ZCard(ctx, base+"inflight").Val(), "waiting for its slot, it holds no concurrency slot")

	a, err = r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: third, Token: third, Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, model.DispatchLater, a.Outcome, "and the next in line books the slot after")
	require.Greater(t, a.Wait, 50*time.Millisecond)
}

// TestAdmitDispatches: a batch decided in one round trip, in order, each for
// the instant it is meant to leave (claimed a moment before it is due).
func TestAdmitDispatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	limit := model.DispatchLimit{TenantID: uuid.New(), Host: "batch.example", Rate: 20}
	const interval = 50 * time.Millisecond
	due := time.Now().Add(200 * time.Millisecond).Truncate(time.Millisecond)
	reqs := make([]model.DispatchRequest, 5)
	for i := range reqs {
		reqs[i] = model.DispatchRequest{Limit: limit, TaskID: uuid.New(), Token: uuid.New(), At: due}
	}
	got, err := r.AdmitDispatches(ctx, reqs)
	require.NoError(t, err)
	require.Len(t, got, len(reqs))
	require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchNow}, got[0], "the first leaves when due")
	for i := 1; i < len(got); i++ {
		require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchLater, Wait: time.Duration(i) * interval}, got[i],
			"one interval apart, in the order asked")
	}
	require.Equal(t, due.Add(5*interval).UnixMicro(), getMicros(t, raw, prefix+"{"+limit.TenantID.String()+"/"+limit.Host+"}:dispatch_rate"))

	// Someone asking for right now queues behind them.
	now := due.Add(-200 * time.Millisecond)
	a, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: limit, TaskID: uuid.New(), Token: uuid.New(), At: now})
	require.NoError(t, err)
	require.Equal(t, model.DispatchAdmission{Outcome: model.DispatchLater, Wait: 450 * time.Millisecond}, a)

	// Unlimited asks change nothing; an empty batch is fine.
	got, err = r.AdmitDispatches(ctx, []model.DispatchRequest{{Limit: model.DispatchLimit{TenantID: limit.TenantID, Host: "free.example"}, TaskID: uuid.New()}})
	require.NoError(t, err)
	require.Equal(t, model.DispatchNow, got[0].Outcome)
	got, err = r.AdmitDispatches(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestDeferClaimsEachAtItsTime: claims handed back in one statement, each due at its
// own time, with no attempt spent; a claim held under another token is left.
func TestDeferClaimsEachAtItsTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)
	tasks := []*model.Task{
		insertTask(t, db, tenant.ID, now.Add(-time.Minute)),
		insertTask(t, db, tenant.ID, now.Add(-time.Minute)),
		insertTask(t, db, tenant.ID, now.Add(-time.Minute)),
	}
	exec(t, pool, `UPDATE tasks SET status = 'retrying', attempts = 2 WHERE id = $1`, tasks[1].ID)
	ids := []uuid.UUID{tasks[0].ID, tasks[1].ID, tasks[2].ID}
	claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), ids, now, 30*time.Second, nil)
	require.NoError(t, err)
	require.Len(t, claims, 3)
	token := claims[0].ClaimToken

	later := []time.Time{µs(now.Add(time.Second)), µs(now.Add(2 * time.Second)), µs(now.Add(3 * time.Second))}
	require.NoError(t, db.DeferClaims(ctx, []model.DeferredClaim{
		{ID: tasks[0].ID, Token: token, NotBefore: later[0]},
		{ID: tasks[1].ID, Token: token, NotBefore: later[1]},
		{ID: tasks[2].ID, Token: uuid.New(), NotBefore: later[2]},
	}))
	row := readTaskRow(t, pool, tasks[0].ID)
	require.Equal(t, "scheduled", row.Status)
	require.Zero(t, row.Attempts)
	require.Nil(t, row.ClaimToken)
	require.Equal(t, later[0].UnixMicro(), row.NextAttemptAt.UnixMicro())
	row = readTaskRow(t, pool, tasks[1].ID)
	require.Equal(t, "retrying", row.Status)
	require.Equal(t, 2, row.Attempts, "no attempt spent")
	require.Equal(t, later[1].UnixMicro(), row.NextAttemptAt.UnixMicro())
	row = readTaskRow(t, pool, tasks[2].ID)
	require.Equal(t, "dispatching", row.Status, "another token's claim is left alone")
	require.NoError(t, db.DeferClaims(ctx, nil))
}

// BenchmarkRateLimiter measures limiter decisions per second against the real
// Redis: each is one EVALSHA round trip, from many goroutines at once as API
// handlers and senders make them (dispatch_concurrency: a take and a give
// back, two round trips), or one pipelined round trip per batch of claims.
func BenchmarkRateLimiter(b *testing.B) {
	ctx := context.Background()
	r, err := store.OpenRedis(store.RedisConfig{URL: storetest.RedisURL(), KeyPrefix: storetest.RedisPrefix(b)})
	require.NoError(b, err)
	b.Cleanup(func() { _ = r.Close() })
	require.NoError(b, r.Ping(ctx))
	tenants := make([]uuid.UUID, 64)
	for i := range tenants {
		tenants[i] = uuid.New()
	}

	run := func(b *testing.B, decide func(i int) error) {
		var next atomic.Int64
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := decide(int(next.Add(1))); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	}
	b.Run("api", func(b *testing.B) {
		run(b, func(i int) error {
			_, err := r.AllowAPIRequest(ctx, tenants[i%len(tenants)], 1000, 100)
			return err
		})
	})
	b.Run("dispatch_rate", func(b *testing.B) {
		run(b, func(i int) error {
			l := model.DispatchLimit{TenantID: tenants[i%len(tenants)], Host: "bench.example", Rate: 1e6}
			_, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: l, TaskID: uuid.New(), Token: uuid.Nil, Lease: time.Minute})
			return err
		})
	})
	// As the claimers ask: a batch of 128 claimed tasks in one pipelined
	// round trip (b.N counts decisions, not batches).
	b.Run("dispatch_rate_batch128", func(b *testing.B) {
		const batch = 128
		reqs := make([]model.DispatchRequest, batch)
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			at := time.Now()
			for i := range reqs {
				reqs[i] = model.DispatchRequest{Limit: model.DispatchLimit{TenantID: tenants[(done+i)%len(tenants)], Host: "bench.example", Rate: 1e6},
					TaskID: uuid.New(), At: at}
			}
			if _, err := r.AdmitDispatches(ctx, reqs[:min(batch, b.N-done)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("dispatch_concurrency", func(b *testing.B) {
		run(b, func(i int) error {
			l := model.DispatchLimit{TenantID: tenants[i%len(tenants)], Host: "bench.example", Concurrency: 1 << 20}
			task := uuid.New()
			if _, err := r.AdmitDispatch(ctx, model.DispatchRequest{Limit: l, TaskID: task, Token: uuid.Nil, Lease: time.Minute}); err != nil {
				return err
			}
			return r.ReleaseDispatch(ctx, l, task, uuid.Nil)
		})
	})
}
