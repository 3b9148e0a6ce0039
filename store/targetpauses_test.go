package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestTargetKeyInPostgres: hookwheel_target_key, which the claim computes
// for the tasks of tenants with a paused target, agrees with the
// dispatcher's model.TargetKey on every form of URL a task may have.
func TestTargetKeyInPostgres(t *testing.T) {
	t.Parallel()
	_, pool := openDB(t)
	for _, raw := range []string{
		"https://example.com/hooks",
		"https://EXAMPLE.com:8443/a?b=c",
		"http://example.com",
		"HTTP://Example.COM:80/",
		"https://[2001:DB8::1]:8443/x",
		"https://[::1]/x",
		"http://127.0.0.1:9000/in",
		"https://example.com?x=1",
		"https://example.com#frag",
	} {
		var got string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT hookwheel_target_key($1)`, raw).Scan(&got))
		require.Equal(t, model.TargetKey(raw), got, raw)
	}
}

// TestTargetPauses: a pause holds the tenant's tasks to that target alone
// out of claims (no attempt counted) and out of the sweep's listing; a
// second pause keeps the first as it was; a resume returns it, and a resume
// of a target not paused is not found.
func TestTargetPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)
	due := dbNow(t, pool).Add(-time.Minute)
	paused := storetest.InsertTask(t, db, acme.ID, "https://Partner.example/hooks/1", due)
	pausedToo := storetest.InsertTask(t, db, acme.ID, "https://partner.example:443/other?x=1", due)
	otherPort := storetest.InsertTask(t, db, acme.ID, "https://partner.example:8443/hooks", due)
	otherTenant := storetest.InsertTask(t, db, other.ID, "https://partner.example/hooks", due)

	at := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	audit := &model.AuditEntry{TenantID: &acme.ID, Actor: model.ActorOperator, Action: "target.paused"}
	p, created, err := db.PauseTarget(ctx, &model.TargetPause{TenantID: acme.ID, Target: "https://partner.example:443",
		PausedAt: at, PausedBy: model.PausedByTenant, Reason: "migration"}, audit)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "migration", p.Reason)
	require.True(t, at.Equal(p.PausedAt))
	again, created, err := db.PauseTarget(ctx, &model.TargetPause{TenantID: acme.ID, Target: "https://partner.example:443",
		PausedAt: at.Add(time.Hour), PausedBy: model.PausedByHookwheel, Reason: "failing"}, nil)
	require.NoError(t, err)
	require.False(t, created, "a target paused already keeps its pause")
	require.Equal(t, model.PausedByTenant, again.PausedBy)
	require.True(t, at.Equal(again.PausedAt))
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'target.paused'`))

	list, err := db.ListTargetPauses(ctx, acme.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	none, err := db.ListTargetPauses(ctx, other.ID)
	require.NoError(t, err)
	require.Empty(t, none)
	all, err := db.PausedTargets(ctx)
	require.NoError(t, err)
	require.Equal(t, []model.PausedTarget{{TenantID: acme.ID, Target: "https://partner.example:443"}}, all)

	held := &model.Held{TargetTenants: []uuid.UUID{acme.ID},
		Targets: []string{model.HeldTargetKey(acme.ID, "https://partner.example:443")}}
	swept, err := db.ListDueExcept(ctx, allPartitions(), model.DueCursor{}, dbNow(t, pool), 100, held)
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{otherPort.ID, otherTenant.ID}, dueIDs(swept))
	ids := []uuid.UUID{paused.ID, pausedToo.ID, otherPort.ID, otherTenant.ID}
	claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), ids, dbNow(t, pool), 30*time.Second, held)
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{otherPort.ID, otherTenant.ID}, claimIDs(claims))
	for _, id := range []uuid.UUID{paused.ID, pausedToo.ID} {
		row := readTaskRow(t, pool, id)
		require.Zero(t, row.Attempts, "a paused target's task counts no attempt")
	}

	resumed, err := db.ResumeTarget(ctx, acme.ID, "https://partner.example:443", at, nil)
	require.NoError(t, err)
	require.Equal(t, "migration", resumed.Reason)
	_, err = db.ResumeTarget(ctx, acme.ID, "https://partner.example:443", at, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	claims, err = db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{paused.ID, pausedToo.ID}, dbNow(t, pool),
		30*time.Second, &model.Held{})
	require.NoError(t, err)
	require.Len(t, claims, 2, "resumed: claimed as any task")
}

// TestPruneTargetHealth: the failure records of targets no attempt was
// reported to since the cutoff go, those of targets tried since, paused or
// still recovering stay. Its times are long past, apart from any other
// test's rows in this database.
func TestPruneTargetHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	acme := createTenant(t, db)
	cutoff := time.Date(2001, 6, 1, 0, 0, 0, 0, time.UTC)
	before, after := cutoff.Add(-time.Hour), cutoff.Add(time.Hour)
	failed := func(target string, at time.Time) model.TargetFailures {
		return model.TargetFailures{TenantID: acme.ID, Target: target, First: at.Add(-time.Minute), Last: at, LastError: "503"}
	}
	_, err := db.RecordTargetHealth(ctx, model.TargetHealthReport{At: after, DisableAfter: 1000 * time.Hour, Reason: "failing",
		Failures: []model.TargetFailures{
			failed("https://idle.example:443", before),
			failed("https://failing.example:443", after),
			failed("https://recovered.example:443", before.Add(-time.Hour)),
			failed("https://recovered-late.example:443", before.Add(-time.Hour)),
			failed("https://recovering.example:443", before),
			failed("https://paused.example:443", before),
		},
	}, nil)
	require.NoError(t, err)
	_, err = db.RecordTargetHealth(ctx, model.TargetHealthReport{At: after, DisableAfter: 1000 * time.Hour, Reason: "failing",
		Successes: []model.TargetSuccess{
			{TenantID: acme.ID, Target: "https://recovered.example:443", At: before},
			{TenantID: acme.ID, Target: "https://recovered-late.example:443", At: after},
		},
	}, nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE target_health SET recovering = true WHERE tenant_id = $1 AND target = 'https://recovering.example:443'`, acme.ID)
	require.NoError(t, err)
	// Paused by hookwheel, so no attempt goes to it: its resume marks the
	// row recovering, for target.recovered.
	_, _, err = db.PauseTarget(ctx, &model.TargetPause{TenantID: acme.ID, Target: "https://paused.example:443",
		PausedAt: after, PausedBy: model.PausedByHookwheel, Reason: "failing"}, nil)
	require.NoError(t, err)

	n, err := db.PruneTargetHealth(ctx, cutoff, 1000)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the idle target and the one that recovered before the cutoff")
	rows, err := pool.Query(ctx, `SELECT target FROM target_health WHERE tenant_id = $1 ORDER BY target`, acme.ID)
	require.NoError(t, err)
	kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"https://failing.example:443", "https://paused.example:443",
		"https://recovered-late.example:443", "https://recovering.example:443"}, kept)
}
