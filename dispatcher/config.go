package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/maintenance"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/store"
)

// Config configures a Dispatcher. Zero fields take the documented defaults.
type Config struct {
	// DB is the source of truth (store.DB). Required.
	DB Store
	// Redis holds the fire-once claims (store.Redis). Optional: without it
	// (or while it is down) the Postgres compare-and-set alone prevents
	// double sends. A nil *store.Redis put here is not nil: leave the field
	// unset instead.
	Redis Redis
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
	// Keyring opens signing secrets stored sealed. Default: the empty
	// keyring, which opens only plaintext secrets.
	Keyring *keyring.Keyring
	// TracerProvider makes the claim, send and record spans (tracing.go).
	// Default: none made; a task created in a trace still sends its
	// webhooks as children of it.
	TracerProvider trace.TracerProvider
	// HTTPClient sends the webhooks. Default: a pooled client that dials
	// through Guard, never uses a proxy, never follows redirects, and reads
	// at most MaxResponseHeader of an answer's headers (newHTTPClient); a
	// client given here should bound them likewise.
	HTTPClient *http.Client
	// Senders is the most webhook sends in flight on this node at once,
	// across tenants. Default 1024. Each send is a goroutine and a
	// connection while it waits for its answer.
	Senders int
	// SendersPerTenant is a tenant's share of them: the most of its sends
	// in flight, or waiting for a slot of their target, at once. Its
	// receivers that never answer hold this share and no one else's.
	// Default 128.
	SendersPerTenant int
	// SendBytes and SendBytesPerTenant bound the webhook bodies in memory
	// for sends in flight, on the node and for one tenant; a tenant always
	// has room for one body. Bodies longer than store.ClaimBodyInline are
	// read only as they are sent. Defaults 256 MiB and 64 MiB.
	SendBytes          int64
	SendBytesPerTenant int64
	// MaxWaitingPerTenant is the least room a tenant has for claims
	// waiting for its share (or parked with its targets); beyond its room
	// the surplus is given back until the share is likely free. The room
	// is half the claim budget until the tenant has had claims on the node
	// for a second, then five to ten seconds of the pace at which its
	// sends finish (up to the whole budget), but at least this; claims
	// waiting beyond a room that shrank are given back every second.
	// Default MaxClaimed/4: a tenant whose every send hangs leaves most of
	// the claim budget to the others, and a healthy one's burst waits in
	// memory rather than being written back.
	MaxWaitingPerTenant int
	// MaxTimeout caps every attempt's timeout, whatever the task asked for
	// (the API refuses more than its own, equal, bound; tasks stored before
	// it was lowered are cut to it). Default 5m.
	MaxTimeout time.Duration
	// DefaultLimits are the node's limits for tenants that set none of
	// their own, field by field (model.Limits.Resolve): the dispatch rate
	// and concurrency per target host and the per-attempt max_timeout.
	// Default none: a tenant is limited only by what it sets. The binary
	// sets model.DefaultNodeLimits, changed by HOOKWHEEL_DEFAULT_*.
	DefaultLimits model.Limits
	// ShutdownTimeout bounds how long Run waits for the sends in flight
	// once its context ends; then they are cut off, recorded as
	// interrupted and due again at once. Default 30s.
	ShutdownTimeout time.Duration
	// Claimers is the number of goroutines claiming due tasks in Postgres,
	// each in batches of up to ClaimBatch. Default 4 and 128.
	Claimers   int
	ClaimBatch int
	// ClaimAhead is how long before its due time a task is claimed, so that
	// the claim's round trips are done when the instant comes and only the
	// send is left. A task can no longer be canceled that close to its due
	// time. Default 50ms; with ClaimGroup at most store.MaxClaimAhead (10s).
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
	// Default model.DefaultLookahead. The API's notify window must match it.
	Lookahead time.Duration
	// LoadInterval is how often the loader extends the window. Default 1s;
	// it must be well below Lookahead.
	LoadInterval time.Duration
	// SweepInterval is how often overdue tasks that are in no wheel and
	// claims whose lease expired are gathered up. Default 5s.
	SweepInterval time.Duration
	// HeldRefresh is how often the tenants whose tasks are held (suspended
	// or being deleted) are read again without a change announced on
	// store.TenantNotifyChannel: the bound on a lost announcement. Default
	// 3s.
	HeldRefresh time.Duration
	// TargetDisableAfter is how long every attempt of a tenant to a target
	// must have failed for hookwheel to pause the target and tell the
	// tenant (targethealth.go; HOOKWHEEL_TARGET_DISABLE_AFTER). Default
	// DefaultTargetDisableAfter.
	TargetDisableAfter time.Duration
	// TenantChanged, when set, is told of each tenant change announced on
	// store.TenantNotifyChannel, after the dispatcher has taken it in, and
	// with uuid.Nil each time the listener starts listening again (what
	// was announced meanwhile is lost: any tenant may have changed). The
	// node passes tenants.Service.TenantChanged, so that one LISTEN
	// connection serves both.
	TenantChanged func(tenant uuid.UUID)
	// Retention is how long a finished task (delivered, dead or canceled)
	// and its attempts are kept after it finished, for tenants without a
	// retention of their own. Default 168h (7 days); KeepForever keeps
	// them (tenants with a retention of their own are still purged). The
	// node holding partition 0's lease purges; the others stand by.
	Retention time.Duration
	// AuditRetention is how long an audit entry is kept after it was
	// recorded; the purger deletes older ones with the finished tasks.
	// Default DefaultAuditRetention (400 days); KeepForever keeps them.
	AuditRetention time.Duration
	// RetentionInterval is how long the purger waits after a pass that
	// found nothing more to purge; a pass that found more is followed by
	// the next at once. Default 10s: finished tasks outlive their
	// retention by about this much.
	RetentionInterval time.Duration
	// RetentionBatch caps the tasks one purge statement deletes (with their
	// attempts), or the audit entries, and so the rows it locks and the
	// time it holds them.
	// Default 1000.
	RetentionBatch int
	// IdempotencyWindow is how long after its creation an idempotency key
	// stays taken once retention purged its task (or publish): a repeat
	// inside it answers the purged task and sends nothing. The purger
	// writes the key aside as it deletes the row, and forgets it when the
	// window has passed, in batches of RetentionBatch. Default 24h;
	// ForgetKeys remembers none.
	IdempotencyWindow time.Duration
	// NodeName names this node in the nodes table. Default: the host name.
	NodeName string
	// SucceedNamesakes makes the node, as it starts, end the leases of the
	// live nodes registered under NodeName whose heartbeat connection
	// Postgres has seen close (store.SucceedDeadNamesakes), so that a node
	// restarted in place takes its predecessor's partitions and claims in
	// the moment it starts rather than after NodeTTL. Set it only when no
	// two running processes can hold NodeName: the node binary names a node
	// after its host and the address it bound, which one process at a time
	// can hold. Default false.
	SucceedNamesakes bool
	// NodeTTL is how long this node's registration and partition leases
	// last without a heartbeat: when a node dies, its partitions and the
	// tasks it was sending move to the survivors after about this long, and
	// a node that cannot renew them within it stops claiming and sending
	// until it has (fence.go). Default 3s: on a 2-core machine running
	// three nodes under `stress-ng --cpu 2`, a renewal (from one
	// heartbeat's start to the next one's end) took at most 0.75 s at a 300
	// ms interval, and at most 1.02 s in the SIGKILL chaos test on a
	// machine loaded by other work; 1.5 s left too little room above that.
	// HeartbeatInterval is how often they are renewed (default NodeTTL/5),
	// on a connection of the node's own.
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
	// StatsInterval is how often the node adds the delivery statistics it
	// gathers in memory (GET /v1/stats) to Postgres: one statement for
	// every tenant and minute, whatever the number of attempts. The
	// statistics lag the attempts by up to this much. Default 5s.
	StatsInterval time.Duration
	// MaxPerTarget caps the concurrent sends to one target (scheme, host
	// and port). Default SendersPerTenant/4. MaxWaitingPerTarget caps the claimed
	// tasks of one target waiting for a send slot. Default MaxClaimed:
	// giving tasks back costs two writes each and, measured, turned a busy
	// target into an overloaded database, cutting end-to-end throughput
	// from 3.4k to 1.3k deliveries a second. A target's room is all of it
	// until the target has been sending for a second, then five to ten
	// seconds of the pace at which its sends finish, but at least
	// MaxPerTarget: a target that stops answering holds that many claims
	// parked, not the claim budget, a second later (the surplus is given
	// back until a slot is likely free), well before its breaker opens.
	MaxPerTarget        int
	MaxWaitingPerTarget int
	// MaxClaimed caps the tasks claimed and not yet settled on this node.
	// Default 16 × SendersPerTenant: room for a burst of one target to wait its turn
	// in memory rather than be given back (two writes a task).
	MaxClaimed int
	// Breaker tunes the per-target circuit breakers.
	Breaker BreakerConfig
	// MetricsTopTargets is how many targets have series of their own
	// (hookwheel_breaker_state{target}): the busiest by recent claims. The
	// others share target="other", so that tenants sending to ever new
	// hosts cannot grow the node's series (targetlabels.go). Default 100.
	MetricsTopTargets int
	// MaxResponseBody is how much of a receiver's response body an attempt
	// records, at most ResponseBodyReadMax (64 KiB): no more is read of an
	// answer (the rest costs its connection). Default 4 KiB.
	MaxResponseBody int
	// Rand returns a uniform number in [0, 1) for retry jitter. Default math/rand/v2.
	Rand func() float64
	// UserAgent is sent with every webhook. Default "hookwheel/1".
	UserAgent string
}

