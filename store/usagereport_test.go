package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestRecordAttemptsMetersOnce: the attempts a RecordAttempts statement
// records are added to their tenants' usage of the day, in either form of
// the statement, exactly once: recording the same claims again, or a claim
// no longer held, counts nothing.
func TestRecordAttemptsMetersOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	a, b := createTenant(t, db), createTenant(t, db)
	due := dbNow(t, pool).Add(-time.Minute)
	var ids []uuid.UUID
	for _, tn := range []*model.Tenant{a, a, a, b} {
		ids = append(ids, insertTask(t, db, tn.ID, due).ID)
	}
	registerNode(t, pool, testNode, time.Hour)
	claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), ids, dbNow(t, pool), 30*time.Second, nil)
	require.NoError(t, err)
	require.Len(t, claims, 4)
	byID := map[uuid.UUID]*model.ClaimedTask{}
	for _, c := range claims {
		byID[c.ID] = c
	}
	delivered := func(c *model.ClaimedTask, sent, received int64) model.AttemptResult {
		r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
		r.BytesSent, r.BytesReceived = sent, received
		return r
	}
	retryAt := µs(time.Now().Add(time.Hour))
	failed := recordFor(byID[ids[1]], "retry", ptr(503), ptr("receiver answered 503"), model.StatusRetrying, &retryAt)
	failed.BytesSent, failed.BytesReceived = 13, 7
	// The third is given back unsent: its claim no longer holds.
	require.NoError(t, db.DeferClaims(ctx, []model.DeferredClaim{{ID: ids[2], Token: byID[ids[2]].ClaimToken}}))
	plain := []model.AttemptResult{delivered(byID[ids[0]], 13, 100), failed,
		delivered(byID[ids[2]], 13, 1)}
	withCallback := delivered(byID[ids[3]], 13, 2)
	withCallback.Callback = callbackFor(t, byID[ids[3]], "https://receiver.example/done")

	for round := range 2 {
		errs, err := db.RecordAttempts(ctx, plain)
		require.NoError(t, err)
		lost := 0
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, model.ErrClaimLost)
				lost++
			}
		}
		require.Equal(t, []int{1, 3}[round], lost, "round %d", round)
		err = db.RecordAttempt(ctx, withCallback)
		if round == 1 {
			require.ErrorIs(t, err, model.ErrClaimLost)
		} else {
			require.NoError(t, err)
		}
	}

	today := dbNow(t, pool)
	for tn, want := range map[uuid.UUID]model.UsageCounts{
		a.ID: {TasksCreated: 3, Deliveries: 1, Attempts: 2, FailedAttempts: 1, BytesSent: 26, BytesReceived: 107},
		b.ID: {TasksCreated: 1, Deliveries: 1, Attempts: 1, BytesSent: 13, BytesReceived: 2},
	} {
		days, err := db.TenantUsage(ctx, tn, today.AddDate(0, 0, -3), today)
		require.NoError(t, err)
		require.Len(t, days, 1)
		require.Equal(t, want, days[0].UsageCounts)
		require.True(t, days[0].Date.Equal(time.Date(today.UTC().Year(), today.UTC().Month(), today.UTC().Day(), 0, 0, 0, 0, time.UTC)))
	}

	day, delivered2, err := db.DeliveriesToday(ctx, []uuid.UUID{a.ID, b.ID, uuid.New()})
	require.NoError(t, err)
	require.True(t, day.Equal(dateOf(today)))
	require.Len(t, delivered2, 3)
	require.EqualValues(t, 1, delivered2[a.ID])
	require.EqualValues(t, 1, delivered2[b.ID])
}

// TestUsageReportAndPurge: the operator's report sums each tenant's day over
// its shards, in (day, tenant) pages, names a tenant while it exists and
// keeps its rows once it is gone; the purge deletes the days before its
// cutoff in batches.
func TestUsageReportAndPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	a, b := createTenant(t, db), createTenant(t, db)
	gone := uuid.New() // a deleted tenant's rows: no tenant row
	today := dateOf(dbNow(t, pool))
	old := today.AddDate(0, 0, -model.UsageKeepDays-1)
	for _, row := range []struct {
		tenant uuid.UUID
		day    time.Time
		shard  int
		n      int
	}{
		{a.ID, today, 0, 2}, {a.ID, today, 5, 3}, {a.ID, today.AddDate(0, 0, -1), 17, 4},
		{b.ID, today, 1, 1}, {gone, today, 2, 7}, {gone, old, 3, 9}, {a.ID, old, 4, 9},
	} {
		exec(t, pool, `INSERT INTO usage_days (tenant_id, day, shard, tasks_created, deliveries) VALUES ($1, $2, $3, $4, $4)`,
			row.tenant, row.day, row.shard, row.n)
	}

	all, err := db.UsageReport(ctx, model.UsageReportFilter{From: today.AddDate(0, 0, -1), To: today, Limit: 100})
	require.NoError(t, err)
	require.Len(t, all, 4)
	require.True(t, all[0].Date.Equal(today.AddDate(0, 0, -1)))
	require.EqualValues(t, 4, all[0].Deliveries)
	named := 0
	for _, r := range all[1:] {
		require.True(t, r.Date.Equal(today))
		switch r.TenantID {
		case a.ID:
			require.EqualValues(t, 5, r.TasksCreated, "two shards summed")
			require.Equal(t, a.Name, *r.TenantName)
			named++
		case gone:
			require.Nil(t, r.TenantName)
			require.EqualValues(t, 7, r.Deliveries)
		}
	}
	require.Equal(t, 1, named)

	// Pages of two, then the rest after the cursor.
	page, err := db.UsageReport(ctx, model.UsageReportFilter{From: today.AddDate(0, 0, -1), To: today, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	rest, err := db.UsageReport(ctx, model.UsageReportFilter{From: today.AddDate(0, 0, -1), To: today, Limit: 100,
		AfterDate: page[1].Date, AfterTenant: page[1].TenantID})
	require.NoError(t, err)
	require.Equal(t, all[2:], rest)
	one, err := db.UsageReport(ctx, model.UsageReportFilter{From: old, To: today, TenantID: &gone, Limit: 100})
	require.NoError(t, err)
	require.Len(t, one, 2)

	n, err := db.PurgeUsage(ctx, today.AddDate(0, 0, -model.UsageKeepDays), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = db.PurgeUsage(ctx, today.AddDate(0, 0, -model.UsageKeepDays), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 5, countRows(t, pool, `SELECT count(*) FROM usage_days`))
}

// dateOf is t's UTC day at midnight UTC.
func dateOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
