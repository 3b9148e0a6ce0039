// Package dispatcher fires due tasks on time: a loader feeds a hierarchical
// timing wheel with the tasks falling due in the next window (and the API
// feeds it directly with the ones it just stored); when a timer expires,
// claimers take the task in Postgres with a status compare-and-set and a
// bounded pool of senders signs it, sends it and records the attempt. No
// goroutine waits per task: a waiting task costs one wheel entry.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/dispatcher/wheel"
	"github.com/hookwheel/hookwheel/store"
)

// Config configures a Dispatcher. Zero fields take the documented defaults.
type Config struct {
	// DB is the source of truth. Required.
	DB *store.DB
	// Redis holds the fire-once claims. Optional: without it (or while it is
	// down) the Postgres compare-and-set alone prevents double sends.
	Redis *store.Redis
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the dispatcher's metrics. Default: none registered.
	Registerer prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Guard decides which addresses webhooks may reach; it checks the
	// address actually dialled, after DNS. Default: netguard.New with its
	// defaults (no loopback, private, link-local or other internal ranges).
	Guard *netguard.Guard
	// HTTPClient sends the webhooks. Default: a pooled client that dials
	// through Guard, never uses a proxy and never follows redirects.
	HTTPClient *http.Client
	// Senders is the number of concurrent webhook sends. Default 128.
	Senders int
	// Claimers is the number of goroutines claiming due tasks in Postgres,
	// each in batches of up to ClaimBatch. Default 4 and 128.
	Claimers   int
	ClaimBatch int
	// ClaimAhead is how long before its due time a task is claimed, so that
	// the claim's round trips are done when the instant comes and only the
	// send is left. A task can no longer be canceled that close to its due
	// time. Default 50ms.
	ClaimAhead time.Duration
	// ClaimGroup rounds claim times down to its multiples, so that the
	// tasks falling due within one ClaimGroup are claimed together, in one
	// statement, between ClaimAhead and ClaimAhead+ClaimGroup before they
	// are due. Claiming them one by one as they came at 1,000 a second cost
	// Postgres a transaction per task. Default 10ms.
	ClaimGroup time.Duration
	// ClaimLinger is how long a claimer waits after the first fired task
	// for the rest of its group, which the wheel fires one by one: without
	// it, four claimers woken together split a group into claims of one or
	// two. Only tasks fired with their claim window still ahead linger; one
	// due now (a task created for now, a retry) is claimed at once.
	// Default 1ms.
	ClaimLinger time.Duration
	// Lookahead is how far ahead the loader pulls due tasks into the wheel.
	// Default 30s. The API's notify window must match it.
	Lookahead time.Duration
	// LoadInterval is how often the loader extends the window. Default 1s;
	// it must be well below Lookahead.
	LoadInterval time.Duration
	// SweepInterval is how often overdue tasks that are in no wheel and
	// claims whose lease expired are gathered up. Default 5s.
	SweepInterval time.Duration
	// NodeName names this node in the nodes table. Default: the host name.
	NodeName string
	// NodeTTL is how long this node's registration and partition leases
	// last without a heartbeat: when a node dies, its partitions and the
	// tasks it was sending move to the survivors after about this long.
	// Default 1.5s. HeartbeatInterval is how often they are renewed
	// (default NodeTTL/5).
	NodeTTL           time.Duration
	HeartbeatInterval time.Duration
	// LeaseMargin is added to a task's timeout to form the lease of its
	// claim; a claim older than that is presumed dead. Default 30s.
	LeaseMargin time.Duration
	// RecordBatch and RecordDelay shape the batches in which attempts are
	// written: up to RecordBatch attempts (default 256) gathered for at
	// most RecordDelay (default 10ms) after the first, in one statement.
	// Senders do not wait for it (see record), so the delay costs no send
	// time; it only lets batches grow at moderate rates, where each
	// statement and commit was costing Postgres more than its rows.
	RecordBatch int
	RecordDelay time.Duration
	// Recorders is the number of batches written concurrently. Default 2.
	Recorders int
	// MaxPerTarget caps the concurrent sends to one target (scheme, host
	// and port). Default Senders/4. MaxWaitingPerTarget caps the claimed
	// tasks of one target waiting for a send slot; beyond it the surplus of
	// a slow target is given back until a slot is likely free. Default
	// MaxClaimed: only the node's claim budget bounds it, because giving
	// tasks back costs two writes each and, measured, turned a busy target
	// into an overloaded database (see the closing note of session 1).
	MaxPerTarget        int
	MaxWaitingPerTarget int
	// MaxClaimed caps the tasks claimed and not yet settled on this node.
	// Default 16 × Senders: room for a burst of one target to wait its turn
	// in memory rather than be given back (two writes a task).
	MaxClaimed int
	// Breaker tunes the per-target circuit breakers.
	Breaker BreakerConfig
	// MaxResponseBody is how much of a receiver's response body an attempt
	// records. Default 4 KiB.
	MaxResponseBody int
	// Rand returns a uniform number in [0, 1) for retry jitter. Default math/rand/v2.
	Rand func() float64
	// UserAgent is sent with every webhook. Default "hookwheel/1".
	UserAgent string
}

