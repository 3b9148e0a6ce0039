package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/store"
)

// insertHook runs during before the batch insert reaches Postgres: what it
// does happens while the statement would be in flight, after the service
// decided which tasks the statement announces and before they are visible.
type insertHook struct {
	*store.DB
	during func()
}

func (s insertHook) InsertTasks(ctx context.Context, ts []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error) {
	s.during()
	return s.DB.InsertTasks(ctx, ts, notifyBefore)
}

// announced records what the service announces to its local dispatcher.
type announced struct {
	mu  sync.Mutex
	ids map[uuid.UUID]time.Time
}

func (a *announced) Schedule(id uuid.UUID, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids[id] = at
}
func (a *announced) Cancel(uuid.UUID)         {}
func (a *announced) Lookahead() time.Duration { return 30 * time.Second }
func (a *announced) has(id uuid.UUID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.ids[id]
	return ok
}

// TestLoaderPassDuringInsertStillGetsTask: the service decides which tasks
// its insert statement announces from the clock before the insert; a loader
// pass that starts while the insert is in flight widens the window past a
// task due just beyond that decision, reads before the insert commits, and
// moves its cursor past the task. The service must announce that task after
// the commit, to the local dispatcher and on DueNotifyChannel within a
// window the pass already covers, or only the sweep would find it,
// SweepInterval or more after it fell due.
func TestLoaderPassDuringInsertStillGetsTask(t *testing.T) {
	t.Parallel()
	b := setupLoader(t)
	ctx := context.Background()
	notified := listenDueTasks(t, b.db)
	cursor, ok := b.loader.load(ctx, model.DueCursor{})
	require.True(t, ok)

	ann := &announced{ids: map[uuid.UUID]time.Time{}}
	svc, err := tasks.New(tasks.Config{
		Store: insertHook{DB: b.db, during: func() {
			// 200 ms into the insert statement, this node's load tick.
			b.clock.Advance(200 * time.Millisecond)
			cursor, ok = b.loader.load(ctx, cursor)
			require.True(t, ok)
		}},
		Announcer: ann, Clock: b.clock,
	})
	require.NoError(t, err)

	// Due 100 ms past the window as the service sees it when it decides.
	due := b.clock.Now().Add(30*time.Second + 100*time.Millisecond).Truncate(time.Microsecond)
	res, err := svc.CreateBatch(ctx, &model.Tenant{ID: b.tenant}, []*model.Task{{
		URL: "https://receiver.example/x", Method: "POST", Body: []byte(`{}`), RunAt: due,
		Timeout: 5 * time.Second, MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute,
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	id := res[0].Task.ID
	require.True(t, b.loader.window.covers(due), "the pass during the insert widened the window past the task")

	// The following passes read only the slices after the cursor.
	for range 3 {
		b.clock.Advance(time.Second)
		cursor, ok = b.loader.load(ctx, cursor)
		require.True(t, ok)
	}
	_, loaded := b.armedIDs()[id]
	require.True(t, loaded || ann.has(id), "task due %s was neither announced nor loaded into the wheel", due)

	// Another owner hears of it through Postgres, due within the window its
	// own pass during the insert widened, so its Schedule arms it.
	deadline := time.After(10 * time.Second)
	for {
		select {
		case d := <-notified:
			if d.ID != id {
				continue
			}
			require.True(t, due.Equal(d.At), "announced due at %s, stored due at %s", d.At, due)
			require.True(t, b.loader.window.covers(d.At))
			return
		case <-deadline:
			require.FailNow(t, "task never announced on the due channel", "task %s due %s", id, due)
		}
	}
}

// listenDueTasks hears DueNotifyChannel on db until the test ends.
func listenDueTasks(t *testing.T, db *store.DB) <-chan model.DueTask {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	got := make(chan model.DueTask, 64)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- db.ListenDue(ctx, func() { close(ready) }, func(d model.DueTask) { got <- d }) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "ListenDue returned before listening", "%v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue never became ready")
	}
	return got
}
