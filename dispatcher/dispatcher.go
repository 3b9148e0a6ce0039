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
// concurrencygates.go), sender (with targets), recorder, the statsRecorder
// that counts what the attempts did for GET /v1/stats, the deferrer through
// which every part gives claims back, and the purger (retention.go) that
// deletes finished tasks.
// Dispatcher only builds and connects them, and stops them in order.
package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/dispatcher/wheel"
	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
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
	stats       *statsRecorder
	purger      *purger
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
	// Optional Redis, as interfaces that are nil without it.
	var (
		fireOnceKeys  fireOnceStore
		releaser      fireOnceReleaser
		limiter       dispatchLimiter
		redisFailOpen = failopen.New(failopen.Config{Clock: cfg.Clock})
	)
	var journal *answerJournal
	if cfg.Redis != nil {
		fireOnceKeys, releaser, limiter = cfg.Redis, cfg.Redis, cfg.Redis
		journal = newAnswerJournal(answerJournalConfig{Store: cfg.Redis, Clock: cfg.Clock,
			TTL: 4 * cfg.NodeTTL, Logger: cfg.Logger, Metrics: m})
	}

	d.ownership = newOwnership(ownershipConfig{
		Store: cfg.DB, FireOnce: releaser, Journal: journal, NodeID: d.nodeID, NodeName: cfg.NodeName,
		SucceedNamesakes: cfg.SucceedNamesakes, NodeTTL: cfg.NodeTTL, HeartbeatInterval: cfg.HeartbeatInterval, NudgeGap: heartbeatNudgeGap,
		FenceMargin: fenceMarginOf(cfg.NodeTTL),
		Clock:       cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Gained: func(p []int16) { d.loader.takeOver(p) },
		// The look reads every task due (store.StaleClaims): 600 ms for a
		// backlog of 400,000, on a goroutine of its own. It finds hung
		// sends, whose leases lapsed, and is the net under any dead node's
		// claim a look at a membership change did not see.
		Schedule: d.Schedule, RecoverInterval: cfg.SweepInterval,
	})
	d.loader = newLoader(loaderConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Lookahead: cfg.Lookahead, LoadInterval: cfg.LoadInterval, SweepInterval: cfg.SweepInterval,
		Partitions: d.ownership.partitions,
		Arm:        d.arm,
		Pending:    func(id uuid.UUID) bool { return d.budget.inFlight(id) || d.timers.Contains(id) },
	})
	d.listener = newListener(listenerConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Due: d.Schedule, Membership: d.ownership.heard,
		// Announcements made while not listening are lost: read the window
		// again, and heartbeat in case partitions were freed meanwhile.
		Listening: func() { d.loader.askRescan(); d.ownership.nudge() },
	})
	d.materializer = newMaterializer(materializerConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Lookahead: cfg.Lookahead, Partitions: d.ownership.partitions, Schedule: d.Schedule,
	})
	d.deferrer = newDeferrer(deferrerConfig{
		Store: cfg.DB, FireOnce: releaser, Logger: cfg.Logger, Metrics: m,
		Settle: d.budget.settle, Schedule: d.Schedule, Stopping: d.stopping.Load,
	})
	d.holder = newHolder(holderConfig{Clock: cfg.Clock, Send: d.claimed, Stopping: d.stopping.Load})
	d.targets = newTargets(targetsConfig{
		Breaker: cfg.Breaker, MaxInflight: cfg.MaxPerTarget, MaxWaiting: cfg.MaxWaitingPerTarget, Clock: cfg.Clock,
		Shed: func(claims []*model.ClaimedTask, waits []time.Duration) { d.sender.shed(claims, waits) },
		OnChange: func(tenant uuid.UUID, key string, from, to gobreaker.State) {
			d.logger.Warn("circuit breaker changed state", "tenant", tenant, "target", key, "from", from.String(), "to", to.String())
		},
	})
	if err := cfg.Registerer.Register(newTargetCollector(d.targets, cfg.MetricsTopTargets)); err != nil {
		return nil, fmt.Errorf("dispatcher: register target metrics: %w", err)
	}
	d.shares = newShares(sharesConfig{
		MaxTotal: cfg.Senders, MaxPerTenant: cfg.SendersPerTenant,
		MaxBytes: cfg.SendBytes, MaxBytesPerTenant: cfg.SendBytesPerTenant,
		MaxWaitingPerTenant: cfg.MaxWaitingPerTenant, MaxWaitingDrained: cfg.MaxClaimed, Clock: cfg.Clock,
	})
	d.limits = newDispatchLimits(limitsConfig{
		Limiter: limiter, Limits: cfg.DB, Defaults: cfg.DefaultLimits,
		// Its own window: the limiter failing says nothing of the
		// fire-once keys, and the other way round.
		Down:  failopen.New(failopen.Config{Clock: cfg.Clock}),
		Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Defer: d.deferrer.Defer, HoldUntil: d.holder.holdUntil, Send: d.claimed,
		SendTime: d.targets.sendTimeOf, LeaseMargin: cfg.LeaseMargin, MaxWaitingPerTarget: cfg.MaxWaitingPerTarget,
	})
	fireOnce := newFireOnce(fireOnceConfig{
		Redis: fireOnceKeys, Down: redisFailOpen, LeaseMargin: cfg.LeaseMargin,
		Logger: cfg.Logger, Metrics: m, Defer: d.deferrer.Defer, Clock: cfg.Clock,
	})
	d.claimer = newClaimer(claimerConfig{
		Store: cfg.DB, NodeID: d.nodeID, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Claimers: cfg.Claimers, ClaimBatch: cfg.ClaimBatch, ClaimAhead: cfg.ClaimAhead,
		ClaimGroup: cfg.ClaimGroup, ClaimLinger: cfg.ClaimLinger, LeaseMargin: cfg.LeaseMargin,
		Budget: d.budget, Partitions: d.ownership.partitions, Schedule: d.Schedule,
		LeaseEpoch: d.ownership.leaseEpoch, LeaseValid: d.ownership.leaseValid, LeaseRetry: cfg.HeartbeatInterval,
		FireOnce: fireOnce.claim, RateLimit: d.limits.rateLimitClaims,
		Hold: d.holder.hold, Send: d.claimed, Defer: d.deferrer.Defer,
	})
	d.timers = wheel.NewTimers(wheel.TimersConfig{Clock: cfg.Clock, Fire: d.claimer.fire})
	d.recorder = newRecorder(recorderConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Queue: cfg.Senders, Batch: cfg.RecordBatch, Delay: cfg.RecordDelay, GiveUpAfter: cfg.LeaseMargin,
	})
	d.stats = newStatsRecorder(statsConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Interval: cfg.StatsInterval, Keep: statsKeep,
		// As the purger's: one live node holds partition 0's lease.
		Leader: func() bool { return d.ownership.ownsPartition(0) },
	})
	d.sends, d.cancelSends = context.WithCancel(context.Background())
	d.sender = newSender(senderConfig{
		Claimed: d.claimed, Sends: d.sends, Shares: d.shares, Targets: d.targets, Limits: d.limits, Bodies: cfg.DB, Secrets: cfg.DB,
		Transports: newTransports(cfg.HTTPClient, cfg.Guard, m.transportRetries, cfg.MaxTimeout),
		Signer:     signing.NewSigner(signing.SignerConfig{}), Keyring: cfg.Keyring,
		Journal: journal, Record: d.recorder.record, Stats: d.stats.add, Defer: d.deferrer.Defer, Settle: d.budget.settle,
		Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Schedule: d.Schedule, Stopping: d.stopping.Load, Fence: d.mayStillSend,
		MaxTimeout: cfg.MaxTimeout, DefaultMaxTimeout: cfg.DefaultLimits.MaxTimeout,
		LeaseMargin: cfg.LeaseMargin, UserAgent: cfg.UserAgent,
		MaxResponseBody: cfg.MaxResponseBody, Rand: cfg.Rand,
	})
	retention := cfg.Retention
	if retention == KeepForever {
		retention = 0
	}
	auditRetention := cfg.AuditRetention
	if auditRetention == KeepForever {
		auditRetention = 0
	}
	d.purger = newPurger(purgerConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Retention: retention, AuditRetention: auditRetention, Interval: cfg.RetentionInterval, Batch: cfg.RetentionBatch,
		IdempotencyWindow: max(0, cfg.IdempotencyWindow),
		// Any one partition would do: exactly one live node holds its
		// lease, and during a handover two may both purge for a moment,
		// which only deletes the same rows (each skips those the other
		// has locked).
		Leader: func() bool { return d.ownership.ownsPartition(0) },
	})
	if err := registerGauges(cfg.Registerer, gaugeReads{
		wheelTimers:    func() float64 { return float64(d.timers.Len()) },
		dueQueue:       func() float64 { return float64(d.claimer.queued()) },
		limitsWaiting:  d.limits.waitingCount,
		sending:        func() float64 { n, _, _ := d.shares.totals(); return float64(n) },
		sendingBytes:   func() float64 { _, b, _ := d.shares.totals(); return float64(b) },
		shareWaiting:   func() float64 { _, _, w := d.shares.totals(); return float64(w) },
		targets:        func() float64 { return float64(d.targets.count()) },
		oldestFinished: d.purger.oldestAge,
	}); err != nil {
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
	var (
		feeders   sync.WaitGroup
		claimers  sync.WaitGroup
		senders   sync.WaitGroup
		recorders sync.WaitGroup
		wheelDone = make(chan struct{})
	)
	// Know our partitions before loading anything.
	ready := make(chan struct{})
	feeders.Add(1)
	go func() { defer feeders.Done(); d.ownership.Run(ctx, ready) }()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	feeders.Add(4)
	go func() { defer feeders.Done(); d.listener.Run(ctx) }()
	go func() { defer feeders.Done(); d.loader.Run(ctx) }()
	go func() { defer feeders.Done(); d.materializer.Run(ctx) }()
	go func() { defer feeders.Done(); d.purger.Run(ctx) }()
	go func() {
		defer close(wheelDone)
		if err := d.timers.Run(ctx); err != nil {
			d.logger.Error("timing wheel stopped", "err", err)
		}
	}()
	sendWheelDone := make(chan struct{})
	go func() {
		defer close(sendWheelDone)
		if err := d.holder.Run(ctx); err != nil {
			d.logger.Error("send wheel stopped", "err", err)
		}
	}()
	for range d.cfg.Claimers {
		claimers.Add(1)
		go func() { defer claimers.Done(); d.claimer.Run(ctx) }()
	}
	limitsDone := make(chan struct{})
	go func() { defer close(limitsDone); d.limits.run(ctx) }()
	for range d.cfg.Recorders {
		recorders.Add(1)
		go func() { defer recorders.Done(); d.recorder.Run() }()
	}
	senders.Add(1)
	go func() { defer senders.Done(); d.sender.Run() }()
	// The statistics outlive ctx until the last attempt is counted.
	statsCtx, stopStats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStats()
	statsDone := make(chan struct{})
	go func() { defer close(statsDone); d.stats.Run(statsCtx) }()
	targetsDone := make(chan struct{})
	go func() { defer close(targetsDone); d.targets.Run(ctx) }()
	sharesDone := make(chan struct{})
	go func() { defer close(sharesDone); d.sender.watchShares(ctx) }()

	<-ctx.Done()
	d.stopping.Store(true)
	d.logger.Info("dispatcher stopping: finishing sends in flight", "at_most", d.cfg.ShutdownTimeout)
	// Sends still waiting for their answer when the bound passes are cut
	// off and recorded as interrupted, due again at once.
	bound := d.cfg.Clock.NewTimer(d.cfg.ShutdownTimeout)
	defer bound.Stop()
	sendersDone := make(chan struct{})
	go func() {
		select {
		case <-bound.C():
			d.logger.Warn("shutdown timeout reached: interrupting the sends still in flight")
			d.cancelSends()
		case <-sendersDone:
		}
	}()
	defer d.cancelSends()
	feeders.Wait()
	// The wheel may be blocked handing a fired task to a claimer that has
	// quit; what it holds is still waiting in Postgres, so drop it.
	d.claimer.dropFired(wheelDone)
	claimers.Wait()
	<-sendWheelDone
	// Claims still waiting for their instant are given back unsent, due as
	// they were: the next dispatcher sends them.
	d.deferrer.Defer(d.holder.takeAll(), asDue)
	// Claims waiting for a concurrency slot are given back too; the waker
	// hands claims to the senders, so it must be done before they stop.
	<-limitsDone
	close(d.claimed)
	senders.Wait()
	close(sendersDone)
	stopStats()
	<-statsDone
	<-targetsDone
	<-sharesDone
	d.recorder.close()
	recorders.Wait()
	// Everything we claimed is recorded or given back: free our partitions
	// for the other nodes now rather than when the leases run out.
	leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.cfg.DB.LeaveNode(leaveCtx, d.nodeID); err != nil {
		d.logger.Warn("leaving the cluster failed; our partitions move when their leases expire", "err", err)
	}
	d.logger.Info("dispatcher stopped")
	return nil
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
