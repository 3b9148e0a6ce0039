// Package app assembles one hookwheel node from its parts (store, tenants,
// dispatcher, API) and runs it until its context ends. The binary and the
// end-to-end tests both start nodes through it.
package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/tenants"
	"github.com/hookwheel/hookwheel/web"
)

// Config configures a node.
type Config struct {
	// DatabaseURL and RedisURL locate the services. Required.
	DatabaseURL string
	RedisURL    string
	// DatabaseDirectURL (HOOKWHEEL_DATABASE_DIRECT_URL) reaches Postgres
	// without a transaction pooler, for LISTEN and migrations (see
	// store.Config.DirectURL). Default: DatabaseURL, which New refuses when it
	// goes through a transaction pooler and the node dispatches or migrates.
	DatabaseDirectURL string
	// DatabasePooler (HOOKWHEEL_DATABASE_POOLER) says whether DatabaseURL
	// goes through a transaction pooler. Default store.PoolerAuto: detected.
	DatabasePooler store.Pooler
	// RedisKeyPrefix starts every Redis key. Default "hookwheel:".
	RedisKeyPrefix string
	// Addr is the HTTP listen address. Default ":8080".
	Addr string
	// MetricsAddr, when set, serves /metrics on a listener of its own, and
	// Addr answers 404 there: the metrics name targets and show the node's
	// load, which whoever can reach the API need not see. Default empty:
	// /metrics on Addr, with a warning at start.
	MetricsAddr string
	// PprofAddr, when set, serves Go's runtime profiles (/debug/pprof/) on a
	// listener of its own, never on Addr; equal to MetricsAddr, they share
	// the metrics listener. Default empty: no profiles.
	PprofAddr string
	// AdminToken guards the operator API; empty disables it.
	AdminToken string
	// SessionKey signs the dashboard's sign-in sessions
	// (HOOKWHEEL_SESSION_KEY); every node behind one address needs the same.
	// Default: a random key the first node stores in Postgres (sealed with
	// the Keyring when it has a key) and every node reads.
	SessionKey []byte
	// DisableAPI and DisableDispatcher split the roles (--dispatcher-only, --api-only).
	// The HTTP listener stays up either way, for health checks and metrics.
	DisableAPI        bool
	DisableDispatcher bool
	// SkipMigrate starts without applying migrations (--no-migrate).
	SkipMigrate bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Targets decides which addresses webhooks may reach (the SSRF guard).
	Targets netguard.Config
	// Dispatcher tunes the dispatcher; DB, Redis, Logger, Registerer and
	// Guard are filled in.
	Dispatcher dispatcher.Config
	// Limits bound task requests.
	Limits api.Limits
	// DefaultLimits are the node's limits for tenants that set none of
	// their own, field by field (see model.Limits): API rate, pending tasks,
	// schedules, max_timeout, dispatch rate and concurrency. Default none
	// (zero): a tenant is limited only by what it sets. The binary sets
	// model.DefaultNodeLimits, changed by HOOKWHEEL_DEFAULT_*.
	DefaultLimits model.Limits
	// DefaultPlan is the plan a new tenant goes on unless its create names
	// one (tenants.Config.DefaultPlan). Default none.
	DefaultPlan string
	// HTTP bounds the HTTP server's connections and requests.
	HTTP api.ServerLimits
	// TrustedProxies are the proxies in front of the API, whose
	// X-Forwarded-For names the client (see api.Config).
	TrustedProxies []netip.Prefix
	// Keyring seals signing secrets at rest (HOOKWHEEL_ENCRYPTION_KEY).
	// Default: none, secrets stored in plaintext.
	Keyring *keyring.Keyring
	// KeyCacheTTL is how long a node trusts a key it found valid (see
	// tenants.Config). Default 2s.
	KeyCacheTTL time.Duration
	// Deleter tunes the deletion of tenants (see tenants.DeleterConfig);
	// Store and Logger are filled in.
	Deleter tenants.DeleterConfig
	// Signup is how tenants may sign up (HOOKWHEEL_SIGNUP). Default
	// tenants.SignupOff.
	Signup tenants.SignupMode
	// SignupLimit bounds sign-ups per client address and in all
	// (HOOKWHEEL_SIGNUP_PER_ADDRESS, HOOKWHEEL_SIGNUP_PER_HOUR).
	SignupLimit api.SignupLimit
	// PublicURL is the origin portal links' URLs begin with
	// (HOOKWHEEL_PUBLIC_URL). Default: the origin each creating call reached.
	PublicURL string
	// PortalFrameAncestors are the pages that may frame the portal
	// (HOOKWHEEL_PORTAL_FRAME_ANCESTORS, see web.ParseFrameAncestors).
	// Default web.DefaultPortalFrameAncestors.
	PortalFrameAncestors string
	// ShutdownTimeout bounds how long in-flight API requests and webhook
	// sends may take to finish once the node is asked to stop; sends still
	// waiting for their answer then are interrupted, recorded as such and
	// due again at once. Default 30s.
	ShutdownTimeout time.Duration
	// TracerProvider makes the node's spans: the API's requests, the
	// inserts, the claims, the sends and the records. Default: the one
	// the OTEL_* environment asks for (TracerProviderFromEnv), which the
	// node flushes and stops as it stops; one given here is the caller's
	// to stop.
	TracerProvider trace.TracerProvider
}