// Store is what the dispatcher's parts take from the source of truth, each
// through the interface it declares, and what Stop takes to leave the
// membership.
type Store interface {
	membershipStore
	loaderStore
	listenerStore
	materializerStore
	claimStore
	deferStore
	limitsReader
	bodyStore
	secretStore
	recordStore
	maintenance.StatsStore
	maintenance.PurgerStore
	heldStore
	healthStore
	LeaveNode(ctx context.Context, nodeID uuid.UUID) error
}

// Redis is what the parts take from Redis: the fire-once keys, the dispatch
// limits and the answer journal.
type Redis interface {
	fireOnceStore
	fireOnceReleaser
	dispatchLimiter
	answerStore
}

// DefaultTargetDisableAfter is Config.TargetDisableAfter's default: five
// days, as Svix disables an endpoint that failed for five days.
const DefaultTargetDisableAfter = 120 * time.Hour

// KeepForever as Config.Retention keeps finished tasks until their tenant
// is given a retention of its own; as Config.AuditRetention, audit entries.
const KeepForever time.Duration = -1

// DefaultAuditRetention is how long audit entries are kept unless
// Config.AuditRetention says otherwise: 400 days, over a year, so that a
// yearly review finds the whole year.
const DefaultAuditRetention = 400 * 24 * time.Hour

