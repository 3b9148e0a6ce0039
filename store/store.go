// Package store is hookwheel's persistence: the Postgres schema and every SQL
// query (Postgres is the source of truth: a committed task row is the queue),
// and the Redis client with its Lua scripts. It knows nothing of HTTP.
package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Config configures the Postgres connection pool.
type Config struct {
	// DatabaseURL is a pgx connection string. Required. It may go through a
	// connection pooler in transaction mode (PgBouncer): see Pooler.
	DatabaseURL string
	// DirectURL is a connection string that gives sessions of their own:
	// Postgres itself, or a pooler in session mode. LISTEN and migrations
	// (whose lock is a session advisory lock) go through it, since a
	// transaction pooler hands a client's next statement to whichever server
	// connection is free. Default: DatabaseURL, unless that goes through a
	// transaction pooler, and then nothing (see ErrNoSession).
	DirectURL string
	// Pooler says what DatabaseURL reaches. Default PoolerAuto.
	Pooler Pooler
	// MaxConns caps the pool. Default: pool_max_conns in DatabaseURL when it
	// names one, else 32 (senders, the loader and API handlers share it).
	MaxConns int32
	// Logger receives migration progress. Default slog.Default().
	Logger *slog.Logger
}

// Pooler is what stands between hookwheel and Postgres on Config.DatabaseURL.
type Pooler string

const (
	// PoolerAuto detects a pooler at Open: a pooler that shares server
	// connections must give its clients a cancel key of its own, so a
	// connection whose backend key names another process than
	// pg_backend_pid() goes through one. It cannot tell session pooling
	// from transaction pooling, and assumes the latter.
	PoolerAuto Pooler = "auto"
	// PoolerNone: DatabaseURL gives sessions (Postgres itself, or a pooler
	// in session mode). Nothing is detected.
	PoolerNone Pooler = "none"
	// PoolerTransaction: DatabaseURL goes through a pooler in transaction
	// mode (PgBouncer, PgCat, Supavisor, RDS Proxy and the like).
	PoolerTransaction Pooler = "transaction"
)

// ParsePooler reads a Pooler by name: auto (or empty), none, or transaction
// (also spelt pgbouncer, the common case).
func ParsePooler(name string) (Pooler, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "auto":
		return PoolerAuto, nil
	case "none":
		return PoolerNone, nil
	case "transaction", "pgbouncer":
		return PoolerTransaction, nil
	}
	return "", fmt.Errorf("unknown pooler %q: want auto, none or transaction (pgbouncer)", name)
}

// ErrNoSession is the error of what needs a session of its own (LISTEN,
// migrations) on a DB whose DatabaseURL goes through a transaction pooler and
// which has no DirectURL. Through such a pooler LISTEN is accepted but its
// notifications never arrive, and a migration's lock could be taken on one
// server connection and released on another.
var ErrNoSession = errors.New("the database URL goes through a transaction pooler and no direct URL was given: " +
	"LISTEN and migrations need a session of their own")

// DB is the Postgres side of the store.
type DB struct {
	pool *pgxpool.Pool
	// session gives connections of their own, for LISTEN and migrations:
	// pool itself when DatabaseURL is direct and no DirectURL was given;
	// nil when neither gives sessions.
	session *pgxpool.Pool
	// membership is the heartbeat's connection, a pool of one: the
	// heartbeat renews this node's leases and must not queue behind the
	// claims and outcomes that fill the main pool under load, or the node
	// loses its partitions because it is busy.
	membership *pgxpool.Pool
	// pooled: DatabaseURL goes through a transaction pooler.
	pooled bool
	logger *slog.Logger
	url    string
}

