package txenqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/tenants"
	"github.com/hookwheel/hookwheel/txenqueue"
)

// TestIdempotencyKey: a repeat of an insert with the same key and task
// returns the first task, Replayed, in the same transaction and in a later
// one; the same key with another task is ErrKeyReused; neither inserts
// anything nor spoils the transaction.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.client()
	ctx := context.Background()
	task := txenqueue.Task{URL: "http://127.0.0.1:9/hook", Body: []byte(`{"order": 42}`), Delay: time.Hour, IdempotencyKey: "order-42-timeout"}

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	first, err := c.Insert(ctx, tx, task)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	require.Equal(t, "order-42-timeout", first.IdempotencyKey)
	again, err := c.Insert(ctx, tx, task)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.ID, again.ID)
	require.True(t, first.RunAt.Equal(again.RunAt), "the repeat's delay moved the task")

	other := task
	other.Body = []byte(`{"order": 43}`)
	_, err = c.Insert(ctx, tx, other)
	require.ErrorIs(t, err, txenqueue.ErrKeyReused)
	require.ErrorContains(t, err, first.ID.String())
	require.NoError(t, tx.Commit(ctx))

	later, err := c.Insert(ctx, e.app, task)
	require.NoError(t, err)
	require.True(t, later.Replayed)
	require.Equal(t, first.ID, later.ID)
	require.Equal(t, "scheduled", later.Status)

	list, err := e.db.ListTasks(ctx, e.tenant, model.TaskFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// TestIdempotencyKeyAcrossOpenTransactions: an insert whose key another
// open transaction has inserted waits for it; it then gets that task if the
// other committed, and inserts its own if the other rolled back.
func TestIdempotencyKeyAcrossOpenTransactions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.client()
	ctx := context.Background()

	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("first commits %t", commit), func(t *testing.T) {
			task := txenqueue.Task{URL: "http://127.0.0.1:9/hook", Delay: time.Hour, IdempotencyKey: fmt.Sprintf("key-%t", commit)}
			first, err := e.app.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = first.Rollback(ctx) }()
			held, err := c.Insert(ctx, first, task)
			require.NoError(t, err)

			type outcome struct {
				task *txenqueue.Inserted
				err  error
			}
			second := make(chan outcome, 1)
			go func() {
				var got *txenqueue.Inserted
				err := pgx.BeginFunc(ctx, e.app, func(tx pgx.Tx) error {
					var err error
					got, err = c.Insert(ctx, tx, task)
					return err
				})
				second <- outcome{got, err}
			}()
			// The second insert waits on the first's key.
			require.Eventually(t, func() bool {
				var waiting int
				require.NoError(t, e.app.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
				return waiting == 1
			}, 10*time.Second, 5*time.Millisecond, "the second insert does not wait for the first")
			select {
			case got := <-second:
				require.FailNow(t, "the second insert did not wait", "%+v", got)
			default:
			}

			if commit {
				require.NoError(t, first.Commit(ctx))
			} else {
				require.NoError(t, first.Rollback(ctx))
			}
			got := <-second
			require.NoError(t, got.err)
			require.Equal(t, commit, got.task.Replayed)
			require.Equal(t, commit, got.task.ID == held.ID)
			require.True(t, e.taskExists(got.task.ID))
			require.Equal(t, commit, e.taskExists(held.ID))
		})
	}
}

