package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestListener: tasks other nodes store with a NOTIFY are announced, and
// membership changes are told, both heard on one connection; (re)connecting
// is reported, since announcements made meanwhile are lost.
func TestListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.DB(t)
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	fake := clock.NewFake(time.Now())
	announced := make(chan dueAt, 16)
	changes := make(chan model.MembershipChange, 16)
	listening := make(chan struct{}, 1)
	l := newListener(listenerConfig{
		Store: db, Clock: fake, Logger: quietLogger(), Metrics: testMetrics(t),
		Due:        func(id uuid.UUID, at time.Time) { announced <- dueAt{id, at} },
		Membership: func(c model.MembershipChange) { changes <- c },
		Listening:  func() { listening <- struct{}{} },
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	receive(t, listening)

	task := &model.Task{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant, URL: "https://receiver.example/x", Method: "POST",
		RunAt: fake.Now().Add(5 * time.Second).Truncate(time.Microsecond), Timeout: 5 * time.Second,
		MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute,
	}
	_, _, err := db.InsertTask(ctx, task, true)
	require.NoError(t, err)
	got := receive(t, announced)
	require.Equal(t, task.ID, got.id)
	require.True(t, task.RunAt.Equal(got.at))

	node := uuid.New()
	_, err = db.Heartbeat(ctx, node, "other", time.Minute)
	require.NoError(t, err)
	require.Equal(t, model.MembershipChange{Node: node, Event: model.MembershipJoined}, receive(t, changes))
	require.NoError(t, db.LeaveNode(ctx, node))
	require.Equal(t, model.MembershipChange{Node: node, Event: model.MembershipLeft}, receive(t, changes))
}
