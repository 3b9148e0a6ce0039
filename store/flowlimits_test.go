package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func TestFlowLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)

	limit := &model.FlowLimit{TenantID: acme.ID, Key: "customer-1", Rate: 10, Period: time.Minute, Parallelism: 2}
	created, err := db.PutFlowLimit(ctx, limit, 5, nil)
	require.NoError(t, err)
	require.True(t, created)
	require.False(t, limit.CreatedAt.IsZero())
	require.Equal(t, limit.CreatedAt, limit.UpdatedAt)

	got, err := db.GetFlowLimit(ctx, acme.ID, "customer-1")
	require.NoError(t, err)
	require.Equal(t, limit, got)
	_, err = db.GetFlowLimit(ctx, other.ID, "customer-1")
	require.ErrorIs(t, err, model.ErrNotFound, "another tenant's key")
	_, err = db.GetFlowLimit(ctx, acme.ID, "Customer-1")
	require.ErrorIs(t, err, model.ErrNotFound, "keys are compared byte for byte")

	// The same key again replaces its limits whole.
	replaced := &model.FlowLimit{TenantID: acme.ID, Key: "customer-1", Parallelism: 5, Period: time.Second}
	created, err = db.PutFlowLimit(ctx, replaced, 5, nil)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, limit.CreatedAt, replaced.CreatedAt)
	require.Zero(t, replaced.Rate)
	require.Equal(t, 5, replaced.Parallelism)

	// A limit that limits nothing cannot be stored, whoever asks.
	_, err = db.PutFlowLimit(ctx, &model.FlowLimit{TenantID: acme.ID, Key: "nothing", Period: time.Second}, 5, nil)
	require.Error(t, err)

	// Listing walks the keys in byte order, a page at a time.
	for _, key := range []string{"b", "A", "*", "a"} {
		_, err := db.PutFlowLimit(ctx, &model.FlowLimit{TenantID: acme.ID, Key: key, Rate: 1, Period: time.Second}, 5, nil)
		require.NoError(t, err)
	}
	var keys []string
	var after *string
	for {
		page, err := db.ListFlowLimits(ctx, acme.ID, model.FlowLimitFilter{After: after, Limit: 2})
		require.NoError(t, err)
		for _, l := range page {
			keys = append(keys, l.Key)
		}
		if len(page) < 2 {
			break
		}
		after = &page[len(page)-1].Key
	}
	require.Equal(t, []string{"*", "A", "a", "b", "customer-1"}, keys)

	// Five keys is the quota here: a sixth is refused, a replacement is not,
	// and another tenant has its own.
	_, err = db.PutFlowLimit(ctx, &model.FlowLimit{TenantID: acme.ID, Key: "f", Rate: 1, Period: time.Second}, 5, nil)
	require.ErrorIs(t, err, model.ErrFlowLimitQuota)
	_, err = db.PutFlowLimit(ctx, &model.FlowLimit{TenantID: acme.ID, Key: "a", Rate: 2, Period: time.Second}, 5, nil)
	require.NoError(t, err)
	_, err = db.PutFlowLimit(ctx, &model.FlowLimit{TenantID: other.ID, Key: "f", Rate: 1, Period: time.Second}, 5, nil)
	require.NoError(t, err)
	theirs, err := db.ListFlowLimits(ctx, other.ID, model.FlowLimitFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, theirs, 1)

	deleted, err := db.DeleteFlowLimit(ctx, acme.ID, "customer-1", nil)
	require.NoError(t, err)
	require.Equal(t, replaced, deleted)
	_, err = db.DeleteFlowLimit(ctx, acme.ID, "customer-1", nil)
	require.ErrorIs(t, err, model.ErrNotFound)
}