// TestIdempotencyKeyInRepeatableRead: in a repeatable read transaction, a
// key another transaction committed after the snapshot was taken is a
// serialization failure for the application to retry, not a task read as
// missing.
func TestIdempotencyKeyInRepeatableRead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.client()
	ctx := context.Background()
	task := txenqueue.Task{URL: "http://127.0.0.1:9/hook", Delay: time.Hour, IdempotencyKey: "k"}

	tx, err := e.app.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES (42, 'created')`) // takes the snapshot
	require.NoError(t, err)
	other, err := c.Insert(ctx, e.app, task)
	require.NoError(t, err)

	_, err = c.Insert(ctx, tx, task)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "40001", pgErr.Code, "%v", err)
	require.NoError(t, tx.Rollback(ctx))

	again, err := c.Insert(ctx, e.app, task)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, other.ID, again.ID)
}

// TestQuota: the tenant's max_pending_tasks counts the tasks the
// transaction inserted so far; over it Insert gives a *QuotaError, unless
// its idempotency key names a task the tenant has; InsertMany admits tasks
// in order.
func TestQuota(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := tenants.New(tenants.Config{Store: e.db}).SetLimits(ctx, e.tenant, model.Limits{MaxPendingTasks: 3}, model.ActorCLI)
	require.NoError(t, err)
	c := e.client()
	hook := "http://127.0.0.1:9/hook"

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	keyed := txenqueue.Task{URL: hook, Delay: time.Hour, IdempotencyKey: "k"}
	first, err := c.Insert(ctx, tx, keyed)
	require.NoError(t, err)
	_, err = c.Insert(ctx, tx, txenqueue.Task{URL: hook, Delay: time.Hour})
	require.NoError(t, err)

	results, err := c.InsertMany(ctx, tx, []txenqueue.Task{{URL: hook}, {URL: hook}})
	require.NoError(t, err)
	require.NoError(t, results[0].Err)
	var quota *txenqueue.QuotaError
	require.ErrorAs(t, results[1].Err, &quota)
	require.Equal(t, 3, quota.Limit)
	require.Equal(t, 2, quota.Pending)
	require.Nil(t, results[1].Task)

	_, err = c.Insert(ctx, tx, txenqueue.Task{URL: hook})
	require.ErrorAs(t, err, &quota)
	require.Equal(t, 3, quota.Pending)
	require.Positive(t, quota.RetryAfter)

	again, err := c.Insert(ctx, tx, keyed)
	require.NoError(t, err, "a repeat of a create that succeeded is no new task")
	require.True(t, again.Replayed)
	require.Equal(t, first.ID, again.ID)
	require.NoError(t, tx.Commit(ctx))

	pending, err := e.db.CountPendingTasks(ctx, e.tenant, 0)
	require.NoError(t, err)
	require.Equal(t, 3, pending)
}

// TestQuotaDefault: a tenant without a max_pending_tasks of its own is held
// to the nodes' default, as the Client is told it (1,000 unless told);
// a negative default sets none.
func TestQuotaDefault(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	hook := "http://127.0.0.1:9/hook"
	tests := []struct {
		name     string
		defaults int
		refused  bool
	}{
		{"the nodes' default", 2, true},
		{"no default", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.client(func(cfg *txenqueue.Config) { cfg.DefaultMaxPendingTasks = tt.defaults })
			tx, err := e.app.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			results, err := c.InsertMany(ctx, tx, []txenqueue.Task{{URL: hook}, {URL: hook}, {URL: hook}})
			require.NoError(t, err)
			require.NoError(t, results[0].Err)
			require.NoError(t, results[1].Err)
			var quota *txenqueue.QuotaError
			require.Equal(t, tt.refused, errors.As(results[2].Err, &quota), "%v", results[2].Err)
		})
	}
}

// TestInsertMany: one call inserts the valid tasks and reports each
// invalid, repeated or reused one in its place; the batch commits and rolls
// back with the transaction like a single insert.
func TestInsertMany(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.client()
	ctx := context.Background()
	hook := "http://127.0.0.1:9/hook"

	existing, err := c.Insert(ctx, e.app, txenqueue.Task{URL: hook, Delay: time.Hour, IdempotencyKey: "taken"})
	require.NoError(t, err)

	list := []txenqueue.Task{
		{URL: hook, Body: []byte("a"), Delay: time.Minute, Labels: map[string]string{"batch": "1"}},
		{URL: "ftp://example.com/x", Method: "FOO"},
		{URL: hook, Delay: time.Hour, IdempotencyKey: "taken"},
		{URL: hook, Delay: 2 * time.Hour, IdempotencyKey: "taken"},
		{URL: hook, Body: []byte("b"), IdempotencyKey: "twice"},
		{URL: hook, Body: []byte("b"), IdempotencyKey: "twice"},
	}
	var inserted []uuid.UUID
	err = pgx.BeginFunc(ctx, e.app, func(tx pgx.Tx) error {
		results, err := c.InsertMany(ctx, tx, list)
		require.NoError(t, err)
		require.Len(t, results, len(list))

		require.NoError(t, results[0].Err)
		require.False(t, results[0].Task.Replayed)
		require.Equal(t, map[string]string{"batch": "1"}, results[0].Task.Labels)
		var invalid *txenqueue.ValidationError
		require.ErrorAs(t, results[1].Err, &invalid)
		require.Len(t, invalid.Fields, 2)
		require.Nil(t, results[1].Task)
		require.NoError(t, results[2].Err)
		require.True(t, results[2].Task.Replayed)
		require.Equal(t, existing.ID, results[2].Task.ID)
		require.ErrorIs(t, results[3].Err, txenqueue.ErrKeyReused)
		require.NoError(t, results[4].Err)
		require.False(t, results[4].Task.Replayed)
		require.NoError(t, results[5].Err)
		require.True(t, results[5].Task.Replayed)
		require.Equal(t, results[4].Task.ID, results[5].Task.ID)
		inserted = []uuid.UUID{results[0].Task.ID, results[4].Task.ID}
		for _, id := range inserted {
			require.False(t, e.taskExists(id), "visible before the commit")
		}
		return nil
	})
	require.NoError(t, err)
	for _, id := range inserted {
		require.True(t, e.taskExists(id))
	}

	// Rolled back, a batch leaves nothing.
	var dropped uuid.UUID
	err = pgx.BeginFunc(ctx, e.app, func(tx pgx.Tx) error {
		results, err := c.InsertMany(ctx, tx, []txenqueue.Task{{URL: hook}})
		require.NoError(t, err)
		require.NoError(t, results[0].Err)
		dropped = results[0].Task.ID
		return errRollBack
	})
	require.ErrorIs(t, err, errRollBack)
	require.False(t, e.taskExists(dropped))

	results, err := c.InsertMany(ctx, e.app, nil)
	require.NoError(t, err)
	require.Empty(t, results)
}

// readmeGrants are the statements of the SQL block of README.md's
// "Transactional enqueue", granting to the role "shop".
func readmeGrants(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Transactional enqueue\n")
	require.True(t, ok, "README.md has no section Transactional enqueue")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sql\n")
	require.True(t, ok, "the section has no SQL block")
	block, _, _ = strings.Cut(block, "```")
	var stmts []string
	for stmt := range strings.SplitSeq(block, ";") {
		if stmt = strings.Join(strings.Fields(stmt), " "); stmt != "" {
			stmts = append(stmts, stmt)
		}
	}
	return stmts
}

