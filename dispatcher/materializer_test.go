package dispatcher

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

func mustUTC(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// TestPlan checks what the materialiser makes of a due schedule: every
// occurrence up to the horizon, late ones included, unless the schedule is
// more than Lookahead overdue, when its missed occurrences collapse into one.
func TestPlan(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name      string
		cron      string
		zone      string
		lookahead time.Duration
		now       string
		next      string
		// first and last of the occurrences planned, how many, and the
		// schedule's next run after them.
		first, last string
		count       int
		wantNext    string
	}{
		{
			name: "on time", cron: "*/2 * * * * *", zone: "UTC", lookahead: 30 * time.Second,
			now: "2026-10-25T00:59:51Z", next: "2026-10-25T00:59:52Z",
			first: "2026-10-25T00:59:52Z", last: "2026-10-25T01:00:20Z", count: 15, wantNext: "2026-10-25T01:00:22Z",
		},
		{
			name: "a little late: every late occurrence still fires", cron: "*/2 * * * * *", zone: "UTC", lookahead: 30 * time.Second,
			now: "2026-10-25T00:59:51Z", next: "2026-10-25T00:59:32Z",
			first: "2026-10-25T00:59:32Z", last: "2026-10-25T01:00:20Z", count: 25, wantNext: "2026-10-25T01:00:22Z",
		},
		{
			name: "an hour down: the missed ticks fire once, as the latest", cron: "*/2 * * * * *", zone: "UTC", lookahead: 30 * time.Second,
			now: "2026-10-25T00:59:51Z", next: "2026-10-24T23:59:50Z",
			first: "2026-10-25T00:59:50Z", last: "2026-10-25T01:00:20Z", count: 16, wantNext: "2026-10-25T01:00:22Z",
		},
		{
			name: "a week down over the fall-back night: one 02:30, the first", cron: "30 2 * * *", zone: "Europe/Paris", lookahead: 30 * time.Second,
			now: "2026-10-25T01:10:00Z", next: "2026-10-18T00:30:00Z",
			first: "2026-10-25T00:30:00Z", last: "2026-10-25T00:30:00Z", count: 1, wantNext: "2026-10-26T01:30:00Z",
		},
		{
			name: "spring-forward occurrence in the horizon", cron: "30 2 * * *", zone: "Europe/Paris", lookahead: 30 * time.Second,
			now: "2026-03-29T00:59:45Z", next: "2026-03-29T01:00:00Z",
			first: "2026-03-29T01:00:00Z", last: "2026-03-29T01:00:00Z", count: 1, wantNext: "2026-03-30T00:30:00Z",
		},
		{
			name: "nothing in the horizon yet", cron: "0 9 * * *", zone: "UTC", lookahead: 30 * time.Second,
			now: "2026-10-25T08:00:00Z", next: "2026-10-25T09:00:00Z",
			count: 0, wantNext: "2026-10-25T09:00:00Z",
		},
		{
			name: "capped per pass", cron: "* * * * * *", zone: "UTC", lookahead: time.Hour,
			now: "2026-10-25T00:00:00Z", next: "2026-10-25T00:00:01Z",
			first: "2026-10-25T00:00:01Z", last: "2026-10-25T00:16:40Z", count: maxOccurrencesPerPass, wantNext: "2026-10-25T00:16:41Z",
		},
		{
			name: "unreadable: tried again in a minute", cron: "0 9 * * *", zone: "Mars/Olympus_Mons", lookahead: 30 * time.Second,
			now: "2026-10-25T08:00:00Z", next: "2026-10-25T07:00:00Z",
			count: 0, wantNext: "2026-10-25T08:01:00Z",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newMaterializer(materializerConfig{Lookahead: tc.lookahead, Logger: quiet})
			now, next := mustUTC(t, tc.now), mustUTC(t, tc.next)
			s := &model.Schedule{ID: uuid.New(), Cron: tc.cron, Timezone: tc.zone, NextRunAt: &next}
			p := m.plan(s, now, now.Add(tc.lookahead))
			require.Len(t, p.Occurrences, tc.count)
			if tc.count > 0 {
				require.Equal(t, mustUTC(t, tc.first), p.Occurrences[0].UTC())
				require.Equal(t, mustUTC(t, tc.last), p.Occurrences[tc.count-1].UTC())
			}
			for i := 1; i < len(p.Occurrences); i++ {
				require.True(t, p.Occurrences[i].After(p.Occurrences[i-1]))
			}
			require.NotNil(t, p.Next)
			require.Equal(t, mustUTC(t, tc.wantNext), p.Next.UTC())
		})
	}
}

