package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// BenchmarkRecordAttempts records delivered attempts of one tenant a batch
// at a time, as a recorder does under load. Each op is one batch of
// recordBenchBatch claims, stored and claimed beforehand outside the timer.
// wal-B/task is the WAL the statement wrote per task, read from the
// server's insert position: meaningful on a server nothing else writes to.
func BenchmarkRecordAttempts(b *testing.B) {
	const recordBenchBatch = 100
	ctx := context.Background()
	db, pool := openDB(b)
	tenant := createTenant(b, db)
	partitions := allPartitions()
	registerNode(b, pool, testNode, time.Hour)
	due := time.Now().Add(-time.Minute)
	code := 200
	b.ReportAllocs()
	var wal int64
	for b.Loop() {
		b.StopTimer()
		tasks := make([]*model.Task, recordBenchBatch)
		for i := range tasks {
			tasks[i] = newTask(tenant.ID, due)
		}
		_, err := db.InsertTasks(ctx, tasks, time.Time{})
		require.NoError(b, err)
		claimed, err := db.ClaimTasks(ctx, testNode, partitions, taskIDs(tasks), time.Now(), 30*time.Second, nil)
		require.NoError(b, err)
		require.Len(b, claimed, recordBenchBatch)
		results := make([]model.AttemptResult, len(claimed))
		for i, c := range claimed {
			results[i] = recordFor(c, "success", &code, nil, model.StatusDelivered, nil)
		}
		before := walInsertPosition(b, pool)
		b.StartTimer()
		errs, err := db.RecordAttempts(ctx, results)
		b.StopTimer()
		wal += walInsertPosition(b, pool) - before
		b.StartTimer()
		require.NoError(b, err)
		for _, err := range errs {
			require.NoError(b, err)
		}
	}
	b.ReportMetric(float64(wal)/float64(b.N*recordBenchBatch), "wal-B/task")
}

// walInsertPosition is the server's current WAL insert position, in bytes.
func walInsertPosition(b *testing.B, pool *pgxpool.Pool) int64 {
	var pos int64
	require.NoError(b, pool.QueryRow(context.Background(),
		`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&pos))
	return pos
}
