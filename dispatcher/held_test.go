package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// fakeInactive is a heldStore answering what the test sets.
type fakeInactive struct {
	mu       sync.Mutex
	statuses map[uuid.UUID]model.TenantStatus
	paused   []model.PausedTarget
}

func (f *fakeInactive) InactiveTenants(context.Context) (map[uuid.UUID]model.TenantStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[uuid.UUID]model.TenantStatus, len(f.statuses))
	for id, s := range f.statuses {
		out[id] = s
	}
	return out, nil
}

func (f *fakeInactive) PausedTargets(context.Context) ([]model.PausedTarget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]model.PausedTarget(nil), f.paused...), nil
}

func (f *fakeInactive) set(statuses map[uuid.UUID]model.TenantStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = statuses
}

// TestHeldTenants: the set is known before Run says it is ready, is read
// again when a change is announced (not only at the backstop's interval),
// and a tenant leaving it asks for the backlog to be read again.
func TestHeldTenants(t *testing.T) {
	t.Parallel()
	suspended, deleting := uuid.New(), uuid.New()
	store := &fakeInactive{
		statuses: map[uuid.UUID]model.TenantStatus{suspended: model.TenantSuspended, deleting: model.TenantDeleting}}
	released := make(chan struct{}, 1)
	h := newHeldTenants(heldConfig{Store: store, Clock: clock.Real(), Logger: quietLogger(), Metrics: testMetrics(t),
		Refresh: time.Hour, Released: func() { released <- struct{}{} }})
	require.Empty(t, h.ids())

	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); h.Run(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	receive(t, ready)
	require.True(t, h.holds(suspended))
	require.True(t, h.holds(deleting))
	require.False(t, h.holds(uuid.New()))
	require.Len(t, h.ids(), 2)
	require.Empty(t, released)

	// Resumed: heard at once, though the backstop is an hour away.
	store.set(map[uuid.UUID]model.TenantStatus{deleting: model.TenantDeleting})
	h.changed()
	receive(t, released)
	require.False(t, h.holds(suspended))
	require.Equal(t, []uuid.UUID{deleting}, h.ids())
}

// TestHeldTargets: a tenant's paused targets are held in the same read as
// the held tenants, for that tenant alone, and a target leaving the set
// asks for the backlog to be read again.
func TestHeldTargets(t *testing.T) {
	t.Parallel()
	acme, other := uuid.New(), uuid.New()
	const target = "https://partner.example:443"
	store := &fakeInactive{paused: []model.PausedTarget{{TenantID: acme, Target: target}}}
	released := make(chan struct{}, 1)
	h := newHeldTenants(heldConfig{Store: store, Clock: clock.Real(), Logger: quietLogger(), Metrics: testMetrics(t),
		Refresh: time.Hour, Released: func() { released <- struct{}{} }})
	require.False(t, h.pauses(acme, target))

	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); h.Run(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	receive(t, ready)
	require.True(t, h.pauses(acme, target))
	require.False(t, h.pauses(other, target), "a pause is the tenant's own")
	require.False(t, h.pauses(acme, "https://partner.example:8443"))
	require.False(t, h.holds(acme), "the tenant's other tasks go")
	require.Equal(t, &model.Held{Tenants: []uuid.UUID{}, TargetTenants: []uuid.UUID{acme},
		Targets: []string{model.HeldTargetKey(acme, target)}}, h.held())

	store.mu.Lock()
	store.paused = nil
	store.mu.Unlock()
	h.changed()
	receive(t, released)
	require.False(t, h.pauses(acme, target))
	require.Empty(t, h.held().Targets)
}
