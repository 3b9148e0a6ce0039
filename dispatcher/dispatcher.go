// Package dispatcher fires due tasks on time: a loader feeds a hierarchical
// timing wheel with the tasks falling due in the next window (and the API
// feeds it directly with the ones it just stored); when a timer expires,
// claimers take the task in Postgres with a status compare-and-set and a
// bounded pool of senders signs it, sends it and records the attempt. No
// goroutine waits per task: a waiting task costs one wheel entry.
//
// Each stage is a part of its own, with its inputs and outputs explicit:
// ownership (membership.go), the listener that hears what other nodes
// announce, loader, materializer, claimer (with fireOnce, holder and
// claimBudget), dispatchLimits (dispatchlimits.go, rateslots.go,
// concurrencygates.go), sender (with targets), recorder, and the deferrer
// through which every part gives claims back; upkeep (statistics, the
// purger) lives in internal/maintenance, beside the hot path. Dispatcher
// only builds and connects them, and lists the order in which they start
// and stop (stages, run by internal/lifecycle).
package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/dispatcher/wheel"
	"github.com/hookwheel/hookwheel/internal/lifecycle"
	"github.com/hookwheel/hookwheel/internal/maintenance"
	"github.com/hookwheel/hookwheel/internal/model"
)

// Dispatcher fires due tasks. Create it with New, run it with Run.
type Dispatcher struct {
	cfg    Config
	logger *slog.Logger
	// nodeID names this process in the nodes table and on its claims.
	nodeID uuid.UUID
	// stopping is set once Run's context ends.
	stopping atomic.Bool
	// timers fires each waiting task ClaimAhead before it falls due, to be
	// claimed.
	timers *wheel.Timers
	// claimed carries claims to the senders, from the claimers, the holder
	// and the limits' waker. It is bounded: when senders fall behind, the
	// claimers wait instead of memory growing.
	claimed chan *model.ClaimedTask

	ownership    *ownership
	held         *heldTenants
	listener     *listener
	loader       *loader
	materializer *materializer
	budget       *claimBudget
	claimer      *claimer
	holder       *holder
	deferrer     *deferrer
	limits       *dispatchLimits
	targets      *targets
	shares       *shares
	sender       *sender
	// sends is the context of every webhook send; cancelSends cuts off the
	// sends still in flight ShutdownTimeout after Run's context ended.
	sends       context.Context
	cancelSends context.CancelFunc
	recorder    *recorder
	journal     *answerJournal
	health      *targetHealth
	stats       *maintenance.StatsRecorder
	purger      *maintenance.Purger
}

// New returns a Dispatcher; nothing runs until Run.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:     cfg,
		logger:  cfg.Logger,
		nodeID:  uuid.New(),
		claimed: make(chan *model.ClaimedTask, cfg.SendersPerTenant),
		budget:  newClaimBudget(cfg.MaxClaimed),
	}
	redis := newOptionalRedis(cfg, m)
	d.journal = redis.journal
	// Each part is built after the parts whose functions it takes (parts.go).
	d.ownership = d.buildOwnership(m, redis)
	d.loader = d.buildLoader(m)
	d.held = newHeldTenants(heldConfig{Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Refresh: cfg.HeldRefresh, Released: d.loader.askRescan})
	d.listener = d.buildListener(m)
	d.materializer = d.buildMaterializer(m)
	d.deferrer = d.buildDeferrer(m, redis)
	d.holder = newHolder(holderConfig{Clock: cfg.Clock, Send: d.claimed, Stopping: d.stopping.Load})
	d.targets = d.buildTargets()
	if err := cfg.Registerer.Register(newTargetCollector(d.targets, cfg.MetricsTopTargets)); err != nil {
		return nil, fmt.Errorf("dispatcher: register target metrics: %w", err)
	}
	d.shares = d.buildShares()
	d.limits = d.buildLimits(m, redis)
	d.claimer = d.buildClaimer(m, redis)
	d.timers = wheel.NewTimers(wheel.TimersConfig{Clock: cfg.Clock, Fire: d.claimer.fire})
	d.recorder = d.buildRecorder(m)
	d.health = d.buildHealth(m)
	d.stats = d.buildStats(m)
	d.sends, d.cancelSends = context.WithCancel(context.Background())
	d.sender = d.buildSender(m, redis)
	if d.purger, err = d.buildPurger(m); err != nil {
		return nil, err
	}
	if err := registerGauges(cfg.Registerer, d.gaugeReads()); err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	return d, nil
}

// Lookahead is the window the dispatcher keeps loaded: a task stored with a
// due time closer than this must be announced (Schedule, or NOTIFY).
func (d *Dispatcher) Lookahead() time.Duration { return d.cfg.Lookahead }

// Schedule tells the dispatcher of a task stored (committed) with next
// attempt due at at. It goes into the wheel when it falls inside the loaded
// window and in a partition this node owns; otherwise the loader (here or on
// the owning node) will find it in time.
func (d *Dispatcher) Schedule(id uuid.UUID, at time.Time) {
	if d.loader.window.covers(at) && d.ownership.owns(id) {
		d.arm(id, at)
	}
}

// arm sets a task's timer: it fires ClaimAhead before the task is due,
// rounded down to the ClaimGroup it falls in.
func (d *Dispatcher) arm(id uuid.UUID, at time.Time) {
	d.timers.Schedule(id, at.Add(-d.cfg.ClaimAhead).Truncate(d.cfg.ClaimGroup))
}

// Cancel removes a task's timer, if this dispatcher holds one.
func (d *Dispatcher) Cancel(id uuid.UUID) {
	d.timers.Cancel(id)
}