// TestClaimReadsFlowLimits: a claim carries its task's flow limits: the
// key's own over the tenant's default, the default for a key without its
// own, none for a task without a key or a tenant without either; and what
// the tenant changes applies to the next claim.
func TestClaimReadsFlowLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)
	put := func(tenant uuid.UUID, key string, rate int, period time.Duration, parallelism int) {
		t.Helper()
		_, err := db.PutFlowLimit(ctx, &model.FlowLimit{TenantID: tenant, Key: key, Rate: rate, Period: period, Parallelism: parallelism}, 10, nil)
		require.NoError(t, err)
	}
	put(acme.ID, "own", 10, time.Minute, 3)
	put(acme.ID, model.DefaultFlowKey, 5, time.Second, 0)
	put(other.ID, "own", 1, time.Hour, 1)

	claimWithKey := func(tenant uuid.UUID, key *string) *model.ClaimedTask {
		t.Helper()
		task := newTask(tenant, dbNow(t, pool).Add(-time.Minute))
		task.FlowKey = key
		_, created, err := db.InsertTask(ctx, task, false)
		require.NoError(t, err)
		require.True(t, created)
		stored, err := db.GetTask(ctx, tenant, task.ID)
		require.NoError(t, err)
		require.Equal(t, key, stored.FlowKey, "the task reads back with its key")
		return claimOne(t, db, pool, task.ID)
	}

	cases := []struct {
		name   string
		tenant uuid.UUID
		key    *string
		want   model.FlowLimit
	}{
		{"own limits", acme.ID, ptr("own"), model.FlowLimit{TenantID: acme.ID, Key: "own", Rate: 10, Period: time.Minute, Parallelism: 3}},
		{"the default", acme.ID, ptr("unset"), model.FlowLimit{TenantID: acme.ID, Key: "unset", Rate: 5, Period: time.Second}},
		{"no key", acme.ID, nil, model.FlowLimit{}},
		{"another tenant's own", other.ID, ptr("own"), model.FlowLimit{TenantID: other.ID, Key: "own", Rate: 1, Period: time.Hour, Parallelism: 1}},
		{"no default", other.ID, ptr("unset"), model.FlowLimit{}},
	}
	for _, tc := range cases {
		c := claimWithKey(tc.tenant, tc.key)
		require.Equal(t, tc.want, c.Flow, tc.name)
		require.Equal(t, tc.key, c.FlowKey, tc.name)
	}

	// Lifting the key's own limits leaves it to the default from the next claim on.
	_, err := db.DeleteFlowLimit(ctx, acme.ID, "own", nil)
	require.NoError(t, err)
	c := claimWithKey(acme.ID, ptr("own"))
	require.Equal(t, model.FlowLimit{TenantID: acme.ID, Key: "own", Rate: 5, Period: time.Second}, c.Flow)
}

// TestFlowKeysOnEveryInsert: the flow key is stored by a batch's insert and
// carried by a schedule to its occurrences.
func TestFlowKeysOnEveryInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	keyed, plain := newTask(tenant.ID, time.Now().Add(time.Hour)), newTask(tenant.ID, time.Now().Add(time.Hour))
	keyed.FlowKey = ptr("batch-key")
	results, err := db.InsertTasks(ctx, []*model.Task{keyed, plain}, time.Now())
	require.NoError(t, err)
	require.Len(t, results, 2)
	for _, want := range []*model.Task{keyed, plain} {
		got, err := db.GetTask(ctx, tenant.ID, want.ID)
		require.NoError(t, err)
		require.Equal(t, want.FlowKey, got.FlowKey)
	}

	now := dbNow(t, pool)
	next := now.Add(-time.Second)
	sc := &model.Schedule{ID: uuid.Must(uuid.NewV7()), TenantID: tenant.ID, Cron: "* * * * *", Timezone: "UTC",
		URL: "https://receiver.example/hooks", Method: "POST", Timeout: 10 * time.Second, MaxAttempts: 3,
		MinBackoff: time.Second, MaxBackoff: time.Minute, FlowKey: ptr("schedule-key"), NextRunAt: &next, CreatedAt: now}
	require.NoError(t, db.InsertSchedule(ctx, sc, nil))
	got, err := db.GetSchedule(ctx, tenant.ID, sc.ID)
	require.NoError(t, err)
	require.Equal(t, sc.FlowKey, got.FlowKey)

	done, err := db.MaterializeSchedules(ctx, model.MaterializeParams{
		Partitions: allPartitions(), Until: now, Limit: 10, NotifyUntil: now,
	}, func(s *model.Schedule) model.OccurrencePlan {
		return model.OccurrencePlan{Occurrences: []time.Time{*s.NextRunAt}, Next: ptr(s.NextRunAt.Add(time.Minute))}
	})
	require.NoError(t, err)
	require.Len(t, done.Created, 1)
	occurrence, err := db.GetTask(ctx, tenant.ID, done.Created[0].ID)
	require.NoError(t, err)
	require.Equal(t, ptr("schedule-key"), occurrence.FlowKey)

	// A change of the schedule changes it for later occurrences.
	updated, _, err := db.UpdateSchedule(ctx, tenant.ID, sc.ID, func(s *model.Schedule) (*model.Schedule, error) {
		changed := *s
		changed.FlowKey = ptr("another-key")
		return &changed, nil
	}, nil)
	require.NoError(t, err)
	require.Equal(t, ptr("another-key"), updated.FlowKey)
}
