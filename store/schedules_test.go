package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// schedNew is a complete, unsaved schedule of the tenant whose next
// occurrence is next (nil: paused). The store does not read Cron; the tests
// plan occurrences themselves, every second from NextRunAt.
func schedNew(tenantID uuid.UUID, next *time.Time) *model.Schedule {
	s := &model.Schedule{
		ID:          uuid.Must(uuid.NewV7()),
		TenantID:    tenantID,
		Cron:        "* * * * * *",
		Timezone:    "Europe/Paris",
		Paused:      next == nil,
		URL:         "https://receiver.example/hooks/tick",
		Method:      "PUT",
		Headers:     map[string]string{"Content-Type": "application/json"},
		Body:        []byte(`{"tick": true}`),
		Timeout:     7 * time.Second,
		MaxAttempts: 4,
		MinBackoff:  2 * time.Second,
		MaxBackoff:  time.Minute,
		CreatedAt:   µs(time.Now()),
	}
	if next != nil {
		at := µs(*next)
		s.NextRunAt = &at
	}
	return s
}

func schedInsert(t *testing.T, db *store.DB, tenantID uuid.UUID, next *time.Time) *model.Schedule {
	t.Helper()
	s := schedNew(tenantID, next)
	require.NoError(t, db.InsertSchedule(context.Background(), s, nil))
	return s
}

// schedEverySecond plans every whole second from NextRunAt up to until.
func schedEverySecond(until time.Time) func(*model.Schedule) model.OccurrencePlan {
	return func(s *model.Schedule) model.OccurrencePlan {
		var p model.OccurrencePlan
		at := *s.NextRunAt
		for !at.After(until) {
			p.Occurrences = append(p.Occurrences, at)
			at = at.Add(time.Second)
		}
		p.Next = &at
		return p
	}
}

func schedMaterialize(t *testing.T, db *store.DB, until time.Time, plan func(*model.Schedule) model.OccurrencePlan) []model.DueTask {
	t.Helper()
	created, err := db.MaterializeSchedules(context.Background(), model.MaterializeParams{
		Partitions: allPartitions(), Until: until, Limit: 100, NotifyUntil: until,
	}, plan)
	require.NoError(t, err)
	return created.Created
}

// schedOccurrence is one task of a schedule, read in SQL.
type schedOccurrence struct {
	ID         uuid.UUID
	Status     string
	RunAt      time.Time
	Occurrence time.Time
}

