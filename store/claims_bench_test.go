package store_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/testenv"
	"github.com/hookwheel/hookwheel/store"
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
	db, err := store.Open(ctx, store.Config{DatabaseURL: testenv.DatabaseURL(b), MaxConns: 4})
	require.NoError(b, err)
	b.Cleanup(db.Close)
	secret := make([]byte, 32)
	_, err = rand.Read(secret)
	require.NoError(b, err)
	tenant := &model.Tenant{ID: uuid.Must(uuid.NewV7()), Name: "bench",
		SigningSecrets: []model.SigningSecret{{ID: "ss_bench", Value: "whsec_" + base64.StdEncoding.EncodeToString(secret), CreatedAt: time.Now()}}}
	require.NoError(b, db.CreateTenant(ctx, tenant, &model.APIKey{ID: "benchkey", SecretHash: []byte("hash"), Scopes: []model.Scope{model.ScopeAll}},
		model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.created"}))
	partitions := make([]int16, model.Partitions)
	for i := range partitions {
		partitions[i] = int16(i)
	}
	node := uuid.New()
	due := time.Now().Add(-time.Minute)
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		tasks := make([]*model.Task, claimBenchBatch)
		ids := make([]uuid.UUID, claimBenchBatch)
		for i := range tasks {
			tasks[i] = &model.Task{ID: uuid.Must(uuid.NewV7()), TenantID: tenant.ID, URL: "https://receiver.example/hooks/order",
				Method: "POST", Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"order": 42}`),
				RunAt: due, Timeout: 10 * time.Second, MaxAttempts: 10, MinBackoff: time.Second, MaxBackoff: time.Hour}
			ids[i] = tasks[i].ID
		}
		_, err := db.InsertTasks(ctx, tasks, time.Time{})
		require.NoError(b, err)
		before := processCPU(b)
		b.StartTimer()
		claimed, err := db.ClaimTasks(ctx, node, partitions, ids, time.Now(), 30*time.Second)
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