// Open connects to Postgres. It does not migrate; call Migrate.
//
// Behind a transaction pooler (Config.Pooler, or detected) the pool runs its
// statements in pgx's cache_describe mode unless DatabaseURL names a
// default_query_exec_mode: pgx's default keeps named prepared statements on
// the server connection that prepared them, which a transaction pooler
// before PgBouncer 1.21 does not carry across server connections ("prepared
// statement does not exist"). cache_describe sends each statement unnamed,
// in binary format as before, and asks for its description only on first
// use, so it costs no round trip more than named statements; the server
// parses and plans each execution instead of reusing a plan.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("open postgres: empty database URL")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	switch {
	case cfg.MaxConns > 0:
		pcfg.MaxConns = cfg.MaxConns
	case strings.Contains(cfg.DatabaseURL, "pool_max_conns"):
		// The operator sized the pool in the URL (pgxpool read it): many
		// nodes against one Postgres may each need fewer than the default.
	default:
		pcfg.MaxConns = 32
	}
	pcfg.AfterConnect = registerTypes

	switch pcfg.ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		// Both infer parameter types from Go types, which fails on the
		// store's own (signing secrets, limits, arrays of them) at the first
		// statement that passes one: refused here, at start.
		return nil, fmt.Errorf("open postgres: default_query_exec_mode=%s cannot encode hookwheel's parameters: "+
			"use cache_describe (the default behind a transaction pooler), describe_exec or cache_statement",
			strings.ReplaceAll(pcfg.ConnConfig.DefaultQueryExecMode.String(), " ", "_"))
	}

	pooled := cfg.Pooler == PoolerTransaction
	switch cfg.Pooler {
	case "", PoolerAuto:
		if pooled, err = behindPooler(ctx, pcfg.ConnConfig); err != nil {
			return nil, fmt.Errorf("probe database URL: %w", err)
		}
		if pooled {
			logger.Info("the database URL goes through a connection pooler; running as behind one in transaction mode")
		}
	case PoolerNone, PoolerTransaction:
	default:
		return nil, fmt.Errorf("open postgres: unknown pooler %q", cfg.Pooler)
	}
	if pooled {
		if mode, ok := namedExecMode(cfg.DatabaseURL); !ok {
			pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		} else if mode == pgx.QueryExecModeCacheStatement.String() {
			logger.Warn("the database URL asks for named prepared statements through a transaction pooler: " +
				"this needs PgBouncer 1.21 or later with max_prepared_statements set")
		}
	}

	db := &DB{logger: logger, url: cfg.DatabaseURL, pooled: pooled}
	if cfg.DirectURL != "" {
		scfg, err := pgxpool.ParseConfig(cfg.DirectURL)
		if err != nil {
			return nil, fmt.Errorf("parse direct database URL: %w", err)
		}
		// One connection listens, and migrations hold two (the lock's and
		// the work's); nothing else goes this way.
		scfg.MaxConns = 4
		scfg.AfterConnect = registerTypes
		if cfg.Pooler == "" || cfg.Pooler == PoolerAuto {
			proxied, err := behindPooler(ctx, scfg.ConnConfig)
			if err != nil {
				return nil, fmt.Errorf("probe direct database URL: %w", err)
			}
			if proxied {
				logger.Warn("the direct database URL goes through a connection pooler too: " +
					"LISTEN and migrations work only if it pools sessions, not transactions")
			}
		}
		if db.session, err = pgxpool.NewWithConfig(ctx, scfg); err != nil {
			return nil, fmt.Errorf("open direct postgres pool: %w", err)
		}
	}
	mcfg := pcfg.Copy()
	mcfg.MaxConns, mcfg.MinConns = 1, 0
	if db.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	// Connects at the first heartbeat: a node that runs no dispatcher
	// never opens it.
	if db.membership, err = pgxpool.NewWithConfig(ctx, mcfg); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres heartbeat connection: %w", err)
	}
	if db.session == nil && !pooled {
		db.session = db.pool
	}
	return db, nil
}

// registerTypes prepares each new connection. pgx knows google/uuid only as
// a driver.Valuer and sql.Scanner, through text and reflection: arrays of ids
// (a claim, a batch of outcomes) cost 12 % of the dispatcher's CPU in
// encoding alone. Registered, they travel as 16 binary bytes.
func registerTypes(_ context.Context, conn *pgx.Conn) error {
	pgxuuid.Register(conn.TypeMap())
	return nil
}

// behindPooler reports whether connections made with cfg go through a
// pooler. A pooler that shares server connections between clients must make
// up the cancel key it gives each client (a cancel request names a client,
// not a server connection), so the process id of its BackendKeyData differs
// from the backend's; straight to Postgres they are the same. It costs one
// connection and one round trip.
func behindPooler(ctx context.Context, cfg *pgx.ConnConfig) (bool, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid uint32
	// The simple protocol: no prepared statement, whatever the pooler.
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()::int8", pgx.QueryExecModeSimpleProtocol).Scan(&pid); err != nil {
		return false, fmt.Errorf("read the backend's process id: %w", err)
	}
	return pid != conn.PgConn().PID(), nil
}

// namedExecMode is the default_query_exec_mode a connection string names,
// if it names one (pgx reads it from URL and key=value strings alike).
func namedExecMode(connString string) (string, bool) {
	if !strings.Contains(connString, "default_query_exec_mode") {
		return "", false
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return "", false
	}
	return cfg.DefaultQueryExecMode.String(), true
}

// MaxConns is the most connections the pool opens (Config.MaxConns).
func (db *DB) MaxConns() int32 { return db.pool.Config().MaxConns }

// Pooled reports whether the database URL goes through a transaction pooler
// (declared, or detected at Open).
func (db *DB) Pooled() bool { return db.pooled }

// CheckSession returns ErrNoSession when nothing gives this DB a session of
// its own, which LISTEN (Listen) and Migrate need; a node that dispatches
// or migrates checks it at start rather than fail later.
func (db *DB) CheckSession() error {
	if db.session == nil {
		return ErrNoSession
	}
	return nil
}

// Close releases every connection.
func (db *DB) Close() {
	if db.session != nil && db.session != db.pool {
		db.session.Close()
	}
	if db.pool != nil {
		db.pool.Close()
	}
	if db.membership != nil {
		db.membership.Close()
	}
}

// Ping checks that Postgres answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// SchemaVersion names the schema Migrate builds: a hash of the embedded
// migrations, which changes whenever one is added or edited. Test harnesses
// key the migrated template databases they copy by it.
func SchemaVersion() string {
	h := sha256.New()
	_ = fs.WalkDir(migrationFiles, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := migrationFiles.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Migrate applies the embedded migrations. Concurrent callers (several nodes
// starting at once) are serialised by a Postgres session advisory lock, so
// they go through the DB's sessions (Config.DirectURL), never a transaction
// pooler: ErrNoSession when it has none.
func (db *DB) Migrate(ctx context.Context) error {
	if err := db.CheckSession(); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("open embedded migrations: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(db.session)
	defer sqlDB.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 120))
	if err != nil {
		return fmt.Errorf("create migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName("hookwheel_schema_migrations"),
	)
	if err != nil {
		return fmt.Errorf("create migration provider: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		db.logger.Info("applied migration", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}