func schedOccurrences(t *testing.T, pool *pgxpool.Pool, scheduleID uuid.UUID) []schedOccurrence {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT id, `+statusAsRead+`, run_at, occurrence_at FROM tasks WHERE schedule_id = $1 ORDER BY occurrence_at`, scheduleID)
	require.NoError(t, err)
	defer rows.Close()
	var out []schedOccurrence
	for rows.Next() {
		var o schedOccurrence
		require.NoError(t, rows.Scan(&o.ID, &o.Status, &o.RunAt, &o.Occurrence))
		out = append(out, o)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestScheduleCRUD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	next := time.Now().Add(time.Hour)

	s := schedInsert(t, db, tenant.ID, &next)
	got, err := db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
	require.Equal(t, s.ID, got.ID)
	require.Equal(t, tenant.ID, got.TenantID)
	require.Equal(t, "* * * * * *", got.Cron)
	require.Equal(t, "Europe/Paris", got.Timezone)
	require.False(t, got.Paused)
	require.Equal(t, s.URL, got.URL)
	require.Equal(t, "PUT", got.Method)
	require.Equal(t, s.Headers, got.Headers)
	require.Equal(t, s.Body, got.Body)
	require.Equal(t, 7*time.Second, got.Timeout)
	require.Equal(t, 4, got.MaxAttempts)
	require.Equal(t, 2*time.Second, got.MinBackoff)
	require.Equal(t, time.Minute, got.MaxBackoff)
	require.True(t, s.NextRunAt.Equal(*got.NextRunAt))
	require.Nil(t, got.LastRunAt)
	require.True(t, s.CreatedAt.Equal(got.CreatedAt), "created_at is the API's clock: the anchor of @every")

	paused := schedInsert(t, db, tenant.ID, nil)
	got, err = db.GetSchedule(ctx, tenant.ID, paused.ID)
	require.NoError(t, err)
	require.True(t, got.Paused)
	require.Nil(t, got.NextRunAt)

	// Another tenant's id is not found, everywhere.
	_, err = db.GetSchedule(ctx, other.ID, s.ID)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, _, err = db.PauseSchedule(ctx, other.ID, s.ID, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = db.ResumeSchedule(ctx, other.ID, paused.ID, func(*model.Schedule) (*time.Time, error) { return &next, nil }, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, _, err = db.DeleteSchedule(ctx, other.ID, s.ID, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = db.GetSchedule(ctx, tenant.ID, uuid.New())
	require.ErrorIs(t, err, model.ErrNotFound)

	// Listing: newest first, paged, the tenant's own only.
	third := schedInsert(t, db, tenant.ID, &next)
	schedInsert(t, db, other.ID, &next)
	page, err := db.ListSchedules(ctx, tenant.ID, model.ScheduleFilter{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{third.ID, paused.ID}, schedIDs(page))
	page, err = db.ListSchedules(ctx, tenant.ID, model.ScheduleFilter{Limit: 2, Before: &paused.ID})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{s.ID}, schedIDs(page))

	// Deleted: gone from reads and lists, answers as it was, once.
	deleted, canceled, err := db.DeleteSchedule(ctx, tenant.ID, third.ID, nil)
	require.NoError(t, err)
	require.Empty(t, canceled)
	require.Equal(t, third.ID, deleted.ID)
	require.NotNil(t, deleted.NextRunAt, "the schedule as it was")
	_, err = db.GetSchedule(ctx, tenant.ID, third.ID)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, _, err = db.DeleteSchedule(ctx, tenant.ID, third.ID, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, _, err = db.PauseSchedule(ctx, tenant.ID, third.ID, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	page, err = db.ListSchedules(ctx, tenant.ID, model.ScheduleFilter{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{paused.ID, s.ID}, schedIDs(page))
}

func schedIDs(ss []*model.Schedule) []uuid.UUID {
	ids := make([]uuid.UUID, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return ids
}

func TestMaterializeSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(2 * time.Second)
	s := schedInsert(t, db, tenant.ID, &first)
	later := now.Add(time.Hour)
	notDue := schedInsert(t, db, tenant.ID, &later)
	paused := schedInsert(t, db, tenant.ID, nil)

	// Announced on commit, like a task the API stores due soon.
	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	announced := make(chan model.DueTask, 64)
	go func() {
		_ = db.ListenDue(listenCtx, func() { close(ready) }, func(d model.DueTask) { announced <- d })
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue never became ready")
	}

	until := now.Add(5 * time.Second)
	var planned []uuid.UUID
	created, err := db.MaterializeSchedules(ctx, model.MaterializeParams{
		Partitions: allPartitions(), Until: until, Limit: 100, NotifyUntil: now.Add(3 * time.Second),
	}, func(sc *model.Schedule) model.OccurrencePlan {
		planned = append(planned, sc.ID)
		return schedEverySecond(until)(sc)
	})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{s.ID}, planned, "only due, running schedules are planned")

	// Four occurrences, 2 s to 5 s from now, each a task carrying the
	// schedule's request, in the schedule's partition.
	occ := schedOccurrences(t, pool, s.ID)
	require.Len(t, occ, 4)
	require.Len(t, created.Created, 4)
	require.Zero(t, created.Skipped)
	createdAt := map[uuid.UUID]time.Time{}
	for _, c := range created.Created {
		createdAt[c.ID] = c.At
	}
	for i, o := range occ {
		want := first.Add(time.Duration(i) * time.Second)
		require.True(t, want.Equal(o.Occurrence), "occurrence %d: %s", i, o.Occurrence)
		require.True(t, want.Equal(o.RunAt))
		require.Equal(t, "scheduled", o.Status)
		require.Contains(t, createdAt, o.ID)
		require.True(t, want.Equal(createdAt[o.ID]))
		require.Equal(t, model.PartitionOf(s.ID), model.PartitionOf(o.ID), "occurrences live in their schedule's partition")
		require.Equal(t, byte(7), o.ID[6]>>4, "task ids are UUIDv7")
		task, err := db.GetTask(ctx, tenant.ID, o.ID)
		require.NoError(t, err)
		require.Equal(t, &s.ID, task.ScheduleID)
		require.Equal(t, s.URL, task.URL)
		require.Equal(t, s.Method, task.Method)
		require.Equal(t, s.Headers, task.Headers)
		require.Equal(t, s.Body, task.Body)
		require.Equal(t, s.Timeout, task.Timeout)
		require.Equal(t, s.MaxAttempts, task.MaxAttempts)
		require.Equal(t, s.MinBackoff, task.MinBackoff)
		require.Equal(t, s.MaxBackoff, task.MaxBackoff)
		require.Nil(t, task.IdempotencyKey)
		require.True(t, want.Equal(*task.NextAttemptAt))
	}
	// Those due within NotifyUntil were announced, the others not.
	got := map[uuid.UUID]time.Time{}
	for range 2 {
		select {
		case d := <-announced:
			got[d.ID] = d.At.UTC()
		case <-time.After(10 * time.Second):
			require.FailNow(t, "occurrences not announced", "%v", got)
		}
	}
	require.Equal(t, map[uuid.UUID]time.Time{occ[0].ID: occ[0].RunAt.UTC(), occ[1].ID: occ[1].RunAt.UTC()}, got)

	sc, err := db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
	require.True(t, now.Add(6*time.Second).Equal(*sc.NextRunAt), "next_run_at moves past what was materialised")
	require.True(t, now.Add(5*time.Second).Equal(*sc.LastRunAt))
	for _, id := range []uuid.UUID{notDue.ID, paused.ID} {
		require.Empty(t, schedOccurrences(t, pool, id))
	}

	// Nothing is due any more until the horizon moves.
	require.Empty(t, schedMaterialize(t, db, until, schedEverySecond(until)))

	// A plan with no next stops the schedule.
	require.Empty(t, schedMaterialize(t, db, until.Add(time.Second), func(*model.Schedule) model.OccurrencePlan { return model.OccurrencePlan{} }))
	sc, err = db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
	require.Nil(t, sc.NextRunAt)
	require.Empty(t, schedMaterialize(t, db, until.Add(time.Minute), schedEverySecond(until.Add(time.Minute))))
	select {
	case d := <-announced:
		require.FailNow(t, "unexpected announcement", "%v", d)
	default:
	}
}

// TestMaterializeOncePerOccurrence: the unique (schedule_id, occurrence_at)
// makes a second materialisation of the same occurrences (a node whose view
// of its partitions is stale, or a rewound next_run_at) a no-op.
func TestMaterializeOncePerOccurrence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)
	s := schedInsert(t, db, tenant.ID, &first)
	until := now.Add(10 * time.Second)

	require.Len(t, schedMaterialize(t, db, until, schedEverySecond(until)), 10)
	// Rewind, as if another node had read the schedule before this commit.
	exec(t, pool, `UPDATE schedules SET next_run_at = $2 WHERE id = $1`, s.ID, first)
	require.Empty(t, schedMaterialize(t, db, until, schedEverySecond(until)), "no occurrence is materialised twice")
	// A wider horizon adds only the new occurrences.
	exec(t, pool, `UPDATE schedules SET next_run_at = $2 WHERE id = $1`, s.ID, first)
	require.Len(t, schedMaterialize(t, db, until.Add(3*time.Second), schedEverySecond(until.Add(3*time.Second))), 3)
	require.Len(t, schedOccurrences(t, pool, s.ID), 13)
	_, err := db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
}

// TestMaterializeConcurrently runs many materialisers over the same
// schedules at once, every one of them believing it owns every partition:
// each occurrence becomes exactly one task.
func TestMaterializeConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)
	const schedules, horizon, workers, rounds = 20, 30, 8, 15
	var ids []uuid.UUID
	for range schedules {
		ids = append(ids, schedInsert(t, db, tenant.ID, &first).ID)
	}

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		errs    []error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				// Horizons grow unevenly across workers; some rewind.
				until := first.Add(time.Duration((w+r)%horizon) * time.Second)
				if r%5 == 4 {
					_, _ = pool.Exec(ctx, `UPDATE schedules SET next_run_at = $1 WHERE tenant_id = $2`, first, tenant.ID)
				}
				got, err := db.MaterializeSchedules(ctx, model.MaterializeParams{
					Partitions: allPartitions(), Until: until, Limit: 7, NotifyUntil: until,
				}, schedEverySecond(until))
				mu.Lock()
				created += len(got.Created)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	total := 0
	for _, id := range ids {
		occ := schedOccurrences(t, pool, id)
		seen := map[time.Time]bool{}
		for _, o := range occ {
			require.False(t, seen[o.Occurrence.UTC()], "schedule %s: occurrence %s twice", id, o.Occurrence)
			seen[o.Occurrence.UTC()] = true
		}
		total += len(occ)
	}
	require.Equal(t, total, created, "every created task is reported once")
	require.Positive(t, total)
}

func TestPauseResumeSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)
	s := schedInsert(t, db, tenant.ID, &first)
	until := now.Add(6 * time.Second)
	require.Len(t, schedMaterialize(t, db, until, schedEverySecond(until)), 6)
	occ := schedOccurrences(t, pool, s.ID)
	// One is being sent, one was delivered, one waits for a retry.
	exec(t, pool, `UPDATE tasks SET status = 'delivered', next_attempt_at = NULL, attempts = 1 WHERE id = $1`, occ[0].ID)
	exec(t, pool, `UPDATE tasks SET claim_token = gen_random_uuid(), attempts = 1 WHERE id = $1`, occ[1].ID)
	exec(t, pool, `UPDATE tasks SET status = 'retrying', attempts = 1 WHERE id = $1`, occ[2].ID)

	paused, canceled, err := db.PauseSchedule(ctx, tenant.ID, s.ID, nil)
	require.NoError(t, err)
	require.True(t, paused.Paused)
	require.Nil(t, paused.NextRunAt)
	require.ElementsMatch(t, []uuid.UUID{occ[2].ID, occ[3].ID, occ[4].ID, occ[5].ID}, canceled)
	statuses := func() []string {
		var out []string
		for _, o := range schedOccurrences(t, pool, s.ID) {
			out = append(out, o.Status)
		}
		return out
	}
	require.Equal(t, []string{"delivered", "dispatching", "canceled", "canceled", "canceled", "canceled"}, statuses())

	// Pausing again changes nothing; a paused schedule is not materialised.
	again, canceled, err := db.PauseSchedule(ctx, tenant.ID, s.ID, nil)
	require.NoError(t, err)
	require.Empty(t, canceled)
	require.Equal(t, paused.UpdatedAt, again.UpdatedAt)
	require.Empty(t, schedMaterialize(t, db, until.Add(time.Hour), schedEverySecond(until.Add(time.Hour))))

	// Resume from the 4th occurrence: the canceled, never-attempted
	// occurrences from then on are forgotten, to be materialised again; the
	// one that was retrying (attempted, and before) stays canceled.
	resumeAt := now.Add(4 * time.Second)
	resumed, err := db.ResumeSchedule(ctx, tenant.ID, s.ID, func(sc *model.Schedule) (*time.Time, error) {
		require.True(t, sc.Paused)
		return &resumeAt, nil
	}, nil)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.True(t, resumeAt.Equal(*resumed.NextRunAt))
	require.Equal(t, []string{"delivered", "dispatching", "canceled"}, statuses())
	require.Len(t, schedMaterialize(t, db, until, schedEverySecond(until)), 3)
	require.Equal(t, []string{"delivered", "dispatching", "canceled", "scheduled", "scheduled", "scheduled"}, statuses())

	// Resuming a running schedule changes nothing and computes nothing.
	resumed, err = db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
	same, err := db.ResumeSchedule(ctx, tenant.ID, s.ID, func(*model.Schedule) (*time.Time, error) {
		return nil, fmt.Errorf("not called")
	}, nil)
	require.NoError(t, err)
	require.Equal(t, resumed.UpdatedAt, same.UpdatedAt)

	// Delete cancels what waits and stops materialisation.
	deleted, canceled, err := db.DeleteSchedule(ctx, tenant.ID, s.ID, nil)
	require.NoError(t, err)
	require.False(t, deleted.Paused)
	require.Len(t, canceled, 3)
	require.Equal(t, []string{"delivered", "dispatching", "canceled", "canceled", "canceled", "canceled"}, statuses())
	exec(t, pool, `UPDATE schedules SET next_run_at = $2 WHERE id = $1`, s.ID, first)
	require.Empty(t, schedMaterialize(t, db, until.Add(time.Hour), schedEverySecond(until.Add(time.Hour))), "a deleted schedule is not materialised")
}

// TestPauseWaitsForMaterializer pauses a schedule while a materialiser holds
// it, mid-transaction: the pause waits for the materialiser's commit and
// then cancels what it added, so no occurrence escapes the pause.
func TestPauseWaitsForMaterializer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)
	s := schedInsert(t, db, tenant.ID, &first)
	until := now.Add(5 * time.Second)

	release := holdScheduleRows(t, db, until)

	type pauseResult struct {
		canceled []uuid.UUID
		err      error
	}
	paused := make(chan pauseResult, 1)
	go func() {
		_, canceled, err := db.PauseSchedule(ctx, tenant.ID, s.ID, nil)
		paused <- pauseResult{canceled, err}
	}()
	waitBlockedOnSchedule(t, pool, "pause", paused)
	require.NoError(t, release())
	r := <-paused
	require.NoError(t, r.err)
	require.Len(t, r.canceled, 5, "the pause cancels what the materialiser committed while it waited")
	for _, o := range schedOccurrences(t, pool, s.ID) {
		require.Equal(t, "canceled", o.Status)
	}
}

// TestMaterializeSkipsOverQuota: occurrences that would take their tenant
// over max_pending_tasks (its own, or the node's default) are skipped, the
// latest first and across the tenant's schedules, and each schedule counts
// those it skipped; another tenant's schedule is not held back, and a
// schedule goes on past what it skipped. Before, five schedules took a
// tenant with a quota of 5 to hundreds of pending tasks; and the node's
// default was not applied to occurrences at all.
func TestMaterializeSkipsOverQuota(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		own         int // the limited tenant's own max_pending_tasks
		nodeDefault int
		otherOwn    int // the other tenant's, lifting the default
	}{
		{name: "own limit", own: 5},
		{name: "node default", nodeDefault: 5, otherOwn: model.Unlimited},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool := openDB(t)
			limited, free := createTenant(t, db), createTenant(t, db)
			audit := model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.limits_changed"}
			if tt.own != 0 {
				_, err := db.SetTenantLimits(ctx, limited.ID, model.Limits{MaxPendingTasks: tt.own}, audit)
				require.NoError(t, err)
			}
			if tt.otherOwn != 0 {
				_, err := db.SetTenantLimits(ctx, free.ID, model.Limits{MaxPendingTasks: tt.otherOwn}, audit)
				require.NoError(t, err)
			}
			now := dbNow(t, pool).Truncate(time.Second)
			first := now.Add(time.Second)
			// One pending task of the tenant's own already: room for four more.
			insertTask(t, db, limited.ID, now.Add(time.Hour))

			var mine []*model.Schedule
			for range 2 {
				mine = append(mine, schedInsert(t, db, limited.ID, &first))
			}
			theirs := schedInsert(t, db, free.ID, &first)

			// Three occurrences each: six of the limited tenant's, four fit.
			until := first.Add(2 * time.Second)
			done, err := db.MaterializeSchedules(ctx, model.MaterializeParams{
				Partitions: allPartitions(), Until: until, Limit: 100, NotifyUntil: until,
				DefaultMaxPendingTasks: tt.nodeDefault,
			}, schedEverySecond(until))
			require.NoError(t, err)
			require.Len(t, done.Created, 7, "four of the limited tenant's and the other tenant's three")
			require.Equal(t, 2, done.Skipped)

			pending, err := db.CountPendingTasks(ctx, limited.ID, 0)
			require.NoError(t, err)
			require.Equal(t, 5, pending, "the quota holds")
			require.Len(t, schedOccurrences(t, pool, theirs.ID), 3)

			var skipped int64
			for _, s := range mine {
				got, err := db.GetSchedule(ctx, limited.ID, s.ID)
				require.NoError(t, err)
				skipped += got.SkippedOccurrences
				if got.SkippedOccurrences > 0 {
					require.NotNil(t, got.LastSkippedAt)
					require.True(t, first.Add(2*time.Second).Equal(*got.LastSkippedAt), "the latest occurrences are the ones skipped")
				}
				require.True(t, until.Add(time.Second).Equal(*got.NextRunAt), "the schedule goes on past what it skipped")
				require.Len(t, schedOccurrences(t, pool, s.ID), 2)
			}
			require.EqualValues(t, 2, skipped)
			got, err := db.GetSchedule(ctx, free.ID, theirs.ID)
			require.NoError(t, err)
			require.Zero(t, got.SkippedOccurrences)
			require.Nil(t, got.LastSkippedAt)
		})
	}
}

// holdScheduleRows starts a materialiser that stops in the middle of its
// transaction, holding the row locks of the schedules due by until, as a
// node does while it plans their occurrences. release lets it go on (every
// schedule planned at one-second steps up to until) and returns its error.
func holdScheduleRows(t *testing.T, db *store.DB, until time.Time) (release func() error) {
	t.Helper()
	planning, proceed := make(chan struct{}), make(chan struct{})
	materialized := make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := db.MaterializeSchedules(context.Background(), model.MaterializeParams{
			Partitions: allPartitions(), Until: until, Limit: 10, NotifyUntil: until,
		}, func(sc *model.Schedule) model.OccurrencePlan {
			once.Do(func() { close(planning) })
			<-proceed
			return schedEverySecond(until)(sc)
		})
		materialized <- err
	}()
	<-planning
	return func() error {
		close(proceed)
		return <-materialized
	}
}

// waitBlockedOnSchedule waits until a statement of this database waits for
// a schedule's row lock (LockSchedule), failing the test if what should
// wait finishes first (done) or nothing waits within 10 s.
func waitBlockedOnSchedule[T any](t *testing.T, pool *pgxpool.Pool, what string, done <-chan T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for countRows(t, pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%name: LockSchedule%'`) == 0 {
		require.True(t, time.Now().Before(deadline), "the %s never waited for the lock", what)
		select {
		case r := <-done:
			require.FailNow(t, "the "+what+" did not wait for the materialiser", "%+v", r)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
