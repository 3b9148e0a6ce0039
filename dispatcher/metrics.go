package dispatcher

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/retry"
)

// metrics are the dispatcher's Prometheus metrics, shared by its parts: each
// part is given the struct and touches only its own series.
type metrics struct {
	lateness          *prometheus.HistogramVec
	attempts          *prometheus.CounterVec
	attemptDuration   prometheus.Histogram
	claimBatch        prometheus.Histogram
	recordBatch       prometheus.Histogram
	storeErrors       *prometheus.CounterVec
	redisErrors       prometheus.Counter
	redisDegraded     prometheus.Gauge
	claimConflicts    prometheus.Counter
	loaded            prometheus.Counter
	loadDuration      prometheus.Histogram
	recovered         prometheus.Counter
	recoveredAnswered prometheus.Counter
	swept             prometheus.Counter
	liveNodes         prometheus.Gauge
	deferrals         *prometheus.CounterVec
	transportRetries  prometheus.Counter
	// expired counts tasks ended expired, by whether an attempt ended them
	// (its retry would have come too late) or none could start.
	expired         *prometheus.CounterVec
	ownedPartitions prometheus.Gauge
	// leaseRenewal is, for each successful heartbeat, the time from the
	// start of the one before to its end: how much of NodeTTL a renewal
	// took. At NodeTTL the node's lease lapsed before it was renewed.
	leaseRenewal prometheus.Histogram
	// limitUnchecked counts sends of limited tenants that went ahead
	// without a limiter decision.
	limitUnchecked prometheus.Counter
	// skippedOccurrences counts schedule occurrences not made tasks: their
	// tenant was at its max_pending_tasks.
	skippedOccurrences prometheus.Counter
	// usage are the usage totals by plan.
	usage *usageMetrics
}

// storeError counts a failed Postgres operation of a part by its name, for
// the parts outside this package (internal/maintenance), which share the
// counter rather than own it.
func (m *metrics) storeError(op string) { m.storeErrors.WithLabelValues(op).Inc() }

// gaugeReads are the gauges that read a part's state when scraped.
type gaugeReads struct {
	wheelTimers   func() float64
	dueQueue      func() float64
	limitsWaiting func() float64
	sending       func() float64
	sendingBytes  func() float64
	shareWaiting  func() float64
	targets       func() float64
}

