package txenqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/txenqueue"
)

// TestCommitDelivers: a task inserted in the application's transaction
// beside its own row is invisible to hookwheel until the commit, then sent
// at its due time.
func TestCommitDelivers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startDispatcher()
	rcv := newReceiver(t)
	c := e.client()
	ctx := context.Background()

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES (42, 'created')`)
	require.NoError(t, err)
	task, err := c.Insert(ctx, tx, txenqueue.Task{
		URL: rcv.url, Body: []byte(`{"order": 42}`), Delay: 300 * time.Millisecond,
		Headers: map[string]string{"content-type": "application/json"},
	})
	require.NoError(t, err)
	require.Equal(t, "scheduled", task.Status)
	require.Equal(t, map[string]string{"Content-Type": "application/json"}, task.Headers)
	require.False(t, task.Replayed)
	require.False(t, e.taskExists(task.ID), "hookwheel sees the task before the commit")
	require.NoError(t, tx.Commit(ctx))

	d := rcv.await(t, task.ID, 10*time.Second)
	require.Equal(t, `{"order": 42}`, d.body)
	require.False(t, d.at.Before(task.RunAt), "sent at %s, before its run_at %s", d.at, task.RunAt)
	require.Eventually(t, func() bool {
		stored, err := e.db.GetTask(ctx, e.tenant, task.ID)
		require.NoError(t, err)
		return stored.Status == model.StatusDelivered
	}, 10*time.Second, 10*time.Millisecond)
}

// TestRollbackNeverDelivers: a task whose transaction rolls back leaves no
// row and is never sent, though it fell due while a dispatcher ran.
func TestRollbackNeverDelivers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startDispatcher()
	rcv := newReceiver(t)
	c := e.client()
	ctx := context.Background()

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES (42, 'created')`)
	require.NoError(t, err)
	rolledBack, err := c.Insert(ctx, tx, txenqueue.Task{URL: rcv.url, Body: []byte(`{"order": 42}`), Delay: 200 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	// A task committed to fall due a second after it: once that one has
	// arrived, the rolled-back one would have too.
	later, err := c.Insert(ctx, e.app, txenqueue.Task{URL: rcv.url, Body: []byte(`later`), Delay: 1200 * time.Millisecond})
	require.NoError(t, err)
	rcv.await(t, later.ID, 10*time.Second)
	require.True(t, time.Now().After(rolledBack.RunAt.Add(time.Second)))
	require.False(t, rcv.received(rolledBack.ID), "a rolled-back task was sent")
	require.False(t, e.taskExists(rolledBack.ID), "a rolled-back task is stored")
	var orders int
	require.NoError(t, e.app.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders))
	require.Zero(t, orders)
}

// TestCommitAfterDueTimeDeliversAtOnce: a transaction that commits after its
// task fell due, long after every loader read past that time, still has the
// task sent within moments of the commit. The dispatcher's sweep runs once
// an hour: only the announcement made on commit can bring it.
func TestCommitAfterDueTimeDeliversAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startDispatcher()
	rcv := newReceiver(t)
	c := e.client()
	ctx := context.Background()

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	late, err := c.Insert(ctx, tx, txenqueue.Task{URL: rcv.url, Body: []byte(`late`), Delay: 200 * time.Millisecond})
	require.NoError(t, err)

	// Keep the transaction open until a task committed to fall due after
	// it has been sent: its due time has passed, and the loaders, whose
	// window runs 30 s ahead, read past it long ago.
	marker, err := c.Insert(ctx, e.app, txenqueue.Task{URL: rcv.url, Body: []byte(`marker`), Delay: 700 * time.Millisecond})
	require.NoError(t, err)
	rcv.await(t, marker.ID, 10*time.Second)
	require.False(t, rcv.received(late.ID))
	require.True(t, time.Now().After(late.RunAt))

	committed := time.Now()
	require.NoError(t, tx.Commit(ctx))
	d := rcv.await(t, late.ID, 10*time.Second)
	require.Less(t, d.at.Sub(committed), time.Second, "sent %s after the commit", d.at.Sub(committed))
}

// TestAnnouncesTasksDueWithinCommitWithin: the insert announces, on commit
// only, the tasks due before its time plus the look-ahead plus
// CommitWithin, and every task when CommitWithin is negative; a rolled-back
// insert announces nothing.
func TestAnnouncesTasksDueWithinCommitWithin(t *testing.T) {
	t.Parallel()
	e := setup(t)
	heard := e.listenDue()
	ctx := context.Background()
	url := "http://127.0.0.1:9/hook"
	now := time.Now()
	horizon := now.Add(model.DefaultLookahead + time.Minute)

	// insert stores, in one transaction, a task due just inside the
	// horizon, one just past it and a last one due now, and returns which
	// of them were announced. A transaction's notifications arrive
	// together, in order: once the last one's has, no other will.
	insert := func(commitWithin time.Duration) (inside, beyond bool) {
		c := e.client(func(cfg *txenqueue.Config) {
			cfg.CommitWithin = commitWithin
			cfg.Now = func() time.Time { return now }
		})
		tx, err := e.app.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		in, err := c.Insert(ctx, tx, txenqueue.Task{URL: url, RunAt: horizon.Add(-time.Millisecond)})
		require.NoError(t, err)
		out, err := c.Insert(ctx, tx, txenqueue.Task{URL: url, RunAt: horizon.Add(time.Millisecond)})
		require.NoError(t, err)
		last, err := c.Insert(ctx, tx, txenqueue.Task{URL: url})
		require.NoError(t, err)
		select {
		case d := <-heard:
			require.FailNow(t, "announced before the commit", "task %s", d.ID)
		default:
		}
		require.NoError(t, tx.Commit(ctx))
		for {
			select {
			case d := <-heard:
				switch d.ID {
				case in.ID:
					require.True(t, in.RunAt.Equal(d.At), "announced due at %s, stored due at %s", d.At, in.RunAt)
					inside = true
				case out.ID:
					beyond = true
				case last.ID:
					return inside, beyond
				}
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the commit announced nothing")
			}
		}
	}
	inside, beyond := insert(time.Minute)
	require.True(t, inside, "a task due within the horizon was not announced")
	require.False(t, beyond, "a task due past the horizon was announced")
	inside, beyond = insert(-1)
	require.True(t, inside && beyond, "with a negative CommitWithin every task is announced")

	// Rolled back: nothing is announced, so the next commit's announcement
	// is the first heard.
	c := e.client()
	err := pgx.BeginFunc(ctx, e.app, func(tx pgx.Tx) error {
		_, err := c.Insert(ctx, tx, txenqueue.Task{URL: url})
		require.NoError(t, err)
		return errRollBack
	})
	require.ErrorIs(t, err, errRollBack)
	next, err := c.Insert(ctx, e.app, txenqueue.Task{URL: url})
	require.NoError(t, err)
	select {
	case d := <-heard:
		require.Equal(t, next.ID, d.ID, "heard a task whose transaction rolled back")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the insert through the pool announced nothing")
	}
}

// errRollBack makes pgx.BeginFunc roll its transaction back.
var errRollBack = errorString("roll back")

type errorString string

func (e errorString) Error() string { return string(e) }
