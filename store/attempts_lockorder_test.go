package store_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestClaimWritersLockInIDOrder holds the highest-id task's row and hands
// a batch listing the tasks from the highest id down to each statement that
// writes claimed tasks: while it waits for that row, it must already hold
// every lower one. ClaimTasks locks in id order too, so these statements and
// the claim can wait for each other in one direction only, never deadlock.
// Both of Postgres's plans are tried: a cached statement switches to the
// generic one after five executions.
func TestClaimWritersLockInIDOrder(t *testing.T) {
	t.Parallel()
	writers := []struct {
		name  string
		query string
		write func(ctx context.Context, db *store.DB, claims []*model.ClaimedTask) error
		want  string
	}{
		{"RecordAttempts", "RecordAttempts", func(ctx context.Context, db *store.DB, claims []*model.ClaimedTask) error {
			var results []model.AttemptResult
			for _, c := range claims {
				results = append(results, recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil))
			}
			_, err := db.RecordAttempts(ctx, results)
			return err
		}, "delivered"},
		{"DeferClaims", "DeferClaims", func(ctx context.Context, db *store.DB, claims []*model.ClaimedTask) error {
			var deferred []model.DeferredClaim
			for _, c := range claims {
				deferred = append(deferred, model.DeferredClaim{ID: c.ID, Token: c.ClaimToken})
			}
			return db.DeferClaims(ctx, deferred)
		}, "scheduled"},
	}
	for _, w := range writers {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(w.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				u, err := url.Parse(storetest.DatabaseURL(t))
				require.NoError(t, err)
				q := u.Query()
				q.Set("plan_cache_mode", mode)
				u.RawQuery = q.Encode()
				db, err := store.Open(ctx, store.Config{DatabaseURL: u.String(), MaxConns: testMaxConns})
				require.NoError(t, err)
				t.Cleanup(db.Close)
				pool := db.Pool()
				tenant := createTenant(t, db)

				// Stored from the highest id down, so that a scan in the table's
				// physical order meets them in the reverse of the lock order too.
				due := dbNow(t, pool).Add(-time.Minute)
				var tasks []*model.Task
				for range 100 {
					tasks = append(tasks, newTask(tenant.ID, due))
				}
				slices.SortFunc(tasks, func(x, y *model.Task) int { return bytes.Compare(y.ID[:], x.ID[:]) })
				var claims []*model.ClaimedTask
				for _, task := range tasks {
					_, created, err := db.InsertTask(ctx, task, false)
					require.NoError(t, err)
					require.True(t, created)
					claims = append(claims, claimOne(t, db, pool, task.ID))
				}
				highest, lower := claims[0], claims[1:]

				holder, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = holder.Rollback(ctx) }()
				_, err = holder.Exec(ctx, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, highest.ID)
				require.NoError(t, err)

				recorded := make(chan error, 1)
				go func() { recorded <- w.write(ctx, db, claims) }()

				require.Eventually(t, func() bool {
					var waiting int
					err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'
						AND query LIKE '%-- name: ' || $1 || '%'`, w.query).Scan(&waiting)
					require.NoError(t, err)
					return waiting == 1
				}, 10*time.Second, 5*time.Millisecond, "%s never waited for the held row", w.name)

				for _, c := range lower {
					probe, err := pool.Begin(ctx)
					require.NoError(t, err)
					_, err = probe.Exec(ctx, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE NOWAIT`, c.ID)
					_ = probe.Rollback(ctx)
					var pgErr *pgconn.PgError
					require.True(t, errors.As(err, &pgErr) && pgErr.Code == "55P03",
						"every lower id's row should be locked by %s while it waits for the highest; got %v", w.name, err)
				}

				require.NoError(t, holder.Rollback(ctx))
				require.NoError(t, <-recorded)
				for _, c := range claims {
					require.Equal(t, w.want, readTaskRow(t, pool, c.ID).Status)
				}
			})
		}
	}
}