// Run dispatches until ctx is done, then stops taking work, finishes the
// sends in flight and returns.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.cancelSends()
	lifecycle.Run(ctx, d.stages(ctx))
	// Claims given back during the stop may still be being written for
	// their callers (deferrer.Defer).
	d.deferrer.wait()
	d.logger.Info("dispatcher stopped")
	return nil
}

// stages is the order in which Run starts the parts and, in reverse, stops
// them once ctx has ended: a part is started after the parts it hands work
// to and stopped before them, so nothing is handed to a part that has
// returned. Most parts return as ctx ends and are only waited for, in this
// order; those that drain an input are stopped by closing it.
func (d *Dispatcher) stages(ctx context.Context) []lifecycle.Stage {
	var (
		partitionsKnown = make(chan struct{})
		heldKnown       = make(chan struct{})
		wheelDone       = make(chan struct{})
		sendersDone     = make(chan struct{})
	)
	// The statistics and target health outlive ctx until the last attempt
	// is counted.
	statsCtx, stopStats := context.WithCancel(context.WithoutCancel(ctx))
	healthCtx, stopHealth := context.WithCancel(context.WithoutCancel(ctx))
	return []lifecycle.Stage{
		// Stopped last: everything we claimed is recorded or given back,
		// so our partitions are freed for the other nodes now rather than
		// when their leases run out.
		{Stop: d.leaveCluster},
		// Target health hears of the attempts the recorders committed: it
		// stops, reporting what it holds, once they have returned.
		{Parts: []lifecycle.Part{func(context.Context) { d.health.Run(healthCtx) }}, Stop: stopHealth},
		// The recorders write every attempt the senders made: their queue
		// is closed once nothing that records can still be running.
		{Parts: lifecycle.Times(d.cfg.Recorders, func(context.Context) { d.recorder.Run() }), Stop: d.recorder.close},
		// The answer journal writes the senders' marks: it stops once they
		// have returned (a nil journal, without Redis, returns at once).
		{Parts: []lifecycle.Part{d.journal.Run}, Stop: d.journal.close},
		// The targets' watch and the shares' trim give stuck and parked
		// claims back while the senders run.
		{Parts: []lifecycle.Part{d.targets.Run, d.sender.watchShares}},
		// The statistics count the senders' attempts: they stop, writing
		// what they hold, once the senders have returned.
		{Parts: []lifecycle.Part{func(context.Context) { d.stats.Run(statsCtx) }}, Stop: stopStats},
		// The senders send until their channel is closed, once the claimers,
		// the holder and the limits' waker no longer write to it; then the
		// shutdown bound has nothing left to cut off.
		{
			Parts:   []lifecycle.Part{func(context.Context) { d.sender.Run() }},
			Stop:    func() { close(d.claimed) },
			Stopped: func() { close(sendersDone) },
		},
		// The limits' waker hands claims that waited for a concurrency slot
		// to the senders; those still waiting are given back as it stops.
		{Parts: []lifecycle.Part{d.limits.run}},
		// The send wheel hands held claims to the senders at their instant;
		// those still held when it has stopped are given back unsent, due as
		// they were: the next dispatcher sends them.
		{
			Parts:   []lifecycle.Part{d.runSendWheel},
			Stopped: func() { d.deferrer.Defer(d.holder.takeAll(), asDue) },
		},
		// The claimers hand claims to the holder, the limits and the senders.
		{Parts: lifecycle.Times(d.cfg.Claimers, d.claimer.Run)},
		// The timing wheel fires into the claimers. It may be blocked handing
		// a fired task to a claimer that has quit; what it holds is still
		// waiting in Postgres, so it is dropped until the wheel has returned.
		{
			Parts: []lifecycle.Part{func(ctx context.Context) { defer close(wheelDone); d.runTimingWheel(ctx) }},
			Stop:  func() { d.claimer.dropFired(wheelDone) },
		},
		// Whose tasks are held is known before anything is loaded or
		// claimed.
		{Parts: []lifecycle.Part{func(ctx context.Context) { d.held.Run(ctx, heldKnown) }}, Ready: heldKnown},
		// Ownership tells the parts before and after it which partitions are
		// ours: know them before loading anything.
		{Parts: []lifecycle.Part{func(ctx context.Context) { d.ownership.Run(ctx, partitionsKnown) }}, Ready: partitionsKnown},
		// The feeders arm the wheel and announce tasks; the purger, beside
		// them, only deletes.
		{Parts: []lifecycle.Part{d.listener.Run, d.loader.Run, d.materializer.Run, d.purger.Run}},
		// Stopped first, as ctx ends: nothing more is held or parked, and
		// the sends in flight have ShutdownTimeout to finish.
		{Stop: func() {
			d.stopping.Store(true)
			d.logger.Info("dispatcher stopping: finishing sends in flight", "at_most", d.cfg.ShutdownTimeout)
			d.boundSends(sendersDone)
		}},
	}
}

// Breakers reports the circuit breaker of every target this node has sent to.
func (d *Dispatcher) Breakers() []BreakerStatus { return d.targets.statuses() }

// TenantTargets reports the targets tenant's tasks went to on this node in
// the last Breaker.IdleAfter, as the tenant may see them.
func (d *Dispatcher) TenantTargets(tenant uuid.UUID) []TenantTarget {
	return d.targets.tenantTargets(tenant)
}

// NodeID names this dispatcher in the nodes table and on its claims.
func (d *Dispatcher) NodeID() uuid.UUID { return d.nodeID }
