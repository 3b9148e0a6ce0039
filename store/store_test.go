package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

func TestInsertTaskIdempotency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	runAt := time.Date(2031, 3, 4, 5, 6, 7, 891011000, time.UTC)

	countKey := func(t *testing.T, tenantID uuid.UUID, key string) int {
		return countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1 AND idempotency_key = $2`, tenantID, key)
	}
	countTenant := func(t *testing.T, tenantID uuid.UUID) int {
		return countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1`, tenantID)
	}

	t.Run("first insert creates, a repeat returns the original", func(t *testing.T) {
		t.Parallel()
		tenant := createTenant(t, db)

		first := newTask(tenant.ID, runAt)
		first.IdempotencyKey = ptr("order-42")
		first.RequestHash = []byte{1, 2, 3}
		existing, created, err := db.InsertTask(ctx, first, false)
		require.NoError(t, err)
		require.True(t, created)
		require.Nil(t, existing)
		require.Equal(t, model.StatusScheduled, first.Status)
		require.NotNil(t, first.NextAttemptAt)
		require.True(t, first.NextAttemptAt.Equal(runAt))
		require.False(t, first.CreatedAt.IsZero())

		stored, err := db.GetTask(ctx, tenant.ID, first.ID)
		require.NoError(t, err)
		require.Equal(t, first.ID, stored.ID)
		require.Equal(t, tenant.ID, stored.TenantID)
		require.Equal(t, model.StatusScheduled, stored.Status)
		require.Equal(t, "https://receiver.example/hooks/order", stored.URL)
		require.Equal(t, "POST", stored.Method)
		require.Equal(t, map[string]string{"Content-Type": "application/json", "X-Order": "42"}, stored.Headers)
		require.Equal(t, []byte(`{"order": 42}`), stored.Body)
		require.Equal(t, runAt.UnixMicro(), stored.RunAt.UnixMicro())
		require.Equal(t, runAt.UnixMicro(), stored.NextAttemptAt.UnixMicro())
		require.Equal(t, 10*time.Second, stored.Timeout)
		require.Equal(t, 10, stored.MaxAttempts)
		require.Equal(t, time.Second, stored.MinBackoff)
		require.Equal(t, time.Hour, stored.MaxBackoff)
		require.Equal(t, 0, stored.Attempts)
		require.Nil(t, stored.LastStatusCode)
		require.Nil(t, stored.LastError)
		require.Equal(t, ptr("order-42"), stored.IdempotencyKey)
		require.Equal(t, []byte{1, 2, 3}, stored.RequestHash)

		again := newTask(tenant.ID, runAt.Add(time.Hour))
		again.URL = "https://receiver.example/other"
		again.IdempotencyKey = ptr("order-42")
		again.RequestHash = []byte{9, 9, 9}
		existing, created, err = db.InsertTask(ctx, again, true)
		require.NoError(t, err)
		require.False(t, created)
		require.NotNil(t, existing)
		require.Equal(t, first.ID, existing.ID)
		require.Equal(t, "https://receiver.example/hooks/order", existing.URL)
		require.Equal(t, runAt.UnixMicro(), existing.RunAt.UnixMicro())
		require.Equal(t, []byte{1, 2, 3}, existing.RequestHash, "the stored hash lets the caller tell a replay from a reused key")

		require.Equal(t, 1, countTenant(t, tenant.ID))
		_, err = db.GetTask(ctx, tenant.ID, again.ID)
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("keys are per tenant", func(t *testing.T) {
		t.Parallel()
		a, b := createTenant(t, db), createTenant(t, db)
		ta := newTask(a.ID, runAt)
		ta.IdempotencyKey = ptr("shared-key")
		tb := newTask(b.ID, runAt)
		tb.IdempotencyKey = ptr("shared-key")

		_, created, err := db.InsertTask(ctx, ta, false)
		require.NoError(t, err)
		require.True(t, created)
		existing, created, err := db.InsertTask(ctx, tb, false)
		require.NoError(t, err)
		require.True(t, created)
		require.Nil(t, existing)

		require.Equal(t, 1, countKey(t, a.ID, "shared-key"))
		require.Equal(t, 1, countKey(t, b.ID, "shared-key"))
		got, err := db.GetTask(ctx, b.ID, tb.ID)
		require.NoError(t, err)
		require.Equal(t, b.ID, got.TenantID)
	})

	t.Run("concurrent inserts with one key create one task", func(t *testing.T) {
		t.Parallel()
		tenant := createTenant(t, db)
		const callers = 50
		type result struct {
			id      uuid.UUID
			created bool
			err     error
		}
		results := make([]result, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				task := newTask(tenant.ID, runAt)
				task.IdempotencyKey = ptr("race-key")
				<-start
				existing, created, err := db.InsertTask(ctx, task, true)
				r := result{id: task.ID, created: created, err: err}
				if existing != nil {
					r.id = existing.ID
				}
				results[i] = r
			})
		}
		close(start)
		wg.Wait()

		createdCount := 0
		var winner uuid.UUID
		for _, r := range results {
			require.NoError(t, r.err)
			if r.created {
				createdCount++
				winner = r.id
			}
		}
		require.Equal(t, 1, createdCount)
		for i, r := range results {
			require.Equal(t, winner, r.id, "caller %d", i)
		}
		require.Equal(t, 1, countKey(t, tenant.ID, "race-key"))
		require.Equal(t, 1, countTenant(t, tenant.ID))
	})

	t.Run("tasks without keys never conflict", func(t *testing.T) {
		t.Parallel()
		tenant := createTenant(t, db)
		const callers = 20
		errs := make([]error, callers)
		created := make([]bool, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				task := newTask(tenant.ID, runAt) // same content, no key
				<-start
				_, created[i], errs[i] = db.InsertTask(ctx, task, false)
			})
		}
		close(start)
		wg.Wait()
		for i := range callers {
			require.NoError(t, errs[i])
			require.True(t, created[i])
		}
		require.Equal(t, callers, countTenant(t, tenant.ID))
		require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1 AND idempotency_key IS NOT NULL`, tenant.ID))
	})
}

func TestTenantScoping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	owner, other := createTenant(t, db), createTenant(t, db)
	task := insertTask(t, db, owner.ID, time.Now().Add(time.Hour))
	insertTask(t, db, other.ID, time.Now().Add(time.Hour))

	tests := []struct {
		name string
		call func(tenantID, id uuid.UUID) error
	}{
		{"GetTask", func(tenantID, id uuid.UUID) error { _, err := db.GetTask(ctx, tenantID, id); return err }},
		{"CancelTask", func(tenantID, id uuid.UUID) error { _, err := db.CancelTask(ctx, tenantID, id); return err }},
		{"ListAttempts", func(tenantID, id uuid.UUID) error { _, err := db.ListAttempts(ctx, tenantID, id, 0, 1000); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorIs(t, tt.call(other.ID, task.ID), model.ErrNotFound, "another tenant's task")
			require.ErrorIs(t, tt.call(owner.ID, uuid.Must(uuid.NewV7())), model.ErrNotFound, "unknown id")
			require.ErrorIs(t, tt.call(uuid.Must(uuid.NewV7()), task.ID), model.ErrNotFound, "unknown tenant")
			// Nothing the other tenant did touched the task.
			row := readTaskRow(t, pool, task.ID)
			require.Equal(t, "scheduled", row.Status)
			require.NotNil(t, row.NextAttemptAt)
			require.Equal(t, task.RunAt.UnixMicro(), row.NextAttemptAt.UnixMicro())
		})
	}

	// Listing shows each tenant only its own.
	listed, err := db.ListTasks(ctx, other.ID, model.TaskFilter{Limit: 100})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.NotEqual(t, task.ID, listed[0].ID)
	require.Equal(t, other.ID, listed[0].TenantID)

	// The owner sees its own task and its (so far no) attempts.
	attempts, err := db.ListAttempts(ctx, owner.ID, task.ID, 0, 1000)
	require.NoError(t, err)
	require.Empty(t, attempts)
	_, err = db.GetTask(ctx, owner.ID, task.ID)
	require.NoError(t, err)
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)

	const n = 23
	var inserted []*model.Task // oldest first
	for i := range n {
		inserted = append(inserted, insertTask(t, db, tenant.ID, time.Now().Add(time.Duration(i)*time.Minute)))
		insertTask(t, db, other.ID, time.Now()) // interleaved noise from another tenant
	}
	newestFirst := make([]uuid.UUID, n)
	for i, task := range inserted {
		newestFirst[n-1-i] = task.ID
	}
	var canceled, scheduled []uuid.UUID // newest first
	for i, id := range newestFirst {
		if i%3 == 1 {
			canceled = append(canceled, id)
		} else {
			scheduled = append(scheduled, id)
		}
	}
	for _, id := range canceled {
		_, err := db.CancelTask(ctx, tenant.ID, id)
		require.NoError(t, err)
	}

	all, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Limit: 100})
	require.NoError(t, err)
	require.Equal(t, newestFirst, taskIDs(all))

	filters := []struct {
		name   string
		status *model.TaskStatus
		want   []uuid.UUID
	}{
		{"all", nil, newestFirst},
		{"canceled", ptr(model.StatusCanceled), canceled},
		{"scheduled", ptr(model.StatusScheduled), scheduled},
		{"delivered", ptr(model.StatusDelivered), []uuid.UUID{}},
	}
	for _, f := range filters {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			got, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Status: f.status, Limit: 100})
			require.NoError(t, err)
			require.Equal(t, f.want, taskIDs(got))
			for _, task := range got {
				require.Equal(t, tenant.ID, task.TenantID)
				if f.status != nil {
					require.Equal(t, *f.status, task.Status)
				}
			}
		})
		for _, pageSize := range []int{1, 4, 7} {
			t.Run(fmt.Sprintf("%s/pages of %d", f.name, pageSize), func(t *testing.T) {
				t.Parallel()
				seen := map[uuid.UUID]bool{}
				concatenated := []uuid.UUID{}
				var before *uuid.UUID
				for pages := 0; ; pages++ {
					require.LessOrEqual(t, pages, n+1, "paging does not end")
					page, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Status: f.status, Before: before, Limit: pageSize})
					require.NoError(t, err)
					require.LessOrEqual(t, len(page), pageSize)
					if len(page) == 0 {
						break
					}
					for _, task := range page {
						require.False(t, seen[task.ID], "task %s on two pages", task.ID)
						seen[task.ID] = true
						concatenated = append(concatenated, task.ID)
					}
					before = &page[len(page)-1].ID
				}
				require.Equal(t, f.want, concatenated)
			})
		}
	}
}

func TestCancelTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	// Each setup brings a fresh due task into one state.
	claim := func(t *testing.T) *model.ClaimedTask {
		return claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
	}
	record := func(t *testing.T, c *model.ClaimedTask, outcome string, status model.TaskStatus, next *time.Time) {
		require.NoError(t, db.RecordAttempt(ctx, model.AttemptResult{
			Attempt:       model.Attempt{TaskID: c.ID, Attempt: c.Attempt, StartedAt: time.Now(), Duration: time.Millisecond, StatusCode: ptr(500), Outcome: outcome},
			ClaimToken:    c.ClaimToken,
			Status:        status,
			NextAttemptAt: next,
		}))
	}
	tests := []struct {
		name       string
		setup      func(t *testing.T) uuid.UUID
		wantErr    error
		wantStatus model.TaskStatus
	}{
		{"scheduled", func(t *testing.T) uuid.UUID {
			return insertTask(t, db, tenant.ID, time.Now().Add(time.Hour)).ID
		}, nil, model.StatusCanceled},
		{"retrying", func(t *testing.T) uuid.UUID {
			c := claim(t)
			record(t, c, "retry", model.StatusRetrying, ptr(time.Now().Add(time.Hour)))
			return c.ID
		}, nil, model.StatusCanceled},
		{"dispatching", func(t *testing.T) uuid.UUID { return claim(t).ID }, model.ErrConflict, model.StatusDispatching},
		{"delivered", func(t *testing.T) uuid.UUID {
			c := claim(t)
			record(t, c, "success", model.StatusDelivered, nil)
			return c.ID
		}, model.ErrConflict, model.StatusDelivered},
		{"dead", func(t *testing.T) uuid.UUID {
			c := claim(t)
			record(t, c, "fail", model.StatusDead, nil)
			return c.ID
		}, model.ErrConflict, model.StatusDead},
		{"canceled", func(t *testing.T) uuid.UUID {
			id := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour)).ID
			_, err := db.CancelTask(ctx, tenant.ID, id)
			require.NoError(t, err)
			return id
		}, model.ErrConflict, model.StatusCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := tt.setup(t)
			before := readTaskRow(t, pool, id)

			got, err := db.CancelTask(ctx, tenant.ID, id)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.NotNil(t, got, "the task comes back either way")
			require.Equal(t, id, got.ID)
			require.Equal(t, tt.wantStatus, got.Status)

			after := readTaskRow(t, pool, id)
			require.Equal(t, string(tt.wantStatus), after.Status)
			if tt.wantErr == nil {
				require.Nil(t, got.NextAttemptAt)
				require.Nil(t, after.NextAttemptAt)
			} else {
				require.Equal(t, before, after, "a refused cancel changes nothing")
			}
		})
	}
}

func TestListAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	task := insertDueTask(t, db, pool, tenant.ID)

	attempts, err := db.ListAttempts(ctx, tenant.ID, task.ID, 0, 1000)
	require.NoError(t, err)
	require.Empty(t, attempts)

	started := µs(time.Now().Add(-time.Second))
	c1 := claimOne(t, db, pool, task.ID)
	retryAt := µs(dbNow(t, pool).Add(-time.Millisecond)) // due again at once
	require.NoError(t, db.RecordAttempt(ctx, model.AttemptResult{
		Attempt:       model.Attempt{TaskID: task.ID, Attempt: 1, StartedAt: started, Duration: 1500 * time.Millisecond, Error: ptr("connection refused"), Outcome: "retry"},
		ClaimToken:    c1.ClaimToken,
		Status:        model.StatusRetrying,
		NextAttemptAt: &retryAt,
	}))
	c2 := claimOne(t, db, pool, task.ID)
	require.Equal(t, 2, c2.Attempt)
	require.NoError(t, db.RecordAttempt(ctx, model.AttemptResult{
		Attempt:    model.Attempt{TaskID: task.ID, Attempt: 2, StartedAt: started.Add(time.Minute), Duration: 42 * time.Millisecond, StatusCode: ptr(204), ResponseBody: ptr("ok"), Outcome: "success"},
		ClaimToken: c2.ClaimToken,
		Status:     model.StatusDelivered,
	}))

	attempts, err = db.ListAttempts(ctx, tenant.ID, task.ID, 0, 1000)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	for i := range attempts {
		attempts[i].StartedAt = attempts[i].StartedAt.UTC()
	}
	require.Equal(t, []model.Attempt{
		{TaskID: task.ID, Attempt: 1, StartedAt: started.UTC(), Duration: 1500 * time.Millisecond, Error: ptr("connection refused"), Outcome: "retry"},
		{TaskID: task.ID, Attempt: 2, StartedAt: started.Add(time.Minute).UTC(), Duration: 42 * time.Millisecond, StatusCode: ptr(204), ResponseBody: ptr("ok"), Outcome: "success"},
	}, attempts)

	got, err := db.GetTask(ctx, tenant.ID, task.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusDelivered, got.Status)
	require.Equal(t, 2, got.Attempts)
	require.Equal(t, ptr(204), got.LastStatusCode)
	require.Nil(t, got.NextAttemptAt)

	// A page: at most limit attempts, those after the given number.
	first, err := db.ListAttempts(ctx, tenant.ID, task.ID, 0, 1)
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Equal(t, 1, first[0].Attempt)
	rest, err := db.ListAttempts(ctx, tenant.ID, task.ID, 1, 1)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, 2, rest[0].Attempt)
	past, err := db.ListAttempts(ctx, tenant.ID, task.ID, 2, 1)
	require.NoError(t, err)
	require.Empty(t, past)
}

func TestInsertTaskOptionalFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant := createTenant(t, db)

	tests := []struct {
		name        string
		modify      func(task *model.Task)
		wantHeaders map[string]string
		wantBody    []byte
	}{
		{"nil headers", func(task *model.Task) { task.Headers = nil }, map[string]string{}, []byte(`{"order": 42}`)},
		{"nil body", func(task *model.Task) { task.Body = nil }, map[string]string{"Content-Type": "application/json", "X-Order": "42"}, []byte{}},
		{"neither", func(task *model.Task) { task.Headers, task.Body = nil, nil }, map[string]string{}, []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := newTask(tenant.ID, time.Now())
			tt.modify(task)
			_, created, err := db.InsertTask(ctx, task, false)
			require.NoError(t, err)
			require.True(t, created)
			got, err := db.GetTask(ctx, tenant.ID, task.ID)
			require.NoError(t, err)
			require.Equal(t, tt.wantHeaders, got.Headers)
			require.Equal(t, tt.wantBody, got.Body)
		})
	}
}

// TestSharedSecret: the first candidate stored is the value every later
// caller gets, concurrent first callers included.
func TestSharedSecret(t *testing.T) {
	t.Parallel()
	db, _ := openDB(t)
	const n = 8
	got := make(chan string, n)
	for i := range n {
		go func() {
			v, err := db.SharedSecret(t.Context(), "test-secret", fmt.Sprint("candidate-", i))
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- v
		}()
	}
	first := <-got
	require.True(t, strings.HasPrefix(first, "candidate-"), first)
	for range n - 1 {
		require.Equal(t, first, <-got)
	}
	again, err := db.SharedSecret(t.Context(), "test-secret", "late")
	require.NoError(t, err)
	require.Equal(t, first, again)
	other, err := db.SharedSecret(t.Context(), "other-secret", "mine")
	require.NoError(t, err)
	require.Equal(t, "mine", other)
}

func TestOpenSizesThePool(t *testing.T) {
	t.Parallel()
	dbURL := emptyDatabaseURL(t)
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		name     string
		url      string
		maxConns int32
		want     int32
	}{
		{name: "default", url: dbURL, want: 32},
		{name: "pool_max_conns in the URL", url: dbURL + sep + "pool_max_conns=5", want: 5},
		{name: "the config wins over the URL", url: dbURL + sep + "pool_max_conns=5", maxConns: 3, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := store.Open(context.Background(), store.Config{DatabaseURL: tc.url, MaxConns: tc.maxConns})
			require.NoError(t, err)
			t.Cleanup(db.Close)
			require.Equal(t, tc.want, db.MaxConns())
		})
	}
}
