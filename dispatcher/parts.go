package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/maintenance"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
)

// New builds the parts one by one, each from what it takes of the node's
// Config and from the functions that connect it to the parts built before
// it; the builders live here so that New reads as the list of parts.

// optionalRedis is what the parts take from Redis, as interfaces that are
// nil without it.
type optionalRedis struct {
	fireOnceKeys fireOnceStore
	releaser     fireOnceReleaser
	limiter      dispatchLimiter
	journal      *answerJournal
	// down is the fire-once keys' window.
	down *failopen.Window
}

// journalWriteEvery paces the answer journal's writes: at most a thousand
// round trips a second, however many deliveries, for at most a millisecond
// more in which a node that stops leaves an answered claim unmarked: little
// beside the recorder's wait of up to RecordDelay before it commits.
const journalWriteEvery = time.Millisecond

func newOptionalRedis(cfg Config, m *metrics) optionalRedis {
	r := optionalRedis{down: failopen.New(failopen.Config{Clock: cfg.Clock})}
	if cfg.Redis != nil {
		r.fireOnceKeys, r.releaser, r.limiter = cfg.Redis, cfg.Redis, cfg.Redis
		r.journal = newAnswerJournal(answerJournalConfig{Store: cfg.Redis, Clock: cfg.Clock,
			TTL: 4 * cfg.NodeTTL, WriteEvery: journalWriteEvery, Logger: cfg.Logger, Metrics: m})
	}
	return r
}

func (d *Dispatcher) buildOwnership(m *metrics, redis optionalRedis) *ownership {
	cfg := d.cfg
	return newOwnership(ownershipConfig{
		Store: cfg.DB, FireOnce: redis.releaser, Journal: redis.journal, NodeID: d.nodeID, NodeName: cfg.NodeName,
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
}

func (d *Dispatcher) buildLoader(m *metrics) *loader {
	cfg := d.cfg
	return newLoader(loaderConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Lookahead: cfg.Lookahead, LoadInterval: cfg.LoadInterval, SweepInterval: cfg.SweepInterval,
		Partitions: d.ownership.partitions,
		Arm:        d.arm,
		Pending:    func(id uuid.UUID) bool { return d.budget.inFlight(id) || d.timers.Contains(id) },
		Held:       func() *model.Held { return d.held.held() },
	})
}

func (d *Dispatcher) buildListener(m *metrics) *listener {
	cfg := d.cfg
	return newListener(listenerConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Due: d.Schedule, Membership: d.ownership.heard,
		Tenant: func(id uuid.UUID) {
			d.held.changed()
			cfg.TenantChanged(id)
		},
		// Announcements made while not listening are lost: read the window
		// and the held tenants again, and heartbeat in case partitions were
		// freed meanwhile.
		Listening: func() {
			d.loader.askRescan()
			d.ownership.nudge()
			d.held.changed()
			cfg.TenantChanged(uuid.Nil)
		},
	})
}

func (d *Dispatcher) buildMaterializer(m *metrics) *materializer {
	cfg := d.cfg
	return newMaterializer(materializerConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Lookahead: cfg.Lookahead, Partitions: d.ownership.partitions, Schedule: d.Schedule,
		DefaultTasksPerDay: cfg.DefaultLimits.TasksPerDay, DefaultMaxPendingTasks: cfg.DefaultLimits.MaxPendingTasks,
	})
}

func (d *Dispatcher) buildDeferrer(m *metrics, redis optionalRedis) *deferrer {
	cfg := d.cfg
	return newDeferrer(deferrerConfig{
		Store: cfg.DB, FireOnce: redis.releaser, Logger: cfg.Logger, Metrics: m,
		Settle: d.budget.settle, Schedule: d.Schedule, Stopping: d.stopping.Load,
		// The sender is built later; deferrals start once the parts run.
		Expire: func(c *model.ClaimedTask, now time.Time) { d.sender.expire(c, now) }, Clock: cfg.Clock,
	})
}