// newMetrics registers the dispatcher's counters, gauges and histograms with
// reg; the gauges read from the parts at scrape time come with
// registerGauges, once the parts exist.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hookwheel_fire_lateness_seconds",
			Help: "Time from an attempt's due instant (run_at, or next_attempt_at for a retry) to the start of its send.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
				300},
		}, []string{"attempt"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwheel_attempts_total",
			Help: "Delivery attempts by outcome: success, retry or fail.",
		}, []string{"outcome"}),
		attemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwheel_attempt_duration_seconds",
			Help:    "Time from the start of a send to the receiver's response or the error.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}),
		claimBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwheel_claim_batch_size",
			Help:    "Tasks claimed per Postgres claim statement.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}),
		recordBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwheel_attempt_log_batch_size",
			Help:    "Attempts written per Postgres statement by the attempt recorder.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwheel_dispatcher_postgres_errors_total",
			Help: "Failed Postgres operations of the dispatcher, by operation.",
		}, []string{"op"}),
		skippedOccurrences: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_schedule_occurrences_skipped_total",
			Help: "Schedule occurrences not made tasks because their tenant was at its max_pending_tasks; each schedule counts its own (skipped_occurrences).",
		}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_redis_errors_total",
			Help: "Fire-once claims that could not reach Redis; sends went ahead on the Postgres claim alone (Redis degraded).",
		}),
		redisDegraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookwheel_redis_degraded",
			Help: "1 while Redis is unreachable and attempts are guarded by Postgres alone, else 0.",
		}),
		claimConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_fire_once_conflicts_total",
			Help: "Attempts not sent because another sender held their fire-once claim in Redis.",
		}),
		loaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_loader_tasks_total",
			Help: "Tasks the loader read from Postgres into the wheel.",
		}),
		loadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwheel_loader_pass_seconds",
			Help:    "Duration of one loader pass over the newly uncovered slice of the window.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_recovered_claims_total",
			Help: "Tasks handed back to the queue because their sender's lease expired mid-attempt.",
		}),
		recoveredAnswered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_recovered_answered_total",
			Help: "Claims of a stopped sender recorded delivered from the answer journal instead of being sent again.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_swept_tasks_total",
			Help: "Overdue tasks found in no wheel by the sweep.",
		}),
		deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwheel_deferrals_total",
			Help: "Claimed tasks given back unsent, by reason (breaker: the target's breaker was open; target_busy: no send slot of its target soon enough; rate_limit and concurrency: the tenant's dispatch limits for the target host; flow_rate and flow_parallelism: the limits of the task's flow key; secret_unreadable: this node cannot open the tenant's signing secret, see HOOKWHEEL_ENCRYPTION_KEY; target_paused: the tenant paused the target after the claim). A deferral is not an attempt.",
		}, []string{"reason"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwheel_expired_tasks_total",
			Help: "Tasks ended expired, by when (before_attempt: due, or given back, at or past their expires_at, and never sent; after_attempt: an attempt failed and its retry would have started at or past it).",
		}, []string{"when"}),
		transportRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_transport_retries_total",
			Help: "Connections redialled within an attempt because the previous dial failed (the request had not left).",
		}),
		liveNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookwheel_live_nodes",
			Help: "Dispatcher nodes with a live heartbeat, as this node last saw them.",
		}),
		ownedPartitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookwheel_owned_partitions",
			Help: "Task partitions (of 256) this node holds a lease on.",
		}),
		leaseRenewal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwheel_lease_renewal_seconds",
			Help:    "For each successful heartbeat, the time from the start of the one before to its end: a node whose renewals reach HOOKWHEEL_NODE_TTL loses its partitions.",
			Buckets: []float64{.1, .2, .3, .4, .5, .6, .75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10},
		}),
		limitUnchecked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_dispatch_limit_unchecked_total",
			Help: "Sends of tenants with dispatch limits that went ahead without a limiter decision because Redis (or reading the limits) failed.",
		}),
	}
	collectors := []prometheus.Collector{
		m.lateness, m.attempts, m.attemptDuration, m.claimBatch, m.recordBatch, m.storeErrors, m.redisErrors, m.redisDegraded, m.claimConflicts,
		m.loaded, m.loadDuration, m.recovered, m.recoveredAnswered, m.swept, m.liveNodes, m.ownedPartitions, m.deferrals, m.transportRetries, m.leaseRenewal,
		m.limitUnchecked, m.skippedOccurrences, m.expired,
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register dispatcher metrics: %w", err)
		}
	}
	for _, o := range []retry.Outcome{retry.OutcomeSuccess, retry.OutcomeRetry, retry.OutcomeFail} {
		m.attempts.WithLabelValues(string(o))
	}
	usage, err := newUsageMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.usage = usage
	return m, nil
}

// registerGauges registers the gauges that read a part's state when scraped.
func registerGauges(reg prometheus.Registerer, reads gaugeReads) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_wheel_timers",
			Help: "Timers waiting in this node's timing wheel.",
		}, reads.wheelTimers),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_due_queue_length",
			Help: "Fired tasks waiting for a claimer.",
		}, reads.dueQueue),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_dispatch_limit_waiting",
			Help: "Claimed tasks waiting on this node for a concurrency slot of their tenant and host, or of their flow key.",
		}, reads.limitsWaiting),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_sends_in_flight",
			Help: "Claims holding a share of this node's senders: sending, or waiting for a slot of their target.",
		}, reads.sending),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_send_body_bytes",
			Help: "Webhook body bytes counted against this node's send budget (HOOKWHEEL_SENDERS' bodies in memory).",
		}, reads.sendingBytes),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_tenant_share_waiting",
			Help: "Claimed tasks waiting on this node for their tenant's share of the senders.",
		}, reads.shareWaiting),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookwheel_targets",
			Help: "Tenants' targets (scheme, host and port) whose breaker and send slots this node keeps: one per tenant and target.",
		}, reads.targets),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register dispatcher gauges: %w", err)
		}
	}
	return nil
}