// ErrPoolerWithoutDirectURL is New's answer when DATABASE_URL goes through a
// transaction pooler and nothing reaches Postgres directly, while the node
// would dispatch (which LISTENs) or migrate (which locks the session).
var ErrPoolerWithoutDirectURL = errors.New("DATABASE_URL goes through a connection pooler in transaction mode " +
	"(detected, or HOOKWHEEL_DATABASE_POOLER=transaction), where LISTEN never hears a notification and migrations cannot hold their lock: " +
	"set HOOKWHEEL_DATABASE_DIRECT_URL to a connection straight to Postgres (or through a pooler in session mode); " +
	"if DATABASE_URL's pooler runs in session mode, set HOOKWHEEL_DATABASE_POOLER=none instead")

// The stores implement what the dispatcher declares it takes; store cannot
// say so itself without importing the dispatcher.
var (
	_ dispatcher.Store = (*store.DB)(nil)
	_ dispatcher.Redis = (*store.Redis)(nil)
)

// Node is one running hookwheel process: API, dispatcher, or both.
type Node struct {
	cfg        Config
	logger     *slog.Logger
	db         *store.DB
	redis      *store.Redis
	tenants    *tenants.Service
	usage      *tenants.UsageRecorder
	deleter    *tenants.Deleter
	dispatcher *dispatcher.Dispatcher
	server     *http.Server
	listener   net.Listener
	// ops serve metrics and profiles apart from the API (MetricsAddr,
	// PprofAddr).
	ops []*opsServer
	// stopTracing flushes and stops the tracer provider the node built;
	// nil when it built none.
	stopTracing func(context.Context) error
}