// ForgetKeys as Config.IdempotencyWindow remembers no purged task's key: a
// repeat after the purge creates a new task.
const ForgetKeys time.Duration = -1

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
	if c.Keyring == nil {
		c.Keyring = &keyring.Keyring{}
	}
	if c.Guard == nil {
		c.Guard = netguard.New(netguard.Config{})
	}
	if c.Senders <= 0 {
		c.Senders = 1024
	}
	if c.SendersPerTenant <= 0 {
		c.SendersPerTenant = min(128, c.Senders)
	}
	if c.SendBytes <= 0 {
		c.SendBytes = 256 << 20
	}
	if c.SendBytesPerTenant <= 0 {
		c.SendBytesPerTenant = min(64<<20, c.SendBytes)
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 5 * time.Minute
	}
	if c.HTTPClient == nil {
		c.HTTPClient = newHTTPClient(c.Guard, c.MaxTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
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
	if c.ClaimAhead+c.ClaimGroup > store.MaxClaimAhead {
		// The stale-claim scan looks that far ahead for claims (store.StaleClaims).
		return fmt.Errorf("dispatcher: ClaimAhead %s plus ClaimGroup %s must not exceed %s",
			c.ClaimAhead, c.ClaimGroup, store.MaxClaimAhead)
	}
	if c.ClaimLinger <= 0 {
		c.ClaimLinger = time.Millisecond
	}
	if c.Lookahead <= 0 {
		c.Lookahead = model.DefaultLookahead
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
	if c.HeldRefresh <= 0 {
		c.HeldRefresh = 3 * time.Second
	}
	if c.TargetDisableAfter <= 0 {
		c.TargetDisableAfter = DefaultTargetDisableAfter
	}
	if c.TenantChanged == nil {
		c.TenantChanged = func(uuid.UUID) {}
	}
	switch {
	case c.Retention == 0:
		c.Retention = 168 * time.Hour
	case c.Retention < 0 && c.Retention != KeepForever:
		return fmt.Errorf("dispatcher: Retention %s is negative; KeepForever keeps finished tasks", c.Retention)
	}
	switch {
	case c.AuditRetention == 0:
		c.AuditRetention = DefaultAuditRetention
	case c.AuditRetention < 0 && c.AuditRetention != KeepForever:
		return fmt.Errorf("dispatcher: AuditRetention %s is negative; KeepForever keeps audit entries", c.AuditRetention)
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = maintenance.DefaultPurgeInterval
	}
	switch {
	case c.IdempotencyWindow == 0:
		c.IdempotencyWindow = 24 * time.Hour
	case c.IdempotencyWindow < 0 && c.IdempotencyWindow != ForgetKeys:
		return fmt.Errorf("dispatcher: IdempotencyWindow %s is negative; ForgetKeys remembers none", c.IdempotencyWindow)
	}
	if c.RetentionBatch <= 0 {
		c.RetentionBatch = maintenance.DefaultPurgeBatch
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	if c.NodeTTL <= 0 {
		c.NodeTTL = 3 * time.Second
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
		c.MaxPerTarget = max(1, c.SendersPerTenant/4)
	}
	if c.MaxClaimed <= 0 {
		c.MaxClaimed = 16 * c.SendersPerTenant
	}
	if c.MaxWaitingPerTenant <= 0 {
		c.MaxWaitingPerTenant = max(1, c.MaxClaimed/4)
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
	if c.StatsInterval <= 0 {
		c.StatsInterval = maintenance.DefaultStatsInterval
	}
	if c.MetricsTopTargets <= 0 {
		c.MetricsTopTargets = 100
	}
	if c.MaxResponseBody <= 0 {
		c.MaxResponseBody = 4 << 10
	}
	c.MaxResponseBody = min(c.MaxResponseBody, ResponseBodyReadMax)
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.UserAgent == "" {
		c.UserAgent = "hookwheel/1"
	}
	return nil
}
