package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/store"
)

// slowWrites is the store with each write taking inFlight on the fake
// clock: the look-ahead window moves on while the write is in flight.
type slowWrites struct {
	*store.DB
	clock    *clock.Fake
	inFlight time.Duration
}

func (s slowWrites) InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (*model.Task, bool, error) {
	s.clock.Advance(s.inFlight)
	return s.DB.InsertTask(ctx, t, notifyDue)
}

func (s slowWrites) InsertTasks(ctx context.Context, ts []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error) {
	s.clock.Advance(s.inFlight)
	return s.DB.InsertTasks(ctx, ts, notifyBefore)
}

func (s slowWrites) RescheduleTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, notifyDue bool) (*model.Task, error) {
	s.clock.Advance(s.inFlight)
	return s.DB.RescheduleTask(ctx, tenantID, id, at, notifyDue)
}

// TestAnnouncesTasksTheWindowReachedDuringTheWrite: a task due past the
// window when the write started but inside it when the write committed is
// announced, locally and on DueNotifyChannel, as a task due sooner is; one
// past the window at the commit is not. Creating one, a batch, and
// rescheduling, alike.
func TestAnnouncesTasksTheWindowReachedDuringTheWrite(t *testing.T) {
	t.Parallel()
	_, b := setup(t, setupConfig{})
	svc, err := tasks.New(tasks.Config{
		Store:     slowWrites{DB: b.db, clock: b.clock, inFlight: 200 * time.Millisecond},
		Announcer: b.announcer, Clock: b.clock,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listening := make(chan struct{})
	heard := make(chan model.DueTask, 64)
	go func() {
		_ = b.db.ListenDue(ctx, func() { close(listening) }, func(d model.DueTask) { heard <- d })
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "not listening")
	}

	var want, notWant []uuid.UUID
	// Created: due 100 ms past the window the write started with, and 1 s.
	for _, in := range []time.Duration{100 * time.Millisecond, time.Second} {
		res, err := svc.Create(ctx, b.tenant, b.newTask(30*time.Second+in, "", ""))
		require.NoError(t, err)
		if in < 200*time.Millisecond {
			want = append(want, res.Task.ID)
		} else {
			notWant = append(notWant, res.Task.ID)
		}
	}
	batch, err := svc.CreateBatch(ctx, b.tenant, []*model.Task{
		b.newTask(time.Second, "", ""),
		b.newTask(30*time.Second+100*time.Millisecond, "", ""),
		b.newTask(31*time.Second, "", ""),
	})
	require.NoError(t, err)
	for _, r := range batch {
		require.NoError(t, r.Err)
	}
	want = append(want, batch[0].Task.ID, batch[1].Task.ID)
	notWant = append(notWant, batch[2].Task.ID)

	far := b.create(t, svc, time.Hour)
	_, err = svc.Reschedule(ctx, b.tenant.ID, far.ID, b.clock.Now().Add(30*time.Second+100*time.Millisecond))
	require.NoError(t, err)
	want = append(want, far.ID)

	local := map[uuid.UUID]bool{}
	for _, c := range b.announcer.scheduledCalls() {
		local[c.ID] = true
	}
	for _, id := range want {
		require.True(t, local[id], "task %s not told to the local dispatcher", id)
	}
	for _, id := range notWant {
		require.False(t, local[id], "task %s past the window told to the local dispatcher", id)
	}

	// Notifications arrive in commit order: a marker sent last closes them.
	marker := uuid.New()
	require.NoError(t, b.db.AnnounceDue(ctx, map[uuid.UUID]time.Time{marker: b.clock.Now()}))
	got := map[uuid.UUID]int{}
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case d := <-heard:
			done = d.ID == marker
			got[d.ID]++
		case <-deadline:
			require.FailNow(t, "the marker notification never came")
		}
	}
	for _, id := range want {
		require.Equal(t, 1, got[id], "task %s: announcements on the due channel", id)
	}
	for _, id := range notWant {
		require.Zero(t, got[id], "task %s past the window announced", id)
	}
}

// disconnectAfterWrite is slowWrites with the request's context canceled as
// each write returns: the client went away right after the commit.
type disconnectAfterWrite struct {
	slowWrites
	// disconnect cancels the current request's context.
	disconnect *context.CancelFunc
}

func (s disconnectAfterWrite) InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (*model.Task, bool, error) {
	defer (*s.disconnect)()
	return s.slowWrites.InsertTask(ctx, t, notifyDue)
}

func (s disconnectAfterWrite) InsertTasks(ctx context.Context, ts []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error) {
	defer (*s.disconnect)()
	return s.slowWrites.InsertTasks(ctx, ts, notifyBefore)
}

func (s disconnectAfterWrite) RescheduleTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, notifyDue bool) (*model.Task, error) {
	defer (*s.disconnect)()
	return s.slowWrites.RescheduleTask(ctx, tenantID, id, at, notifyDue)
}

// TestAnnouncesTasksOfACanceledRequest: a request whose context is canceled
// once its write has committed still announces on DueNotifyChannel the
// tasks the window reached during the write, rather than leaving them to
// the sweep. Creating one, a batch, and rescheduling, alike.
func TestAnnouncesTasksOfACanceledRequest(t *testing.T) {
	t.Parallel()
	plain, b := setup(t, setupConfig{})
	var disconnect context.CancelFunc
	svc, err := tasks.New(tasks.Config{
		Store: disconnectAfterWrite{
			slowWrites: slowWrites{DB: b.db, clock: b.clock, inFlight: 200 * time.Millisecond},
			disconnect: &disconnect,
		},
		Announcer: b.announcer, Clock: b.clock,
	})
	require.NoError(t, err)
	// request is a fresh request context, canceled when its write returns.
	request := func() context.Context {
		ctx, cancel := context.WithCancel(t.Context())
		disconnect = cancel
		t.Cleanup(cancel)
		return ctx
	}

	listenCtx, stopListening := context.WithCancel(t.Context())
	defer stopListening()
	listening := make(chan struct{})
	heard := make(chan model.DueTask, 64)
	go func() {
		_ = b.db.ListenDue(listenCtx, func() { close(listening) }, func(d model.DueTask) { heard <- d })
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "not listening")
	}

	var want []uuid.UUID
	ctx := request()
	res, err := svc.Create(ctx, b.tenant, b.newTask(30*time.Second+100*time.Millisecond, "", ""))
	require.NoError(t, err)
	require.ErrorIs(t, ctx.Err(), context.Canceled, "the request was canceled after its write")
	want = append(want, res.Task.ID)

	batch, err := svc.CreateBatch(request(), b.tenant, []*model.Task{
		b.newTask(30*time.Second+100*time.Millisecond, "", ""),
	})
	require.NoError(t, err)
	require.NoError(t, batch[0].Err)
	want = append(want, batch[0].Task.ID)

	far := b.create(t, plain, time.Hour)
	_, err = svc.Reschedule(request(), b.tenant.ID, far.ID, b.clock.Now().Add(30*time.Second+100*time.Millisecond))
	require.NoError(t, err)
	want = append(want, far.ID)

	// Notifications arrive in commit order: a marker sent last closes them.
	marker := uuid.New()
	require.NoError(t, b.db.AnnounceDue(t.Context(), map[uuid.UUID]time.Time{marker: b.clock.Now()}))
	got := map[uuid.UUID]int{}
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case d := <-heard:
			done = d.ID == marker
			got[d.ID]++
		case <-deadline:
			require.FailNow(t, "the marker notification never came")
		}
	}
	for _, id := range want {
		require.Equal(t, 1, got[id], "task %s of a canceled request: announcements on the due channel", id)
	}
}
