package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestPurgerPrunesIdleTargetHealth: a target's record of failures goes
// once no attempt to it was reported for TargetHealthIdle; one tried
// within it stays.
func TestPurgerPrunesIdleTargetHealth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := storetest.DB(t)
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	idle, tried := "https://idle.example:443", "https://tried.example:443"
	_, err := db.RecordTargetHealth(ctx, model.TargetHealthReport{At: now, DisableAfter: 1000 * time.Hour, Reason: "failing",
		Failures: []model.TargetFailures{
			{TenantID: tenant, Target: idle, First: now.Add(-49 * time.Hour), Last: now.Add(-48 * time.Hour), LastError: "503"},
			{TenantID: tenant, Target: tried, First: now.Add(-49 * time.Hour), Last: now.Add(-time.Hour), LastError: "503"},
		},
	}, nil)
	require.NoError(t, err)

	fake := clock.NewFake(now)
	reg := prometheus.NewRegistry()
	p, err := NewPurger(PurgerConfig{
		Store: db, Clock: fake, Logger: quietLogger(), Registerer: reg, TargetHealthIdle: 24 * time.Hour,
		Interval: time.Minute, Leader: func() bool { return true },
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	require.NoError(t, fake.WaitForTimers(ctx, 1)) // the first pass has run
	require.Equal(t, 1.0, purged(t, reg, purgedHealth))
	n, err := db.PruneTargetHealth(ctx, now, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the tried target's record was still there")
}