// TestGrantsInTheREADME runs every statement of Insert and InsertMany as a
// role holding only the privileges README.md's "Transactional enqueue" asks
// for: its writes commit, and the tenant's signing secrets stay out of its
// reach.
func TestGrantsInTheREADME(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	// A quota, so that the count of pending tasks runs too.
	_, err := tenants.New(tenants.Config{Store: e.db}).SetLimits(ctx, e.tenant, model.Limits{MaxPendingTasks: 100}, model.ActorCLI)
	require.NoError(t, err)

	role := "txenqueue_app_" + uuid.NewString()[:8]
	ident := pgx.Identifier{role}.Sanitize()
	grants := readmeGrants(t)
	require.NotEmpty(t, grants)
	for _, stmt := range append([]string{`CREATE ROLE ` + ident + ` NOLOGIN`}, append(grants,
		`GRANT INSERT ON orders TO shop`)...) { // and the application's own table
		stmt = strings.ReplaceAll(stmt, " TO shop", " TO "+ident)
		_, err := e.app.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() {
		// Before the test's database goes: a role holding privileges in
		// it cannot be dropped.
		_, err := e.app.Exec(context.Background(), `DROP OWNED BY `+ident)
		require.NoError(t, err)
		_, err = e.app.Exec(context.Background(), `DROP ROLE `+ident)
		require.NoError(t, err)
	})

	c := e.client()
	hook := "http://127.0.0.1:9/hook"
	var ids []uuid.UUID
	err = pgx.BeginFunc(ctx, e.app, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL ROLE `+ident)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES (42, 'created')`)
		require.NoError(t, err)
		task := txenqueue.Task{URL: hook, Delay: time.Hour, IdempotencyKey: "order-42"}
		first, err := c.Insert(ctx, tx, task)
		require.NoError(t, err)
		again, err := c.Insert(ctx, tx, task) // the read of the task holding the key
		require.NoError(t, err)
		require.True(t, again.Replayed)
		results, err := c.InsertMany(ctx, tx, []txenqueue.Task{{URL: hook}, task})
		require.NoError(t, err)
		for _, r := range results {
			require.NoError(t, r.Err)
		}
		require.True(t, results[1].Task.Replayed)
		ids = []uuid.UUID{first.ID, results[0].Task.ID}
		return nil
	})
	require.NoError(t, err)
	for _, id := range ids {
		require.True(t, e.taskExists(id))
	}

	err = pgx.BeginFunc(ctx, e.app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+ident); err != nil {
			return err
		}
		var secrets []byte
		return tx.QueryRow(ctx, `SELECT signing_secrets FROM tenants LIMIT 1`).Scan(&secrets)
	})
	require.ErrorContains(t, err, "permission denied")
	require.False(t, errors.Is(err, pgx.ErrNoRows))
}

// The queriers an application holds.
var (
	_ txenqueue.Querier = pgx.Tx(nil)
	_ txenqueue.Querier = (*pgx.Conn)(nil)
	_ txenqueue.Querier = (*pgxpool.Pool)(nil)
)

// TestInsertThroughAConnection: through a connection of the application's
// own, outside a transaction, each insert commits on its own; in a
// transaction begun on it, with the transaction.
func TestInsertThroughAConnection(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.client()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.url)
	require.NoError(t, err)
	defer conn.Close(ctx)

	alone, err := c.Insert(ctx, conn, txenqueue.Task{URL: "http://127.0.0.1:9/hook"})
	require.NoError(t, err)
	require.True(t, e.taskExists(alone.ID))

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	inTx, err := c.Insert(ctx, tx, txenqueue.Task{URL: "http://127.0.0.1:9/hook"})
	require.NoError(t, err)
	require.False(t, e.taskExists(inTx.ID))
	require.NoError(t, tx.Rollback(ctx))
	require.False(t, e.taskExists(inTx.ID))
}
