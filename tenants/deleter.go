package tenants

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// DeleterStore is what a Deleter needs of Postgres. *store.DB is one.
type DeleterStore interface {
	InactiveTenants(ctx context.Context) (map[uuid.UUID]model.TenantStatus, error)
	DeleteTenantBatch(ctx context.Context, id, deleter uuid.UUID, lease time.Duration, limit int,
		done model.AuditEntry) (model.DeletionBatch, error)
}

// DeleterConfig configures NewDeleter.
type DeleterConfig struct {
	// Store is where the tenants live. Required.
	Store DeleterStore
	// Batch bounds the rows one statement deletes: tasks (each with its
	// attempts), or rows of one of the tenant's other tables. Default 1,000.
	Batch int
	// Pause is the rest between two batches, so that a tenant's deletion
	// takes a share of Postgres and other tenants' work goes on beside it.
	// Default 100ms.
	Pause time.Duration
	// Interval is how often the Deleter looks for tenants being deleted.
	// Default 5s.
	Interval time.Duration
	// Lease is how long a tenant's deletion stays this Deleter's after its
	// last batch: another node's Deleter continues it once this one has
	// stopped renewing it for that long. Default 30s.
	Lease time.Duration
	// Clock defaults to the real clock; Logger to slog.Default().
	Clock  clock.Clock
	Logger *slog.Logger
	// Progress, when set, is told of each batch done.
	Progress func(tenant uuid.UUID, b model.DeletionBatch)
}

// Deleter removes the rows of the tenants being deleted (Service.Delete),
// in the background, in bounded batches with a pause between them, never
// one statement over a whole tenant: its tasks with their attempts first,
// then its schedules, topics, publishes, flow limits, idempotency keys, API
// keys and statistics, its row last. Its audit entries and usage rows stay.
// Every node runs one; a tenant's deletion is one Deleter's at a time
// (store.DeleteTenantBatch's lease), and all of its state is in Postgres,
// so a node that stops mid-deletion leaves the rest to any other.
type Deleter struct {
	cfg DeleterConfig
	id  uuid.UUID
	// wake asks for a look before the next Interval.
	wake chan struct{}
}

// NewDeleter returns a Deleter; nothing runs until Run.
func NewDeleter(cfg DeleterConfig) *Deleter {
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 100 * time.Millisecond
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Deleter{cfg: cfg, id: uuid.New(), wake: make(chan struct{}, 1)}
}

// Wake has the Deleter look for tenants to delete now rather than at its
// next Interval. It never blocks.
func (d *Deleter) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run deletes until ctx ends, and returns nil then.
func (d *Deleter) Run(ctx context.Context) error {
	t := d.cfg.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
			t.Stop()
		case <-t.C():
		}
		d.pass(ctx)
		t.Reset(d.cfg.Interval)
	}
}

// pass deletes every tenant being deleted that no other Deleter holds.
func (d *Deleter) pass(ctx context.Context) {
	inactive, err := d.cfg.Store.InactiveTenants(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("looking for tenants to delete failed; will retry", "err", err)
		}
		return
	}
	for id, status := range inactive {
		if status == model.TenantDeleting && !d.deleteTenant(ctx, id) {
			return
		}
	}
}

// deleteTenant deletes tenant batch by batch until it is gone, another
// Deleter holds it, or a batch fails; it reports whether to go on with the
// other tenants (false once ctx has ended).
func (d *Deleter) deleteTenant(ctx context.Context, tenant uuid.UUID) bool {
	done := model.AuditEntry{TenantID: &tenant, Actor: model.ActorOperator, Action: AuditDeletionFinished}
	for {
		b, err := d.cfg.Store.DeleteTenantBatch(ctx, tenant, d.id, d.cfg.Lease, d.cfg.Batch, done)
		switch {
		case ctx.Err() != nil:
			return false
		case errors.Is(err, model.ErrNotFound), errors.Is(err, model.ErrConflict):
			// Finished by another Deleter meanwhile.
			return true
		case err != nil:
			d.cfg.Logger.Error("deleting a batch of a tenant failed; will retry", "tenant", tenant, "err", err)
			return true
		case b.Busy:
			return true
		}
		if d.cfg.Progress != nil {
			d.cfg.Progress(tenant, b)
		}
		if b.Done {
			d.cfg.Logger.Info("tenant deleted", "tenant", tenant)
			return true
		}
		t := d.cfg.Clock.NewTimer(d.cfg.Pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}