func (c *Config) setDefaults() error {
	if c.DB == nil {
		return errors.New("dispatcher: Config.DB is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Guard == nil {
		c.Guard = netguard.New(netguard.Config{})
	}
	if c.HTTPClient == nil {
		c.HTTPClient = newHTTPClient(c.Guard)
	}
	if c.Senders <= 0 {
		c.Senders = 128
	}
	if c.Claimers <= 0 {
		c.Claimers = 4
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = 128
	}
	if c.ClaimAhead <= 0 {
		c.ClaimAhead = 50 * time.Millisecond
	}
	if c.ClaimGroup <= 0 {
		c.ClaimGroup = 10 * time.Millisecond
	}
	if c.ClaimLinger <= 0 {
		c.ClaimLinger = time.Millisecond
	}
	if c.Lookahead <= 0 {
		c.Lookahead = 30 * time.Second
	}
	if c.LoadInterval <= 0 {
		c.LoadInterval = time.Second
	}
	if c.LoadInterval >= c.Lookahead {
		return fmt.Errorf("dispatcher: LoadInterval %s must be below Lookahead %s", c.LoadInterval, c.Lookahead)
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	if c.NodeTTL <= 0 {
		c.NodeTTL = 1500 * time.Millisecond
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.NodeTTL / 5
	}
	if c.HeartbeatInterval >= c.NodeTTL {
		return fmt.Errorf("dispatcher: HeartbeatInterval %s must be below NodeTTL %s", c.HeartbeatInterval, c.NodeTTL)
	}
	if c.LeaseMargin <= 0 {
		c.LeaseMargin = 30 * time.Second
	}
	if c.MaxPerTarget <= 0 {
		c.MaxPerTarget = max(1, c.Senders/4)
	}
	if c.MaxClaimed <= 0 {
		c.MaxClaimed = 16 * c.Senders
	}
	if c.MaxWaitingPerTarget <= 0 {
		c.MaxWaitingPerTarget = c.MaxClaimed
	}
	if c.RecordBatch <= 0 {
		c.RecordBatch = 256
	}
	if c.RecordDelay <= 0 {
		c.RecordDelay = 10 * time.Millisecond
	}
	if c.Recorders <= 0 {
		c.Recorders = 2
	}
	if c.MaxResponseBody <= 0 {
		c.MaxResponseBody = 4 << 10
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.UserAgent == "" {
		c.UserAgent = "hookwheel/1"
	}
	return nil
}

// newHTTPClient returns the client webhooks go out through: connections are
// pooled per target, every dial is checked by the guard, no proxy from the
// environment is used (the guard would check the proxy's address, not the
// target's), and redirects are never followed (a redirect is the receiver's
// answer, recorded and final).
func newHTTPClient(guard *netguard.Guard) *http.Client {
	transport := &http.Transport{
		DialContext:           guard.DialContext(),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Dispatcher fires due tasks. Create it with New, run it with Run.
type Dispatcher struct {
	cfg     Config
	db      *store.DB
	redis   *store.Redis
	logger  *slog.Logger
	clock   clock.Clock
	signer  *signing.Signer
	metrics *metrics
	targets *targets
	// limits applies tenants' dispatch rates and concurrency (ratelimit.go).
	limits *dispatchLimits
	// transport sends webhooks, redialling connections that failed before
	// the request left.
	transport *retryablehttp.Client
	// gathering is held by the claimer gathering the next batch.
	gathering sync.Mutex
	// stopping is set once Run's context ends.
	stopping atomic.Bool
	// redisDownUntil (Unix nanoseconds) skips Redis for a while after it
	// failed: Postgres alone guards the claims meanwhile.
	redisDownUntil atomic.Int64
	// timers fires each waiting task ClaimAhead before it falls due, to be
	// claimed; sendTimers fires each claimed task at its due instant.
	timers     *wheel.Timers
	sendTimers *wheel.Timers

	// due carries fired task ids from the wheel to the claimers; claimed
	// carries claims from the claimers to the senders. Both are bounded:
	// when senders fall behind, the wheel waits instead of memory growing.
	due     chan firing
	claimed chan *model.ClaimedTask
	// records carries finished attempts from the senders to the recorders.
	records chan recordRequest

	// nodeID names this process in the nodes table and on its claims.
	nodeID uuid.UUID
	// gained carries partitions this node just took over to the loader,
	// which reads them from the beginning.
	gained chan []int16

	mu sync.Mutex
	// owned and ownedList are the partitions this node holds a lease on:
	// only their tasks are loaded, scheduled and claimed here.
	owned     [model.Partitions]bool
	ownedList []int16
	// loadingUntil is the end of the window the loader has loaded or is
	// loading: a task announced later with a due time up to it must go into
	// the wheel directly, since the loader's scan may have missed it.
	loadingUntil time.Time
	// inflight counts, per task, the firings that have left the wheel and
	// are not settled yet (claimed and sent, or found not claimable), so the
	// sweep does not feed them in again.
	inflight map[uuid.UUID]int
	// budget bounds the tasks taken by claimers and not yet settled: when
	// senders fall behind, claimers wait instead of claiming more work than
	// can be sent while its leases are young.
	budget chan struct{}
	// held are claims waiting in sendTimers for their due instant.
	held map[uuid.UUID]*model.ClaimedTask
	// rescan asks the loader to read the whole window again (the NOTIFY
	// listener reconnected and may have missed announcements).
	rescan chan struct{}
}

// New returns a Dispatcher; nothing runs until Run.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:      cfg,
		db:       cfg.DB,
		redis:    cfg.Redis,
		logger:   cfg.Logger,
		clock:    cfg.Clock,
		signer:   signing.NewSigner(signing.SignerConfig{}),
		due:      make(chan firing, 16*cfg.ClaimBatch*cfg.Claimers),
		claimed:  make(chan *model.ClaimedTask, cfg.Senders),
		records:  make(chan recordRequest, cfg.Senders),
		nodeID:   uuid.New(),
		gained:   make(chan []int16, 64),
		inflight: make(map[uuid.UUID]int),
		budget:   make(chan struct{}, cfg.MaxClaimed),
		held:     make(map[uuid.UUID]*model.ClaimedTask),
		rescan:   make(chan struct{}, 1),
	}
	d.timers = wheel.NewTimers(wheel.TimersConfig{Clock: cfg.Clock, Fire: d.fire})
	d.sendTimers = wheel.NewTimers(wheel.TimersConfig{Clock: cfg.Clock, Fire: d.release})
	m, err := newMetrics(cfg.Registerer, d)
	if err != nil {
		return nil, err
	}
	d.metrics = m
	if d.limits, err = newDispatchLimits(d, cfg.Registerer); err != nil {
		return nil, fmt.Errorf("register dispatch limit metrics: %w", err)
	}
	d.transport = newTransport(cfg.HTTPClient, m.transportRetries)
	d.targets = newTargets(cfg.Breaker, cfg.MaxPerTarget, cfg.MaxWaitingPerTarget, func(key string, from, to gobreaker.State) {
		m.breakerState.WithLabelValues(key).Set(float64(to))
		d.logger.Warn("circuit breaker changed state", "target", key, "from", from.String(), "to", to.String())
	})
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
	d.mu.Lock()
	mine := !at.After(d.loadingUntil) && d.owned[model.PartitionOf(id)]
	d.mu.Unlock()
	if mine {
		d.arm(id, at)
	}
}

// arm sets a task's timer: it fires ClaimAhead before the task is due,
// rounded down to the ClaimGroup it falls in.
func (d *Dispatcher) arm(id uuid.UUID, at time.Time) {
	d.timers.Schedule(id, at.Add(-d.cfg.ClaimAhead).Truncate(d.cfg.ClaimGroup))
}

// claimHorizon is how far ahead of now a claim may take a task: the timer of
// a task fires at most this long before it is due.
func (d *Dispatcher) claimHorizon() time.Duration { return d.cfg.ClaimAhead + d.cfg.ClaimGroup }

// Cancel removes a task's timer, if this dispatcher holds one.
func (d *Dispatcher) Cancel(id uuid.UUID) {
	d.timers.Cancel(id)
}

// firing is a task whose claim timer fired.
type firing struct {
	id uuid.UUID
	// mayLinger is set when the claim window is still ahead of the task,
	// so its claimer may wait ClaimLinger for the rest of its group.
	mayLinger bool
}

// fire is called by the wheel for each expired timer.
func (d *Dispatcher) fire(id uuid.UUID, at time.Time) {
	d.mu.Lock()
	d.inflight[id]++
	d.mu.Unlock()
	// The task is due ClaimAhead after its timer or later.
	mayLinger := d.clock.Now().Add(2 * d.cfg.ClaimLinger).Before(at.Add(d.cfg.ClaimAhead))
	d.due <- firing{id: id, mayLinger: mayLinger}
}

// release is called by sendTimers when a held claim falls due: it goes to a
// sender.
func (d *Dispatcher) release(id uuid.UUID, _ time.Time) {
	d.mu.Lock()
	c, ok := d.held[id]
	delete(d.held, id)
	d.mu.Unlock()
	if ok {
		d.claimed <- c
	}
}

// settle ends one firing of a task that a claimer took: its share of the
// claim budget comes back.
func (d *Dispatcher) settle(id uuid.UUID) {
	d.mu.Lock()
	n, ok := d.inflight[id]
	switch {
	case !ok:
	case n <= 1:
		delete(d.inflight, id)
	default:
		d.inflight[id] = n - 1
	}
	d.mu.Unlock()
	if ok {
		select {
		case <-d.budget:
		default:
		}
	}
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
	go func() { defer feeders.Done(); d.runMembership(ctx, ready) }()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	feeders.Add(4)
	go func() { defer feeders.Done(); d.runLoader(ctx) }()
	go func() { defer feeders.Done(); d.runListener(ctx) }()
	go func() { defer feeders.Done(); d.runSweeper(ctx) }()
	go func() { defer feeders.Done(); d.runMaterializer(ctx) }()
	go func() {
		defer close(wheelDone)
		if err := d.timers.Run(ctx); err != nil {
			d.logger.Error("timing wheel stopped", "err", err)
		}
	}()
	sendWheelDone := make(chan struct{})
	go func() {
		defer close(sendWheelDone)
		if err := d.sendTimers.Run(ctx); err != nil {
			d.logger.Error("send wheel stopped", "err", err)
		}
	}()
	for range d.cfg.Claimers {
		claimers.Add(1)
		go func() { defer claimers.Done(); d.runClaimer(ctx) }()
	}
	limitsDone := make(chan struct{})
	go func() { defer close(limitsDone); d.limits.run(ctx) }()
	for range d.cfg.Recorders {
		recorders.Add(1)
		go func() { defer recorders.Done(); d.runRecorder() }()
	}
	for range d.cfg.Senders {
		senders.Add(1)
		go func() { defer senders.Done(); d.runSender() }()
	}

	<-ctx.Done()
	d.stopping.Store(true)
	d.logger.Info("dispatcher stopping: finishing sends in flight")
	feeders.Wait()
	// The wheel may be blocked handing a fired task to a claimer that has
	// quit; what it holds is still waiting in Postgres, so drop it.
	for {
		select {
		case <-d.due:
			continue
		case <-wheelDone:
		}
		break
	}
	claimers.Wait()
	<-sendWheelDone
	// Claims still waiting for their instant are given back unsent, due as
	// they were: the next dispatcher sends them.
	d.mu.Lock()
	unsent := make([]*model.ClaimedTask, 0, len(d.held))
	for id, c := range d.held {
		unsent = append(unsent, c)
		delete(d.held, id)
	}
	d.mu.Unlock()
	d.deferClaims(unsent, time.Time{})
	// Claims waiting for a concurrency slot are given back too; the waker
	// hands claims to the senders, so it must be done before they stop.
	<-limitsDone
	close(d.claimed)
	senders.Wait()
	close(d.records)
	recorders.Wait()
	// Everything we claimed is recorded or given back: free our partitions
	// for the other nodes now rather than when the leases run out.
	leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.db.LeaveNode(leaveCtx, d.nodeID); err != nil {
		d.logger.Warn("leaving the cluster failed; our partitions move when their leases expire", "err", err)
	}
	d.logger.Info("dispatcher stopped")
	return nil
}

// runClaimer takes fired tasks in batches and claims them in Postgres.
func (d *Dispatcher) runClaimer(ctx context.Context) {
	batch := make([]uuid.UUID, 0, d.cfg.ClaimBatch)
	linger := d.clock.NewTimer(time.Hour)
	linger.Stop()
	lingering := false
	for {
		batch = batch[:0]
		// One claimer gathers at a time: claimers woken together would
		// split a group the wheel fires into as many claims.
		d.gathering.Lock()
		// One unit of budget per task taken, given back when it settles.
		select {
		case <-ctx.Done():
			d.gathering.Unlock()
			return
		case d.budget <- struct{}{}:
		}
		select {
		case <-ctx.Done():
			<-d.budget
			d.gathering.Unlock()
			return
		case f := <-d.due:
			batch = append(batch, f.id)
			if f.mayLinger {
				linger.Reset(d.cfg.ClaimLinger)
				lingering = true
			}
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case d.budget <- struct{}{}:
			default:
				// The budget is spent. With a backlog waiting that would fill
				// the batch, wait for settles to free enough of it: the
				// senders have a budget's worth of claims to work through,
				// and claiming the units one by one as they come back costs
				// a statement per task (measured: 6 tasks per claim, half
				// of Postgres's time per delivery).
				if len(d.due) < cap(batch)-len(batch) {
					break fill
				}
				select {
				case d.budget <- struct{}{}:
				case <-ctx.Done():
					break fill
				}
			}
			select {
			case f := <-d.due:
				batch = append(batch, f.id)
				continue
			default:
			}
			if lingering {
				select {
				case f := <-d.due:
					batch = append(batch, f.id)
					continue
				case <-linger.C():
					lingering = false
				case <-ctx.Done():
				}
			}
			<-d.budget
			break fill
		}
		if lingering {
			linger.Stop()
			lingering = false
		}
		d.gathering.Unlock()
		d.claim(ctx, batch)
	}
}

func (d *Dispatcher) claim(ctx context.Context, ids []uuid.UUID) {
	if ctx.Err() != nil {
		for _, id := range ids {
			d.settle(id)
		}
		return
	}
	// Not canceled by shutdown: a claim statement cut off mid-flight may
	// still commit, leaving claims no one knows it holds until their lease
	// runs out. Let it finish, then give back what will not be sent.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := d.clock.Now()
	claims, err := d.db.ClaimTasks(claimCtx, d.nodeID, d.ownedPartitions(), ids, now.Add(d.claimHorizon()), d.cfg.LeaseMargin)
	if err != nil {
		d.metrics.storeErrors.WithLabelValues("claim").Inc()
		if ctx.Err() == nil {
			d.logger.Error("claiming due tasks failed; they stay queued in Postgres", "tasks", len(ids), "err", err)
		}
		// The tasks still wait in Postgres; hand them to the sweep.
		for _, id := range ids {
			d.settle(id)
		}
		return
	}
	claimedIDs := make(map[uuid.UUID]struct{}, len(claims))
	for _, c := range claims {
		claimedIDs[c.ID] = struct{}{}
	}
	// Not claimed: canceled, finished, claimed by another node, or moved
	// later. The timer of a task moved later is normally set already, but
	// a loader that read the row before the move can arm the old time over
	// the new one; so the tasks still waiting are armed again at the time
	// Postgres has for them, and the others forgotten.
	var missed []uuid.UUID
	for _, id := range ids {
		if _, ok := claimedIDs[id]; !ok {
			missed = append(missed, id)
		}
	}
	if len(missed) > 0 {
		later, err := d.db.WaitingAfter(claimCtx, missed, now.Add(d.claimHorizon()))
		if err != nil {
			d.logger.Warn("reading unclaimed tasks failed; the sweep will find any still waiting", "tasks", len(missed), "err", err)
		}
		for _, t := range later {
			d.Schedule(t.ID, t.At)
		}
		for _, id := range missed {
			d.settle(id)
		}
	}
	d.metrics.claimBatch.Observe(float64(len(claims)))
	for _, c := range claims {
		c.ClaimedAt = now
	}
	claims = d.claimFireOnce(claimCtx, claims)
	claims = d.limits.rateLimitClaims(claims)

	for i, c := range claims {
		if at := *c.NextAttemptAt; at.After(d.clock.Now()) {
			d.mu.Lock()
			d.held[c.ID] = c
			d.mu.Unlock()
			d.sendTimers.Schedule(c.ID, at)
			continue
		}
		select {
		case d.claimed <- c:
		case <-ctx.Done():
			// Shutting down with claims no sender will take: give them back.
			d.deferClaims(claims[i:], time.Time{})
			return
		}
	}
}

// redisRetryAfter is how long the dispatcher goes without Redis after a
// failure before trying it again.
const redisRetryAfter = 5 * time.Second

// claimFireOnce takes the Redis fire-once claims of freshly claimed attempts
// and returns those this node may send. Redis is the second lock: when it is
// unreachable, the Postgres claim alone decides.
func (d *Dispatcher) claimFireOnce(ctx context.Context, claims []*model.ClaimedTask) []*model.ClaimedTask {
	if d.redis == nil || len(claims) == 0 {
		return claims
	}
	if until := d.redisDownUntil.Load(); until != 0 && d.clock.Now().UnixNano() < until {
		// Redis failed a moment ago: do not make every claim wait for its
		// timeouts while it is away.
		return claims
	}
	req := make([]store.AttemptClaim, len(claims))
	for i, c := range claims {
		req[i] = store.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken, TTL: c.Timeout + 2*d.cfg.LeaseMargin}
	}
	held, err := d.redis.ClaimAttempts(ctx, req)
	if err != nil {
		d.metrics.redisErrors.Inc()
		d.metrics.redisDegraded.Set(1)
		d.redisDownUntil.Store(d.clock.Now().Add(redisRetryAfter).UnixNano())
		d.logger.Warn("fire-once claims in Redis failed; relying on Postgres alone for a while", "tasks", len(claims), "err", err, "retry_in", redisRetryAfter)
		return claims
	}
	d.metrics.redisDegraded.Set(0)
	mine := claims[:0:0]
	var theirs []*model.ClaimedTask
	for i, c := range claims {
		if held[i] {
			mine = append(mine, c)
		} else {
			theirs = append(theirs, c)
		}
	}
	if len(theirs) > 0 {
		// Another sender holds these very attempts: a node whose lease
		// expired is still sending them. Wait for its claim to lapse.
		d.metrics.claimConflicts.Add(float64(len(theirs)))
		d.deferClaims(theirs, d.clock.Now().Add(theirs[0].Timeout+2*d.cfg.LeaseMargin))
	}
	return mine
}

// deferClaims gives claims back unsent, to wait until notBefore.
func (d *Dispatcher) deferClaims(claims []*model.ClaimedTask, notBefore time.Time) {
	byToken := make(map[uuid.UUID][]uuid.UUID)
	for _, c := range claims {
		byToken[c.ClaimToken] = append(byToken[c.ClaimToken], c.ID)
		d.settle(c.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.redis != nil && len(claims) > 0 {
		// Let whoever sends these attempts take them in Redis too (a
		// no-op for claims that another sender held all along).
		release := make([]store.AttemptClaim, len(claims))
		for i, c := range claims {
			release[i] = store.AttemptClaim{TaskID: c.ID, Attempt: c.Attempt, Token: c.ClaimToken}
		}
		if err := d.redis.ReleaseAttempts(ctx, release); err != nil {
			d.metrics.redisErrors.Inc()
			d.logger.Warn("releasing fire-once claims failed; they expire by themselves", "tasks", len(claims), "err", err)
		}
	}
	for token, ids := range byToken {
		if err := d.db.DeferClaims(ctx, ids, token, notBefore); err != nil {
			d.metrics.storeErrors.WithLabelValues("defer").Inc()
			d.logger.Error("giving claims back failed; their leases will expire and the sweep will recover them", "tasks", len(ids), "err", err)
		}
	}
	if !d.stopping.Load() {
		// Back in the wheel here, unless the node is stopping: then the next
		// owner loads them.
		for _, c := range claims {
			at := notBefore
			if c.NextAttemptAt != nil && c.NextAttemptAt.After(at) {
				at = *c.NextAttemptAt
			}
			d.Schedule(c.ID, at)
		}
	}
}

// Breakers reports the circuit breaker of every target this node has sent to.
func (d *Dispatcher) Breakers() []BreakerStatus { return d.targets.statuses() }

// NodeID names this dispatcher in the nodes table and on its claims.
func (d *Dispatcher) NodeID() uuid.UUID { return d.nodeID }
