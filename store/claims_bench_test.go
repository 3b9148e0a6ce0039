package store_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// BenchmarkClaimTasks claims due tasks of one tenant a batch at a time, as
// a claimer does in a burst: the statement, and reading the claimed rows
// (their headers and the tenant's signing secrets included). Each op is one
// batch of claimBenchBatch tasks, stored beforehand outside the timer.
// ns/op is mostly Postgres; node-cpu-µs/op is what the claiming process
// itself spent (user and system CPU), the part a node pays.
func BenchmarkClaimTasks(b *testing.B) {
	const claimBenchBatch = 100
	ctx := context.Background()
	db, _ := openDB(b)
	tenant := createTenant(b, db)
	partitions := allPartitions()
	node := uuid.New()
	due := time.Now().Add(-time.Minute)
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		tasks := make([]*model.Task, claimBenchBatch)
		ids := make([]uuid.UUID, claimBenchBatch)
		for i := range tasks {
			tasks[i] = newTask(tenant.ID, due)
			tasks[i].Headers = map[string]string{"Content-Type": "application/json"}
			ids[i] = tasks[i].ID
		}
		_, err := db.InsertTasks(ctx, tasks, time.Time{})
		require.NoError(b, err)
		before := processCPU(b)
		b.StartTimer()
		claimed, err := db.ClaimTasks(ctx, node, partitions, ids, time.Now(), 30*time.Second, nil)
		b.StopTimer()
		cpu += processCPU(b) - before
		b.StartTimer()
		require.NoError(b, err)
		require.Len(b, claimed, claimBenchBatch)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "node-cpu-µs/op")
}

// processCPU is the user and system CPU this process has spent.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