// New connects to the services, migrates, and binds the listen address; it
// serves nothing until Run.
func New(ctx context.Context, cfg Config) (n *Node, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Addr == "" {
		cfg.Addr = ":8080"
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	n = &Node{cfg: cfg, logger: cfg.Logger}
	// Returning an error sets n to nil before this runs: close what was
	// opened through a copy.
	opened := n
	defer func() {
		if err != nil {
			opened.close()
		}
	}()
	if cfg.TracerProvider == nil {
		if cfg.TracerProvider, n.stopTracing, err = TracerProviderFromEnv(ctx, os.Getenv); err != nil {
			return nil, err
		}
		n.cfg.TracerProvider = cfg.TracerProvider
	}

	n.db, err = store.Open(ctx, store.Config{
		DatabaseURL: cfg.DatabaseURL, DirectURL: cfg.DatabaseDirectURL, Pooler: cfg.DatabasePooler, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	// Refused here rather than left to fail later: a dispatcher that cannot
	// LISTEN would only log its retries while tasks stored through other
	// nodes wait for the sweep.
	if err := n.db.CheckSession(); err != nil && (!cfg.DisableDispatcher || !cfg.SkipMigrate) {
		return nil, ErrPoolerWithoutDirectURL
	}
	if !cfg.SkipMigrate {
		if err := n.db.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	n.redis, err = store.OpenRedis(store.RedisConfig{URL: cfg.RedisURL, KeyPrefix: cfg.RedisKeyPrefix})
	if err != nil {
		return nil, err
	}
	if cfg.Keyring == nil {
		cfg.Keyring = &keyring.Keyring{}
		n.cfg.Keyring = cfg.Keyring
	}
	n.usage = tenants.NewUsageRecorder(tenants.UsageConfig{Store: n.db, Logger: cfg.Logger})
	n.tenants = tenants.New(tenants.Config{Store: n.db, Keyring: cfg.Keyring, Usage: n.usage, KeyCacheTTL: cfg.KeyCacheTTL,
		DefaultLimits: cfg.DefaultLimits, DefaultPlan: cfg.DefaultPlan, Logger: cfg.Logger})
	deleterCfg := cfg.Deleter
	deleterCfg.Store, deleterCfg.Logger = n.db, cfg.Logger
	n.deleter = tenants.NewDeleter(deleterCfg)

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	key, err := sessionKey(ctx, cfg, n.tenants)
	if err != nil {
		return nil, err
	}
	sessions, err := session.New(session.Config{Key: key})
	if err != nil {
		return nil, err
	}
	guard := netguard.New(cfg.Targets)
	apiCfg := api.Config{
		Sessions:    sessions,
		Guard:       guard,
		Tenants:     n.tenants,
		Ready:       map[string]api.Pinger{"postgres": n.db},
		Degradable:  map[string]api.Pinger{"redis": n.redis},
		RateLimiter: n.redis,
		AdminToken:  cfg.AdminToken,
		Logger:      cfg.Logger,
		Registerer:  registry,
		Gatherer:    registry,
		Limits:      cfg.Limits,

		MetricsElsewhere: cfg.MetricsAddr != "",
		TrustedProxies:   cfg.TrustedProxies,
		EncryptionStatus: encryptionStatus(cfg.Keyring),

		Signup:      tenants.NewSignup(tenants.SignupConfig{Mode: cfg.Signup, Store: n.db, Tenants: n.tenants, Logger: cfg.Logger}),
		SignupLimit: cfg.SignupLimit,
		PublicURL:   cfg.PublicURL,

		TracerProvider: cfg.TracerProvider,
	}
	if n.redis != nil {
		apiCfg.SignupLimiter = n.redis
	}
	// Without a dispatcher here, the task service goes by the look-ahead the
	// dispatchers elsewhere are configured with.
	taskCfg := tasks.Config{Store: n.db, Lookahead: cfg.Dispatcher.Lookahead, Logger: cfg.Logger}
	// Bound before the dispatcher is made: the address is half of the node's
	// name, which only this process can hold while it listens there.
	if n.listener, err = api.Listen(cfg.Addr, cfg.HTTP); err != nil {
		return nil, err
	}
	if !cfg.DisableDispatcher {
		dcfg := cfg.Dispatcher
		if dcfg.NodeName == "" {
			// A node restarted in place (a container restarted in its pod,
			// a service restarted on its host) binds the same address under
			// the same host name: it may take its dead predecessor's place
			// at once.
			host, _ := os.Hostname()
			dcfg.NodeName, dcfg.SucceedNamesakes = host+"/"+n.listener.Addr().String(), true
		}
		if dcfg.ShutdownTimeout <= 0 {
			dcfg.ShutdownTimeout = cfg.ShutdownTimeout
		}
		if dcfg.MaxTimeout <= 0 {
			// The API's bound on a task's timeout, which the dispatcher
			// enforces on tasks stored before it was lowered.
			dcfg.MaxTimeout = cfg.Limits.MaxTimeout
		}
		dcfg.DB, dcfg.Logger, dcfg.Registerer, dcfg.Guard = n.db, cfg.Logger, registry, guard
		if n.redis != nil {
			// Only when there is one: a nil *store.Redis in the interface
			// would not be nil, and the dispatcher would use it.
			dcfg.Redis = n.redis
		}
		dcfg.Keyring = cfg.Keyring
		dcfg.DefaultLimits = cfg.DefaultLimits
		dcfg.TracerProvider = cfg.TracerProvider
		// The dispatcher's listener hears tenant changes for the whole node.
		dcfg.TenantChanged = n.tenantChanged
		n.dispatcher, err = dispatcher.New(dcfg)
		if err != nil {
			return nil, err
		}
		taskCfg.Announcer = n.dispatcher
		apiCfg.Breakers = breakerSource{n.dispatcher}
	}
	if apiCfg.Tasks, err = tasks.New(taskCfg); err != nil {
		return nil, err
	}
	handler, err := api.New(apiCfg)
	if err != nil {
		return nil, err
	}
	var h http.Handler = handler
	if cfg.DisableAPI {
		h = operationsOnly(handler)
	} else {
		portal, err := web.Portal(cfg.PortalFrameAncestors)
		if err != nil {
			return nil, fmt.Errorf("HOOKWHEEL_PORTAL_FRAME_ANCESTORS: %w", err)
		}
		h = withDashboard(handler, web.New(), web.Docs(), portal)
	}
	if n.ops, err = listenOps(cfg, registry); err != nil {
		return nil, err
	}
	n.server = api.NewHTTPServer(h, cfg.HTTP, cfg.Logger)
	return n, nil
}

// encryptionStatus is what /readyz says of secrets at rest.
func encryptionStatus(k *keyring.Keyring) string {
	if !k.Enabled() {
		return "off: HOOKWHEEL_ENCRYPTION_KEY is not set, signing secrets are stored in plaintext"
	}
	return "on: new signing secrets are sealed with key " + k.SealingKeyID()
}

// sessionKey is the key of the dashboard's sessions: Config.SessionKey, else
// the installation's, which the first node to start makes and stores.
func sessionKey(ctx context.Context, cfg Config, secrets *tenants.Service) ([]byte, error) {
	if len(cfg.SessionKey) > 0 {
		return cfg.SessionKey, nil
	}
	stored, err := secrets.SharedSecret(ctx, "dashboard-session-key", func() (string, error) {
		return base64.StdEncoding.EncodeToString(session.RandomKey()), nil
	})
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(stored)
	if err != nil || len(key) < session.KeyBytes {
		return nil, errors.New("the stored dashboard session key is malformed")
	}
	return key, nil
}

// Addr is the address the node listens on (useful with port 0).
func (n *Node) Addr() string { return n.listener.Addr().String() }

// Tenants manages tenants; the CLI and tests use it directly.
func (n *Node) Tenants() *tenants.Service { return n.tenants }

// Run serves until ctx ends, then shuts down gracefully: it stops accepting
// requests and work, lets in-flight requests and sends finish, and returns.
func (n *Node) Run(ctx context.Context) error {
	defer n.close()
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.server.Serve(n.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- fmt.Errorf("serve http: %w", err)
		}
	}()
	var opsWG sync.WaitGroup
	for _, o := range n.ops {
		opsWG.Add(1)
		go func() {
			defer opsWG.Done()
			if err := o.server.Serve(o.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.logger.Error("serving "+o.name+" stopped", "addr", o.listener.Addr().String(), "err", err)
			}
		}()
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// Key uses are written until the last request has been served.
	usageCtx, stopUsage := context.WithCancel(context.WithoutCancel(ctx))
	defer stopUsage()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.usage.Run(usageCtx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.deleter.Run(runCtx); err != nil {
			n.logger.Error("tenant deleter failed", "err", err)
		}
	}()
	if n.dispatcher != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.dispatcher.Run(runCtx); err != nil {
				n.logger.Error("dispatcher failed", "err", err)
			}
		}()
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.listenTenants(runCtx)
		}()
	}
	n.logger.Info("hookwheel node running", "addr", n.Addr(), "api", !n.cfg.DisableAPI, "dispatcher", n.dispatcher != nil, "redis", n.redis.Mode(),
		"postgres_max_conns", n.db.MaxConns(), "postgres_pooler", n.db.Pooled())
	for _, o := range n.ops {
		n.logger.Info("serving "+o.name, "addr", o.listener.Addr().String())
	}
	if !n.cfg.Keyring.Enabled() {
		n.logger.Warn("HOOKWHEEL_ENCRYPTION_KEY is not set: signing secrets are stored in plaintext (see README, Running in production)")
	}
	if n.cfg.MetricsAddr == "" {
		n.logger.Warn("HOOKWHEEL_METRICS_ADDR is not set: /metrics is served on the API's port, to whoever can reach it (see README, Running in production)")
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.ShutdownTimeout)
	defer cancel()
	if serr := n.server.Shutdown(shutdownCtx); serr != nil {
		n.logger.Warn("http shutdown did not finish cleanly", "err", serr)
	}
	stopUsage()
	wg.Wait()
	// Metrics and profiles stay up until the sends in flight are done, so
	// that the drain can be watched.
	opsCtx, cancelOps := context.WithTimeout(context.WithoutCancel(ctx), opsShutdownTimeout)
	defer cancelOps()
	for _, o := range n.ops {
		if serr := o.server.Shutdown(opsCtx); serr != nil {
			// A CPU profile or trace may run for many seconds more.
			_ = o.server.Close()
		}
	}
	opsWG.Wait()
	n.logger.Info("hookwheel node stopped")
	return err
}

// opsShutdownTimeout bounds the wait for scrapes and profiles in progress
// once the node has stopped.
const opsShutdownTimeout = 5 * time.Second

func (n *Node) close() {
	if n.listener != nil && n.server == nil {
		_ = n.listener.Close()
	}
	closeOps(n.ops)
	if n.redis != nil {
		_ = n.redis.Close()
	}
	if n.db != nil {
		n.db.Close()
	}
	if n.stopTracing != nil {
		// Last: the spans of the sends that finished during the stop are
		// among those flushed.
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := n.stopTracing(ctx); err != nil {
			n.logger.Warn("flushing spans at stop failed", "err", err)
		}
	}
}
