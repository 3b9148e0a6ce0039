package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// claimStore is what the claimer needs of Postgres.
type claimStore interface {
	ClaimTasks(ctx context.Context, node uuid.UUID, partitions []int16, ids []uuid.UUID, now time.Time, leaseMargin time.Duration,
		held *model.Held) ([]*model.ClaimedTask, error)
	WaitingAfter(ctx context.Context, ids []uuid.UUID, after time.Time) ([]model.DueTask, error)
}

// claimerConfig configures newClaimer. Every field is required.
type claimerConfig struct {
	Store   claimStore
	NodeID  uuid.UUID
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Claimers is the number of goroutines that will Run; with ClaimBatch
	// it sizes the queue of fired tasks.
	Claimers    int
	ClaimBatch  int
	ClaimAhead  time.Duration
	ClaimGroup  time.Duration
	ClaimLinger time.Duration
	LeaseMargin time.Duration
	Budget      *claimBudget
	// Partitions are those this node owns: only their tasks are claimed.
	Partitions func() []int16
	// LeaseEpoch and LeaseValid read this node's own lease (ownership): a
	// node that cannot prove it holds its lease claims nothing, and every
	// claim carries the epoch it was taken under, for the sender's fence.
	// LeaseRetry is when the tasks fired meanwhile are tried again, and
	// those of a claim statement that failed.
	LeaseEpoch func() uint64
	LeaseValid func(epoch uint64, now time.Time) bool
	LeaseRetry time.Duration
	// Schedule re-arms the fired tasks that turn out to be due later.
	Schedule func(id uuid.UUID, at time.Time)
	// FireOnce takes the Redis fire-once claims of what was claimed, and
	// RateLimit decides the tenants' dispatch rates; each returns the claims
	// to send and gives back the others.
	FireOnce  func(ctx context.Context, claims []*model.ClaimedTask) []*model.ClaimedTask
	RateLimit func(claims []*model.ClaimedTask) []*model.ClaimedTask
	// Hold keeps a claim until its NextAttemptAt; Send takes the claims due
	// now.
	Hold func(c *model.ClaimedTask)
	Send chan<- *model.ClaimedTask
	// Defer gives back claims no sender will take at shutdown.
	Defer func(claims []*model.ClaimedTask, until func(i int) time.Time)
	// Held are the tenants and the tenants' targets whose tasks are held
	// (heldTenants): a claim leaves them out, and rearmMissed forgets them, still waiting in
	// Postgres until their tenant or target is released. Nil: none.
	Held func() *model.Held
	// Spans makes a span per claim statement (tracing.go).
	Spans spans
}

// firing is a task whose claim timer fired.
type firing struct {
	id uuid.UUID
	// mayLinger is set when the claim window is still ahead of the task,
	// so its claimer may wait ClaimLinger for the rest of its group.
	mayLinger bool
}

// claimer takes the tasks the wheel fires, in batches, claims them in
// Postgres and in Redis, and hands them to the senders: at once when they
// are due, or through the holder at their instant.
type claimer struct {
	cfg claimerConfig
	// due carries fired tasks from the wheel to the claimers. It is bounded:
	// when senders fall behind, the wheel waits instead of memory growing.
	due chan firing
	// gathering is held by the claimer goroutine gathering the next batch.
	gathering sync.Mutex
}

func newClaimer(cfg claimerConfig) *claimer {
	if cfg.Held == nil {
		cfg.Held = noneHeld
	}
	return &claimer{cfg: cfg, due: make(chan firing, 16*cfg.ClaimBatch*cfg.Claimers)}
}

// horizon is how far ahead of now a claim may take a task: the timer of a
// task fires at most this long before it is due.
func (cl *claimer) horizon() time.Duration { return cl.cfg.ClaimAhead + cl.cfg.ClaimGroup }

// fire is the wheel's callback for each expired claim timer, at is the
// instant the timer was set for.
func (cl *claimer) fire(id uuid.UUID, at time.Time) {
	cl.cfg.Budget.fired(id)
	// The task is due ClaimAhead after its timer or later.
	mayLinger := cl.cfg.Clock.Now().Add(2 * cl.cfg.ClaimLinger).Before(at.Add(cl.cfg.ClaimAhead))
	cl.due <- firing{id: id, mayLinger: mayLinger}
}

// queued is the number of fired tasks waiting for a claimer.
func (cl *claimer) queued() int { return len(cl.due) }

// dropFired discards fired tasks until done is closed, for a wheel blocked
// handing them to claimers that have quit: they still wait in Postgres.
func (cl *claimer) dropFired(done <-chan struct{}) {
	for {
		select {
		case <-cl.due:
			continue
		case <-done:
		}
		return
	}
}