func (d *Dispatcher) buildTargets() *targets {
	cfg := d.cfg
	return newTargets(targetsConfig{
		Breaker: cfg.Breaker, MaxInflight: cfg.MaxPerTarget, MaxWaiting: cfg.MaxWaitingPerTarget, Clock: cfg.Clock,
		Shed: func(claims []*model.ClaimedTask, waits []time.Duration) { d.sender.shed(claims, waits) },
		OnChange: func(tenant uuid.UUID, key string, from, to gobreaker.State) {
			d.logger.Warn("circuit breaker changed state", "tenant", tenant, "target", key, "from", from.String(), "to", to.String())
		},
	})
}

func (d *Dispatcher) buildShares() *shares {
	cfg := d.cfg
	return newShares(sharesConfig{
		MaxTotal: cfg.Senders, MaxPerTenant: cfg.SendersPerTenant,
		MaxBytes: cfg.SendBytes, MaxBytesPerTenant: cfg.SendBytesPerTenant,
		MaxWaitingPerTenant: cfg.MaxWaitingPerTenant, MaxWaitingDrained: cfg.MaxClaimed, Clock: cfg.Clock,
	})
}

func (d *Dispatcher) buildLimits(m *metrics, redis optionalRedis) *dispatchLimits {
	cfg := d.cfg
	return newDispatchLimits(limitsConfig{
		Limiter: redis.limiter, Limits: cfg.DB, Defaults: cfg.DefaultLimits,
		// Its own window: the limiter failing says nothing of the
		// fire-once keys, and the other way round.
		Down:  failopen.New(failopen.Config{Clock: cfg.Clock}),
		Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Defer: d.deferrer.Defer, HoldUntil: d.holder.holdUntil, Send: d.claimed,
		SendTime: d.targets.sendTimeOf, LeaseMargin: cfg.LeaseMargin, MaxWaitingPerTarget: cfg.MaxWaitingPerTarget,
	})
}

func (d *Dispatcher) buildClaimer(m *metrics, redis optionalRedis) *claimer {
	cfg := d.cfg
	fireOnce := newFireOnce(fireOnceConfig{
		Redis: redis.fireOnceKeys, Down: redis.down, LeaseMargin: cfg.LeaseMargin,
		Logger: cfg.Logger, Metrics: m, Defer: d.deferrer.Defer, Clock: cfg.Clock,
	})
	return newClaimer(claimerConfig{
		Store: cfg.DB, NodeID: d.nodeID, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Claimers: cfg.Claimers, ClaimBatch: cfg.ClaimBatch, ClaimAhead: cfg.ClaimAhead,
		ClaimGroup: cfg.ClaimGroup, ClaimLinger: cfg.ClaimLinger, LeaseMargin: cfg.LeaseMargin,
		Budget: d.budget, Partitions: d.ownership.partitions, Schedule: d.Schedule,
		LeaseEpoch: d.ownership.leaseEpoch, LeaseValid: d.ownership.leaseValid, LeaseRetry: cfg.HeartbeatInterval,
		FireOnce: fireOnce.claim, RateLimit: d.limits.rateLimitClaims,
		Hold: d.holder.hold, Send: d.claimed, Defer: d.deferrer.Defer,
		Held:  func() *model.Held { return d.held.held() },
		Spans: newSpans(cfg.TracerProvider),
	})
}

func (d *Dispatcher) buildRecorder(m *metrics) *recorder {
	cfg := d.cfg
	return newRecorder(recorderConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Queue: cfg.Senders, Batch: cfg.RecordBatch, Delay: cfg.RecordDelay, GiveUpAfter: cfg.LeaseMargin,
		Spans: newSpans(cfg.TracerProvider),
	})
}

func (d *Dispatcher) buildStats(m *metrics) *maintenance.StatsRecorder {
	cfg := d.cfg
	return maintenance.NewStatsRecorder(maintenance.StatsConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, StoreError: m.storeError,
		Interval: cfg.StatsInterval, Keep: maintenance.StatsKeep,
		// As the purger's: one live node holds partition 0's lease.
		Leader: func() bool { return d.ownership.ownsPartition(0) },
	})
}