// TestMaterialize runs materialisation passes against Postgres: occurrences
// become tasks of the schedule, those inside the loaded window go into this
// node's wheel, and a pass after downtime adds only the latest missed one.
func TestMaterialize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.DB(t)
	now := time.Now().UTC().Truncate(2 * time.Second) // an even second, a tick of */2
	fake := clock.NewFake(now)
	d, err := New(Config{DB: db, Clock: fake, Lookahead: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	all := make([]int16, model.Partitions)
	for i := range all {
		all[i] = int16(i)
	}
	d.ownership.set(all)
	d.loader.window.extend(now.Add(6 * time.Second)) // the loader has read 6 s ahead so far

	tenant := &model.Tenant{ID: uuid.Must(uuid.NewV7()), Name: "materialize", SigningSecrets: storetest.SigningSecrets()}
	require.NoError(t, db.CreateTenant(ctx, tenant, &model.APIKey{ID: uuid.NewString()[:8], SecretHash: []byte("h"), Scopes: []model.Scope{model.ScopeAll}},
		model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.created"}))
	next := now.Add(2 * time.Second)
	s := &model.Schedule{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant.ID, Cron: "*/2 * * * * *", Timezone: "UTC",
		URL: "https://receiver.example/tick", Method: "POST", Timeout: 10 * time.Second,
		MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute, NextRunAt: &next, CreatedAt: now,
	}
	require.NoError(t, db.InsertSchedule(ctx, s, nil))

	require.Equal(t, 1, d.materializer.pass(ctx))
	tasks := scheduleTasks(t, db, tenant.ID, s.ID)
	require.Len(t, tasks, 5, "occurrences 2 s to 10 s ahead")
	for i, task := range tasks {
		at := now.Add(time.Duration(2*(i+1)) * time.Second)
		require.True(t, at.Equal(task.RunAt), "task %d due %s", i, task.RunAt)
		// The loaded window ends 6 s ahead: the loader finds the rest.
		require.Equal(t, !at.After(now.Add(6*time.Second)), d.timers.Contains(task.ID), "task %d due %s armed", i, task.RunAt)
	}
	sc, err := db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
	require.True(t, now.Add(12*time.Second).Equal(*sc.NextRunAt))
	require.True(t, now.Add(10*time.Second).Equal(*sc.LastRunAt))
	require.Zero(t, d.materializer.pass(ctx), "nothing due until the clock moves")

	// The node was down for an hour: one task for the latest missed tick,
	// due at once, then the schedule goes on.
	fake.Advance(time.Hour + time.Second)
	later := fake.Now()
	d.loader.window.extend(later.Add(10 * time.Second))
	require.Equal(t, 1, d.materializer.pass(ctx))
	tasks = scheduleTasks(t, db, tenant.ID, s.ID)
	require.Len(t, tasks, 5+1+5)
	missed := tasks[5]
	require.True(t, later.Add(-time.Second).Equal(missed.RunAt), "the latest tick at or before now: %s", missed.RunAt)
	require.True(t, d.timers.Contains(missed.ID))
	for i, task := range tasks[6:] {
		require.True(t, later.Add(time.Duration(2*i+1)*time.Second).Equal(task.RunAt))
	}
}

// scheduleTasks lists a schedule's tasks in due order.
func scheduleTasks(t *testing.T, db *store.DB, tenantID, scheduleID uuid.UUID) []*model.Task {
	t.Helper()
	all, err := db.ListTasks(context.Background(), tenantID, model.TaskFilter{Limit: 1000})
	require.NoError(t, err)
	var out []*model.Task
	for _, task := range all {
		if task.ScheduleID != nil && *task.ScheduleID == scheduleID {
			out = append(out, task)
		}
	}
	slices.SortFunc(out, func(a, b *model.Task) int { return a.RunAt.Compare(b.RunAt) })
	return out
}