// Run claims fired tasks in batches until ctx ends; several goroutines run
// it together.
func (cl *claimer) Run(ctx context.Context) {
	budget := cl.cfg.Budget.units
	batch := make([]uuid.UUID, 0, cl.cfg.ClaimBatch)
	linger := cl.cfg.Clock.NewTimer(time.Hour)
	linger.Stop()
	lingering := false
	for {
		batch = batch[:0]
		// One claimer gathers at a time: claimers woken together would
		// split a group the wheel fires into as many claims.
		cl.gathering.Lock()
		// One unit of budget per task taken, given back when it settles.
		select {
		case <-ctx.Done():
			cl.gathering.Unlock()
			return
		case budget <- struct{}{}:
		}
		select {
		case <-ctx.Done():
			<-budget
			cl.gathering.Unlock()
			return
		case f := <-cl.due:
			batch = append(batch, f.id)
			if f.mayLinger {
				linger.Reset(cl.cfg.ClaimLinger)
				lingering = true
			}
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case budget <- struct{}{}:
			default:
				// The budget is spent. With a backlog waiting that would fill
				// the batch, wait for settles to free enough of it: the
				// senders have a budget's worth of claims to work through,
				// and claiming the units one by one as they come back costs
				// a statement per task (measured: 6 tasks per claim, half
				// of Postgres's time per delivery).
				if len(cl.due) < cap(batch)-len(batch) {
					break fill
				}
				select {
				case budget <- struct{}{}:
				case <-ctx.Done():
					break fill
				}
			}
			select {
			case f := <-cl.due:
				batch = append(batch, f.id)
				continue
			default:
			}
			if lingering {
				select {
				case f := <-cl.due:
					batch = append(batch, f.id)
					continue
				case <-linger.C():
					lingering = false
				case <-ctx.Done():
				}
			}
			<-budget
			break fill
		}
		if lingering {
			linger.Stop()
			lingering = false
		}
		cl.gathering.Unlock()
		cl.claim(ctx, batch)
	}
}

func (cl *claimer) claim(ctx context.Context, ids []uuid.UUID) {
	if ctx.Err() != nil {
		for _, id := range ids {
			cl.cfg.Budget.settle(id)
		}
		return
	}
	// Not canceled by shutdown: a claim statement cut off mid-flight may
	// still commit, leaving claims no one knows it holds until their lease
	// runs out. Let it finish, then give back what will not be sent.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Read before the statement goes out: the lease Postgres gives the
	// claims starts later than now, and the epoch is the one the claims
	// were certainly taken under if it still holds when they are sent.
	now := cl.cfg.Clock.Now()
	epoch := cl.cfg.LeaseEpoch()
	if !cl.cfg.LeaseValid(epoch, now) {
		// Our heartbeat is late: our partitions may be another node's by
		// now. Try again once it may have renewed them; should they have
		// moved, the task is no longer ours to arm.
		for _, id := range ids {
			cl.cfg.Budget.settle(id)
			cl.cfg.Schedule(id, now.Add(cl.cfg.LeaseRetry))
		}
		return
	}
	span := cl.cfg.Spans.claim(claimCtx, len(ids))
	claims, err := cl.cfg.Store.ClaimTasks(claimCtx, cl.cfg.NodeID, cl.cfg.Partitions(), ids, now.Add(cl.horizon()), cl.cfg.LeaseMargin,
		cl.cfg.Held())
	endBatch(span, len(claims), err)
	if err != nil {
		cl.cfg.Metrics.storeErrors.WithLabelValues("claim").Inc()
		if ctx.Err() == nil {
			cl.cfg.Logger.Error("claiming due tasks failed; trying again shortly", "tasks", len(ids), "retry_in", cl.cfg.LeaseRetry, "err", err)
		}
		// The tasks still wait in Postgres (a deadlock with a statement
		// locking the same rows in another order, a connection lost): armed
		// again a moment later rather than left to the sweep, which finds
		// them only once overdue by SweepInterval. Should the claim have
		// committed after all, the next one passes over them.
		for _, id := range ids {
			cl.cfg.Budget.settle(id)
			if ctx.Err() == nil {
				cl.cfg.Schedule(id, now.Add(cl.cfg.LeaseRetry))
			}
		}
		return
	}
	cl.rearmMissed(claimCtx, ids, claims, now)
	cl.cfg.Metrics.claimBatch.Observe(float64(len(claims)))
	for _, c := range claims {
		c.ClaimedAt = now
		c.LeaseEpoch = epoch
	}
	claims = cl.cfg.FireOnce(claimCtx, claims)
	claims = cl.cfg.RateLimit(claims)

	for i, c := range claims {
		if at := *c.NextAttemptAt; at.After(cl.cfg.Clock.Now()) {
			cl.cfg.Hold(c)
			continue
		}
		select {
		case cl.cfg.Send <- c:
		case <-ctx.Done():
			// Shutting down with claims no sender will take: give them back.
			cl.cfg.Defer(claims[i:], asDue)
			return
		}
	}
}

// rearmMissed settles the fired tasks that were not claimed: canceled,
// finished, claimed by another node, or moved later. The timer of a task
// moved later is normally set already, but a loader that read the row
// before the move can arm the old time over the new one; so the tasks
// still waiting are armed again at the time Postgres has for them, and the
// others forgotten.
func (cl *claimer) rearmMissed(ctx context.Context, ids []uuid.UUID, claims []*model.ClaimedTask, now time.Time) {
	if len(claims) == len(ids) {
		return
	}
	claimedIDs := make(map[uuid.UUID]struct{}, len(claims))
	for _, c := range claims {
		claimedIDs[c.ID] = struct{}{}
	}
	var missed []uuid.UUID
	for _, id := range ids {
		if _, ok := claimedIDs[id]; !ok {
			missed = append(missed, id)
		}
	}
	if len(missed) == 0 {
		return
	}
	later, err := cl.cfg.Store.WaitingAfter(ctx, missed, now.Add(cl.horizon()))
	if err != nil {
		cl.cfg.Logger.Warn("reading unclaimed tasks failed; the sweep will find any still waiting", "tasks", len(missed), "err", err)
	}
	for _, t := range later {
		cl.cfg.Schedule(t.ID, t.At)
	}
	for _, id := range missed {
		cl.cfg.Budget.settle(id)
	}
}
