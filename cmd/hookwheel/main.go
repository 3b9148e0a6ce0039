// Command hookwheel is the hookwheel server: a self-hosted, multi-tenant HTTP
// webhook scheduler over Postgres and Redis.
//
//	hookwheel serve [--api-only | --dispatcher-only] [--no-migrate]
//	hookwheel migrate
//	hookwheel tenants create --name NAME
//	hookwheel tenants suspend|resume|delete ID
//	hookwheel keys create|list|revoke --tenant ID ...
//	hookwheel invites create|list|revoke ...
//	hookwheel secrets rotate|list --tenant ID ...
//	hookwheel secrets rekey
//	hookwheel receive --addr 127.0.0.1:9000 --secret whsec_...|whpk_...
//	hookwheel tasks|schedules|topics|flow-keys|portal-links|targets|plans|batch|signup|usage|settings ...   (a client of the API, on the Go SDK)
//
// Configuration comes from the environment; see docs/operations.md.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/internal/keyring"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/tenants"
)

const usage = `hookwheel schedules HTTP webhooks and fires them on time.

Usage:
  hookwheel serve [--api-only | --dispatcher-only] [--no-migrate]
  hookwheel migrate
  hookwheel tenants create --name NAME
  hookwheel tenants suspend|resume|delete ID
  hookwheel keys create --tenant ID [--name NAME] [--scopes tasks:read,...] [--expires-in 720h]
  hookwheel keys list --tenant ID [--json]
  hookwheel keys revoke --tenant ID KEY_ID
  hookwheel invites create [--expires-in 168h] [--note TEXT] | list [--json] | revoke INVITE_ID
  hookwheel secrets rotate --tenant ID [--algorithm hmac-sha256|ed25519] [--grace 24h] [--json]
  hookwheel secrets list --tenant ID [--json]
  hookwheel secrets rekey
  hookwheel receive [--addr 127.0.0.1:9000] [--secret whsec_... | whpk_...]

Client commands, calling the API at HOOKWHEEL_URL as the tenant of HOOKWHEEL_API_KEY:
  hookwheel tasks create --url URL [--method POST] [--header 'Name: value']... [--body TEXT | --body-file FILE]
                         [--at 2030-01-02T15:04:05Z | --in 90s] [--timeout 30s] [--max-attempts 10]
                         [--ordering-key KEY] [--flow-key KEY] [--idempotency-key KEY]
  hookwheel tasks get|cancel|attempts ID
  hookwheel tasks list [--status dead] [--url PREFIX] [--schedule ID] [--publish ID] [--topic NAME] [--include-body] [--limit 20 | --all]
  hookwheel tasks reschedule ID (--at TIME | --in DURATION)
  hookwheel tasks replay ID [--url URL] [--method M] [--header 'Name: value']... [--body TEXT]
  hookwheel tasks replay-dead [--url PREFIX] [--schedule ID] [--publish ID] [--topic NAME] [--dry-run]
  hookwheel schedules create --cron '0 9 * * *' [--timezone Europe/Paris] --url URL [--paused] ...
  hookwheel schedules list [--include-body] [--limit 20 | --all]
  hookwheel schedules get|pause|resume|delete ID
  hookwheel schedules next ID [--count 10]
  hookwheel topics put NAME --endpoint [ENDPOINT_NAME=]URL... [--description TEXT]
  hookwheel topics get|delete NAME
  hookwheel topics list [--limit 20 | --all]
  hookwheel topics publish NAME [--header 'Name: value']... [--body TEXT] [--at TIME | --in DURATION] ...
  hookwheel topics publish-status PUBLISH_ID
  hookwheel flow-keys put KEY [--rate N [--period 1s]] [--parallelism N]
  hookwheel flow-keys get|delete KEY
  hookwheel flow-keys list [--limit 20 | --all]
  hookwheel portal-links create LABEL [--expires-in 1h] [--name TEXT]   a read-only page of LABEL's tasks
  hookwheel portal-links list [--limit 20 | --all]
  hookwheel portal-links revoke ID
  hookwheel targets pause TARGET [--reason TEXT] | resume TARGET | list   hold a target's tasks, let them go
  hookwheel settings [--operations-url URL | --clear-operations-url]   the tenant's settings, shown or changed
  hookwheel batch FILE            one task per line as POST /v1/tasks takes it (- reads standard input)
  hookwheel signup --name NAME [--invite-code hwinv_...]   sign a tenant up (needs no HOOKWHEEL_API_KEY)
  hookwheel plans put NAME [--tasks-per-day N] [--max-pending-tasks N] [--api-rate N] ...   (the operator's,
  hookwheel plans get|delete NAME                                 with HOOKWHEEL_ADMIN_TOKEN)
  hookwheel plans list
  hookwheel usage [--from YYYY-MM-DD] [--to YYYY-MM-DD]   the tenant's usage per UTC day (default this month)
  hookwheel usage --all [--from D] [--to D] [--tenant ID]  every tenant's, as CSV (HOOKWHEEL_ADMIN_TOKEN)
  Each takes --json to print the API's JSON instead of a table; -h lists a command's flags.

Exit status:
  0 success
  1 the API refused the request (a 4xx not listed below; for batch, any line failed), or another error
  2 usage error: a wrong command, flag or argument, or HOOKWHEEL_API_KEY unset
  3 not found (404)
  4 conflict (409): the task or schedule is not in a state that allows it, such as canceling a task
    that is already being sent
  5 authentication or permission (401, 403): the API key is wrong, revoked, or lacks the scope
  6 rate limited (429), after retrying for as long as the server asked
  7 the server failed (5xx) or could not be reached

Environment:
  HOOKWHEEL_URL           client commands: the server (default http://localhost:8080)
  HOOKWHEEL_API_KEY       client commands: the tenant's API key, hw_<key id>_<secret>
  HOOKWHEEL_ADDR          HTTP listen address (default :8080)
  DATABASE_URL            Postgres (default postgres://localhost:5432/hookwheel?sslmode=disable); may go
                          through PgBouncer in transaction mode (see docs/operations.md, Behind PgBouncer)
  HOOKWHEEL_DATABASE_DIRECT_URL  Postgres without a transaction pooler, for LISTEN and migrations
                          (default DATABASE_URL; required when DATABASE_URL goes through one)
  HOOKWHEEL_DATABASE_POOLER  auto, none or transaction (alias pgbouncer): whether DATABASE_URL goes
                          through a transaction pooler (default auto: detected at start)
  REDIS_URL               Redis (default redis://localhost:6379/0); a Redis Cluster with
                          ?addr=host2:6379&addr=..., Sentinel with ?master_name=NAME&addr=...
                          (see docs/operations.md, Redis: one server, Cluster or Sentinel)
  HOOKWHEEL_ADMIN_TOKEN   bearer token of the operator API, the plans commands and usage --all (default: admin API disabled)
  HOOKWHEEL_SESSION_KEY   base64 of 32 bytes signing the dashboard's sessions, the same on every
                          node (default: a random key kept in Postgres)
  HOOKWHEEL_ENCRYPTION_KEY  base64 of 32 bytes, or id:base64,... (first seals): signing secrets
                          are stored encrypted (default: plaintext)
  HOOKWHEEL_ALLOW_PRIVATE_TARGETS  true lets webhooks reach loopback and private addresses (default false)
  HOOKWHEEL_TARGET_ALLOW_CIDRS     comma-separated CIDRs webhooks may reach although private
  HOOKWHEEL_LOG_LEVEL     debug, info, warn or error (default info)
  HOOKWHEEL_LOG_FORMAT    text or json (default json)
  HOOKWHEEL_METRICS_ADDR  serve /metrics on this address, a listener of its own, and not on
                          HOOKWHEEL_ADDR (default: on HOOKWHEEL_ADDR, with a warning; set it in production)
  HOOKWHEEL_METRICS_TOP_TARGETS  targets with metrics series of their own, the busiest; the others
                          share target="other" (default 100)
  HOOKWHEEL_PPROF_ADDR    serve Go's pprof profiles on this address, a listener of its own or
                          HOOKWHEEL_METRICS_ADDR's (default: off)
  HOOKWHEEL_SHUTDOWN_TIMEOUT  how long a stop waits for sends in flight (default 30s)
  HOOKWHEEL_TARGET_DISABLE_AFTER  a tenant's target failing every attempt this long is paused, and the
                          tenant's operations_url told (default 120h)
  HOOKWHEEL_RETENTION     how long finished tasks are kept (default 168h; 0 keeps them)
  HOOKWHEEL_AUDIT_RETENTION  how long audit entries are kept (default 9600h, 400 days; 0 keeps them)
  HOOKWHEEL_IDEMPOTENCY_WINDOW  how long after its task's creation an Idempotency-Key stays taken,
                          even once retention purged the task (default 24h; 0: until the purge)
  HOOKWHEEL_TRUSTED_PROXIES  CIDRs of proxies whose X-Forwarded-For names the client
  HOOKWHEEL_PUBLIC_URL    the origin portal links' URLs begin with, https://hooks.example.com
                          (default: the origin each creating call reached)
  HOOKWHEEL_PORTAL_FRAME_ANCESTORS  pages that may frame the portal, a CSP frame-ancestors
                          list such as 'self' https://app.example.com (default *; 'none' for none)
  HOOKWHEEL_SIGNUP        off, invite or open: whether tenants may sign up by themselves (default off);
                          HOOKWHEEL_SIGNUP_PER_ADDRESS, _PER_HOUR bound them (default 5 and 100 an hour)
  HOOKWHEEL_HTTP_READ_TIMEOUT, _WRITE_TIMEOUT, _IDLE_TIMEOUT, HOOKWHEEL_HTTP_MAX_CONNS
                          bounds of the HTTP server (default 30s, 60s, 60s, 10000)
  HOOKWHEEL_DEFAULT_API_RATE, _API_BURST, _MAX_PENDING_TASKS, _MAX_SCHEDULES, _MAX_TIMEOUT,
  HOOKWHEEL_DEFAULT_DISPATCH_RATE, _DISPATCH_CONCURRENCY, _TASKS_PER_DAY, _DELIVERIES_PER_DAY
                          limits of tenants without their own or their plan's (default 50/s, 100,
                          10000, 100, 30s, 100/s per target host, 20 per target host, none, none;
                          0 lifts one)
  HOOKWHEEL_DEFAULT_PLAN  the plan of a new tenant whose create names none (default none)
  OTEL_EXPORTER_OTLP_ENDPOINT  export traces over OTLP, http://collector:4318 (default: none made);
                          the other OTEL_* variables work as usual (docs/observability.md)
  See docs/operations.md for the rest.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "hookwheel:", err)
		os.Exit(exitCode(err))
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg + "\n\n" + usage }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given"}
	}
	switch args[0] {
	case "tasks", "schedules", "topics", "flow-keys", "portal-links", "targets", "plans", "batch", "signup", "usage", "settings":
		// Before loadEnv: the server's settings are none of a client's
		// business, and a wrong one must not stop it.
		return runClient(ctx, args, console{getenv: os.Getenv, stdin: os.Stdin, stdout: stdout, now: time.Now})
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	}
	env, err := loadEnv(os.Getenv)
	if err != nil {
		return err
	}
	logger := newLogger(stderr, env)
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], env, logger)
	case "migrate":
		return migrate(ctx, env, logger)
	case "tenant", "tenants":
		return tenantCommand(ctx, args[1:], env, logger, stdout)
	case "keys":
		return keysCommand(ctx, args[1:], env, logger, stdout)
	case "invites":
		return invitesCommand(ctx, args[1:], env, logger, stdout)
	case "secrets":
		return secretsCommand(ctx, args[1:], env, logger, stdout)
	case "receive":
		return receive(ctx, args[1:], stdout)
	}
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// environment is the process configuration read from environment variables.
type environment struct {
	addr        string
	databaseURL string
	// directURL and pooler: HOOKWHEEL_DATABASE_DIRECT_URL and
	// HOOKWHEEL_DATABASE_POOLER (see store.Config).
	directURL   string
	pooler      store.Pooler
	redisURL    string
	redisPrefix string
	adminToken  string
	sessionKey  []byte
	keyring     *keyring.Keyring
	logLevel    slog.Level
	logJSON     bool
	senders     int
	perTenant   int
	maxBody     int
	listBodies  int
	maxTimeout  time.Duration
	shutdown    time.Duration
	// nodeTTL and heartbeat: HOOKWHEEL_NODE_TTL and
	// HOOKWHEEL_HEARTBEAT_INTERVAL (0: the dispatcher's defaults).
	nodeTTL     time.Duration
	heartbeat   time.Duration
	http        api.ServerLimits
	proxies     []netip.Prefix
	maxAhead    time.Duration
	retention   time.Duration
	targets     netguard.Config
	pprofAddr   string
	metricsAddr string
	topTargets  int

	// auditRetention is HOOKWHEEL_AUDIT_RETENTION, as retention.
	auditRetention time.Duration
	// idempotencyWindow: HOOKWHEEL_IDEMPOTENCY_WINDOW (see dispatcher.Config).
	idempotencyWindow time.Duration
	// defaultLimits: HOOKWHEEL_DEFAULT_* over model.DefaultNodeLimits.
	defaultLimits model.Limits
	// signup: HOOKWHEEL_SIGNUP and its limits (signup.go).
	signup signupSettings
	// defaultPlan: HOOKWHEEL_DEFAULT_PLAN, the plan of new tenants.
	defaultPlan string
	// portal: HOOKWHEEL_PUBLIC_URL and HOOKWHEEL_PORTAL_FRAME_ANCESTORS
	// (portallinks.go).
	portal portalSettings
	// targetDisableAfter: HOOKWHEEL_TARGET_DISABLE_AFTER (see
	// dispatcher.Config.TargetDisableAfter).
	targetDisableAfter time.Duration
}

func loadEnv(getenv func(string) string) (environment, error) {
	e := environment{
		addr:        or(getenv("HOOKWHEEL_ADDR"), ":8080"),
		databaseURL: or(getenv("DATABASE_URL"), "postgres://localhost:5432/hookwheel?sslmode=disable"),
		directURL:   getenv("HOOKWHEEL_DATABASE_DIRECT_URL"),
		redisURL:    or(getenv("REDIS_URL"), "redis://localhost:6379/0"),
		redisPrefix: getenv("HOOKWHEEL_REDIS_PREFIX"),
		adminToken:  getenv("HOOKWHEEL_ADMIN_TOKEN"),
		logJSON:     getenv("HOOKWHEEL_LOG_FORMAT") != "text",
		pprofAddr:   getenv("HOOKWHEEL_PPROF_ADDR"),
		metricsAddr: getenv("HOOKWHEEL_METRICS_ADDR"),
	}
	if err := store.CheckRedisKeyPrefix(e.redisPrefix); err != nil {
		return e, fmt.Errorf("HOOKWHEEL_REDIS_PREFIX: %w", err)
	}
	if err := e.logLevel.UnmarshalText([]byte(or(getenv("HOOKWHEEL_LOG_LEVEL"), "info"))); err != nil {
		return e, fmt.Errorf("HOOKWHEEL_LOG_LEVEL: %w", err)
	}
	var err error
	if e.pooler, err = store.ParsePooler(getenv("HOOKWHEEL_DATABASE_POOLER")); err != nil {
		return e, fmt.Errorf("HOOKWHEEL_DATABASE_POOLER: %w", err)
	}
	if v := getenv("HOOKWHEEL_SESSION_KEY"); v != "" {
		if e.sessionKey, err = base64.StdEncoding.DecodeString(v); err != nil || len(e.sessionKey) < session.KeyBytes {
			return e, fmt.Errorf("HOOKWHEEL_SESSION_KEY: want base64 of at least %d random bytes (openssl rand -base64 32)", session.KeyBytes)
		}
	}
	if e.keyring, err = keyring.Parse(getenv("HOOKWHEEL_ENCRYPTION_KEY")); err != nil {
		return e, fmt.Errorf("HOOKWHEEL_ENCRYPTION_KEY: %w", err)
	}
	if e.senders, err = intEnv(getenv, "HOOKWHEEL_SENDERS"); err != nil {
		return e, err
	}
	if e.perTenant, err = intEnv(getenv, "HOOKWHEEL_SENDERS_PER_TENANT"); err != nil {
		return e, err
	}
	if e.maxBody, err = intEnv(getenv, "HOOKWHEEL_MAX_BODY_BYTES"); err != nil {
		return e, err
	}
	if e.listBodies, err = intEnv(getenv, "HOOKWHEEL_LIST_BODY_BYTES"); err != nil {
		return e, err
	}
	if e.topTargets, err = intEnv(getenv, "HOOKWHEEL_METRICS_TOP_TARGETS"); err != nil {
		return e, err
	}
	if e.maxTimeout, err = durationEnv(getenv, "HOOKWHEEL_MAX_TIMEOUT", 0); err != nil {
		return e, err
	}
	if e.shutdown, err = durationEnv(getenv, "HOOKWHEEL_SHUTDOWN_TIMEOUT", 0); err != nil {
		return e, err
	}
	if e.targetDisableAfter, err = durationEnv(getenv, "HOOKWHEEL_TARGET_DISABLE_AFTER", 0); err != nil {
		return e, err
	}
	if e.nodeTTL, err = durationEnv(getenv, "HOOKWHEEL_NODE_TTL", 0); err != nil {
		return e, err
	}
	if e.heartbeat, err = durationEnv(getenv, "HOOKWHEEL_HEARTBEAT_INTERVAL", 0); err != nil {
		return e, err
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{
		{"HOOKWHEEL_HTTP_READ_TIMEOUT", &e.http.ReadTimeout},
		{"HOOKWHEEL_HTTP_WRITE_TIMEOUT", &e.http.WriteTimeout},
		{"HOOKWHEEL_HTTP_IDLE_TIMEOUT", &e.http.IdleTimeout},
	} {
		if *d.to, err = durationEnv(getenv, d.name, 0); err != nil {
			return e, err
		}
	}
	if e.http.MaxConns, err = intEnv(getenv, "HOOKWHEEL_HTTP_MAX_CONNS"); err != nil {
		return e, err
	}
	if v := getenv("HOOKWHEEL_ALLOW_PRIVATE_TARGETS"); v != "" {
		if e.targets.AllowPrivate, err = strconv.ParseBool(v); err != nil {
			return e, fmt.Errorf("HOOKWHEEL_ALLOW_PRIVATE_TARGETS: want true or false, got %q", v)
		}
	}
	if e.proxies, err = netguard.ParseCIDRs(getenv("HOOKWHEEL_TRUSTED_PROXIES")); err != nil {
		return e, fmt.Errorf("HOOKWHEEL_TRUSTED_PROXIES: %w", err)
	}
	if e.targets.AllowCIDRs, err = netguard.ParseCIDRs(getenv("HOOKWHEEL_TARGET_ALLOW_CIDRS")); err != nil {
		return e, fmt.Errorf("HOOKWHEEL_TARGET_ALLOW_CIDRS: %w", err)
	}
	if v := getenv("HOOKWHEEL_MAX_SCHEDULE_AHEAD"); v != "" {
		if e.maxAhead, err = time.ParseDuration(v); err != nil {
			return e, fmt.Errorf("HOOKWHEEL_MAX_SCHEDULE_AHEAD: %w", err)
		}
	}
	if e.retention, err = retentionEnv(getenv("HOOKWHEEL_RETENTION")); err != nil {
		return e, err
	}
	if e.auditRetention, err = auditRetentionEnv(getenv("HOOKWHEEL_AUDIT_RETENTION")); err != nil {
		return e, err
	}
	if v := getenv("HOOKWHEEL_IDEMPOTENCY_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case v == "0" || (err == nil && d == 0):
			e.idempotencyWindow = dispatcher.ForgetKeys
		case err != nil || d < time.Second:
			return e, fmt.Errorf("HOOKWHEEL_IDEMPOTENCY_WINDOW: want a duration of at least 1s such as 24h, or 0 to forget a key when its task is purged, got %q", v)
		default:
			e.idempotencyWindow = d
		}
	}
	if e.defaultLimits, err = defaultLimitsEnv(getenv); err != nil {
		return e, err
	}
	if e.signup, err = signupEnv(getenv); err != nil {
		return e, err
	}
	if e.portal, err = portalEnv(getenv); err != nil {
		return e, err
	}
	if e.defaultPlan = strings.TrimSpace(getenv("HOOKWHEEL_DEFAULT_PLAN")); e.defaultPlan != "" && !tenants.ValidPlanName(e.defaultPlan) {
		return e, fmt.Errorf("HOOKWHEEL_DEFAULT_PLAN: want a plan name (lowercase letters, digits, '-' and '_'), got %q", e.defaultPlan)
	}
	return e, nil
}

// defaultLimitsEnv reads the node's default tenant limits: each
// HOOKWHEEL_DEFAULT_<FIELD> replaces model.DefaultNodeLimits' value of that
// field, and 0 (or "unlimited") lifts it for every tenant without its own.
func defaultLimitsEnv(getenv func(string) string) (model.Limits, error) {
	l := model.DefaultNodeLimits()
	num := func(name string, most float64, whole bool, set func(float64)) error {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil
		}
		if strings.EqualFold(v, "unlimited") {
			set(model.Unlimited)
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > most || (whole && f != float64(int64(f))) {
			kind := "number"
			if whole {
				kind = "whole number"
			}
			return fmt.Errorf("%s: want a %s from 0 to %g (0 or unlimited: no limit), got %q", name, kind, most, v)
		}
		if f == 0 {
			f = model.Unlimited
		}
		set(f)
		return nil
	}
	for _, f := range []struct {
		name  string
		most  float64
		whole bool
		set   func(float64)
	}{
		{"HOOKWHEEL_DEFAULT_API_RATE", 1_000_000, false, func(f float64) { l.APIRate = f }},
		{"HOOKWHEEL_DEFAULT_API_BURST", 1_000_000, true, func(f float64) { l.APIBurst = int(f) }},
		{"HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS", 1_000_000_000, true, func(f float64) { l.MaxPendingTasks = int(f) }},
		{"HOOKWHEEL_DEFAULT_MAX_SCHEDULES", 1_000_000, true, func(f float64) { l.MaxSchedules = int(f) }},
		{"HOOKWHEEL_DEFAULT_DISPATCH_RATE", 1_000_000, false, func(f float64) { l.DispatchRate = f }},
		{"HOOKWHEEL_DEFAULT_DISPATCH_CONCURRENCY", 100_000, true, func(f float64) { l.DispatchConcurrency = int(f) }},
		{"HOOKWHEEL_DEFAULT_TASKS_PER_DAY", 1_000_000_000, true, func(f float64) { l.TasksPerDay = int(f) }},
		{"HOOKWHEEL_DEFAULT_DELIVERIES_PER_DAY", 1_000_000_000, true, func(f float64) { l.DeliveriesPerDay = int(f) }},
	} {
		if err := num(f.name, f.most, f.whole, f.set); err != nil {
			return l, err
		}
	}
	if v := strings.TrimSpace(getenv("HOOKWHEEL_DEFAULT_MAX_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case strings.EqualFold(v, "unlimited") || v == "0":
			l.MaxTimeout = model.Unlimited
		case err != nil || d < time.Second:
			return l, fmt.Errorf("HOOKWHEEL_DEFAULT_MAX_TIMEOUT: want a duration of at least 1s such as 30s (0 or unlimited: the node's HOOKWHEEL_MAX_TIMEOUT), got %q", v)
		default:
			l.MaxTimeout = d
		}
	}
	// Resolved: a negative field (no limit) is 0 from here on.
	return l.Resolve(), nil
}

// retentionEnv reads HOOKWHEEL_RETENTION: unset is the dispatcher's default
// (168h), 0 keeps finished tasks (of tenants without a retention of their
// own) forever. Anything under a second is refused rather than rounded: the
// purger works in passes seconds apart.
func retentionEnv(v string) (time.Duration, error) {
	return keepEnv("HOOKWHEEL_RETENTION", v, "168h", "finished tasks")
}

// auditRetentionEnv reads HOOKWHEEL_AUDIT_RETENTION as retentionEnv reads
// HOOKWHEEL_RETENTION: unset is the dispatcher's default (400 days), 0
// keeps audit entries forever.
func auditRetentionEnv(v string) (time.Duration, error) {
	return keepEnv("HOOKWHEEL_AUDIT_RETENTION", v, "9600h", "audit entries")
}

func newLogger(w io.Writer, env environment) *slog.Logger {
	opts := &slog.HandlerOptions{Level: env.logLevel}
	if env.logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(ctx context.Context, args []string, env environment, logger *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	apiOnly := fs.Bool("api-only", false, "serve the API without dispatching")
	dispatcherOnly := fs.Bool("dispatcher-only", false, "dispatch without serving the API (health and metrics stay up)")
	noMigrate := fs.Bool("no-migrate", false, "do not apply migrations on start")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *apiOnly && *dispatcherOnly {
		return usageError{"--api-only and --dispatcher-only are exclusive"}
	}
	// OpenTelemetry reports what goes wrong (a collector that cannot be
	// reached) through its one global handler, which prints with the log
	// package: set once, here, to the node's logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing failed", "err", err)
	}))
	node, err := app.New(ctx, app.Config{
		DatabaseURL:       env.databaseURL,
		DatabaseDirectURL: env.directURL,
		DatabasePooler:    env.pooler,
		RedisURL:          env.redisURL,
		RedisKeyPrefix:    env.redisPrefix,
		Addr:              env.addr,
		MetricsAddr:       env.metricsAddr,
		PprofAddr:         env.pprofAddr,
		AdminToken:        env.adminToken,
		Keyring:           env.keyring,
		SessionKey:        env.sessionKey,
		DisableAPI:        *dispatcherOnly,
		DisableDispatcher: *apiOnly,
		SkipMigrate:       *noMigrate,
		Logger:            logger,
		Dispatcher: dispatcher.Config{
			Senders: env.senders, SendersPerTenant: env.perTenant,
			MaxTimeout: env.maxTimeout, ShutdownTimeout: env.shutdown, Retention: env.retention,
			AuditRetention:    env.auditRetention,
			MetricsTopTargets: env.topTargets, IdempotencyWindow: env.idempotencyWindow,
			NodeTTL: env.nodeTTL, HeartbeatInterval: env.heartbeat, TargetDisableAfter: env.targetDisableAfter,
		},
		Limits: api.Limits{MaxBody: env.maxBody, MaxScheduleAhead: env.maxAhead, MaxTimeout: env.maxTimeout,
			ListBodyBytes: int64(env.listBodies)},
		DefaultLimits:   env.defaultLimits,
		DefaultPlan:     env.defaultPlan,
		ShutdownTimeout: env.shutdown,
		HTTP:            env.http,
		TrustedProxies:  env.proxies,
		Targets:         env.targets,
		Signup:          env.signup.mode,
		SignupLimit:     env.signup.limit,

		PublicURL:            env.portal.publicURL,
		PortalFrameAncestors: env.portal.frameAncestors,
	})
	if err != nil {
		return err
	}
	if env.adminToken == "" {
		logger.Warn("HOOKWHEEL_ADMIN_TOKEN is not set: the admin API is disabled")
	}
	return node.Run(ctx)
}

func migrate(ctx context.Context, env environment, logger *slog.Logger) error {
	db, err := openStore(ctx, env, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateStore(ctx, db)
}

// openStore opens the database for a command that runs and exits: a small
// pool, and the same pooler settings as serve.
func openStore(ctx context.Context, env environment, logger *slog.Logger) (*store.DB, error) {
	return store.Open(ctx, store.Config{
		DatabaseURL: env.databaseURL, DirectURL: env.directURL, Pooler: env.pooler, Logger: logger, MaxConns: 2,
	})
}

// migrateStore migrates, saying which setting is missing when DATABASE_URL
// goes through a transaction pooler and nothing reaches Postgres directly.
func migrateStore(ctx context.Context, db *store.DB) error {
	if errors.Is(db.CheckSession(), store.ErrNoSession) {
		return app.ErrPoolerWithoutDirectURL
	}
	return db.Migrate(ctx)
}

func createTenant(ctx context.Context, args []string, env environment, logger *slog.Logger, stdout io.Writer) error {
	fs := flag.NewFlagSet("tenant create", flag.ContinueOnError)
	name := fs.String("name", "", "the tenant's name")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if n := len([]rune(strings.TrimSpace(*name))); n < 1 || n > 200 {
		return usageError{"--name must be 1 to 200 characters"}
	}
	svc, closeDB, err := openTenants(ctx, env, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	created, err := svc.Create(ctx, *name, model.ActorCLI)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(api.TenantCreatedJSON(created))
}