func (d *Dispatcher) buildSender(m *metrics, redis optionalRedis) *sender {
	cfg := d.cfg
	return newSender(senderConfig{
		Claimed: d.claimed, Sends: d.sends, Shares: d.shares, Targets: d.targets, Limits: d.limits, Bodies: cfg.DB, Secrets: cfg.DB,
		Transports: newTransports(cfg.HTTPClient, cfg.Guard, m.transportRetries, cfg.MaxTimeout),
		Signer:     signing.NewSigner(signing.SignerConfig{}), Keyring: cfg.Keyring,
		Journal: redis.journal, Record: d.recorder.record, Stats: d.stats.Add, Defer: d.deferrer.Defer, Settle: d.budget.settle,
		Clock: cfg.Clock, Logger: cfg.Logger, Metrics: m,
		Schedule: d.Schedule, Stopping: d.stopping.Load, Fence: d.mayStillSend, Held: d.held.holds,
		Paused: d.held.pauses, Health: d.health.observe,
		MaxTimeout: cfg.MaxTimeout, DefaultMaxTimeout: cfg.DefaultLimits.MaxTimeout,
		LeaseMargin: cfg.LeaseMargin, UserAgent: cfg.UserAgent,
		MaxResponseBody: cfg.MaxResponseBody, Rand: cfg.Rand, Spans: newSpans(cfg.TracerProvider),
	})
}

func (d *Dispatcher) buildPurger(m *metrics) (*maintenance.Purger, error) {
	cfg := d.cfg
	retention := cfg.Retention
	if retention == KeepForever {
		retention = 0
	}
	auditRetention := cfg.AuditRetention
	if auditRetention == KeepForever {
		auditRetention = 0
	}
	p, err := maintenance.NewPurger(maintenance.PurgerConfig{
		Store: cfg.DB, Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer, StoreError: m.storeError,
		Retention: retention, AuditRetention: auditRetention, Interval: cfg.RetentionInterval, Batch: cfg.RetentionBatch,
		IdempotencyWindow: max(0, cfg.IdempotencyWindow),
		// A target no attempt went to for as long as a failure run takes
		// to pause one has no run left worth continuing.
		TargetHealthIdle: cfg.TargetDisableAfter,
		// Any one partition would do: exactly one live node holds its
		// lease, and during a handover two may both purge for a moment,
		// which only deletes the same rows (each skips those the other
		// has locked).
		Leader: func() bool { return d.ownership.ownsPartition(0) },
	})
	if err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	return p, nil
}

// gaugeReads are the functions through which the gauges read the parts.
func (d *Dispatcher) gaugeReads() gaugeReads {
	return gaugeReads{
		wheelTimers:   func() float64 { return float64(d.timers.Len()) },
		dueQueue:      func() float64 { return float64(d.claimer.queued()) },
		limitsWaiting: d.limits.waitingCount,
		sending:       func() float64 { n, _, _ := d.shares.totals(); return float64(n) },
		sendingBytes:  func() float64 { _, b, _ := d.shares.totals(); return float64(b) },
		shareWaiting:  func() float64 { _, _, w := d.shares.totals(); return float64(w) },
		targets:       func() float64 { return float64(d.targets.count()) },
	}
}

func (d *Dispatcher) buildHealth(m *metrics) *targetHealth {
	return newTargetHealth(targetHealthConfig{Store: d.cfg.DB, Clock: d.cfg.Clock, Logger: d.cfg.Logger, Metrics: m,
		DisableAfter: d.cfg.TargetDisableAfter, Interval: healthInterval(d.cfg.TargetDisableAfter), Paused: d.held.changed})
}

func (d *Dispatcher) runTimingWheel(ctx context.Context) {
	if err := d.timers.Run(ctx); err != nil {
		d.logger.Error("timing wheel stopped", "err", err)
	}
}

func (d *Dispatcher) runSendWheel(ctx context.Context) {
	if err := d.holder.Run(ctx); err != nil {
		d.logger.Error("send wheel stopped", "err", err)
	}
}
