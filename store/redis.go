package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig configures the Redis side of the store.
type RedisConfig struct {
	// URL locates Redis; its form picks the deployment (see NewRedisClient):
	// redis://localhost:6379/0 is one server. Required.
	URL string
	// KeyPrefix starts every key hookwheel writes, so several installations
	// (or test packages) can share one Redis. Default "hookwheel:". It may not
	// contain '{' or '}' (see CheckRedisKeyPrefix).
	KeyPrefix string
}

// RedisMode is the kind of Redis deployment a URL names.
type RedisMode string

const (
	// RedisSingle is one server (which may have replicas nobody fails over to).
	RedisSingle RedisMode = "single"
	// RedisCluster is a Redis Cluster: keys spread over several masters by
	// hash slot, each master with its replicas.
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is a master with replicas, watched by Sentinels that
	// promote a replica when the master fails; the client asks them where
	// the master is.
	RedisSentinel RedisMode = "sentinel"
)

// Fail fast: a slow Redis must not hold up a send that Postgres already
// protects. The same bounds hold whatever the deployment, unless the URL sets
// its own (see failFast).
const (
	redisDialTimeout = 2 * time.Second
	redisReadTimeout = time.Second
	// clusterStateReloadInterval bounds how long the client of a Redis
	// Cluster goes on sending to a master that was replaced: one CLUSTER
	// SLOTS a second, asked only while commands are sent.
	clusterStateReloadInterval = time.Second
)

// NewRedisClient makes the go-redis client for a URL, picking the deployment
// by its form, each parsed by go-redis's own parser (which rejects options it
// does not know):
//
//   - redis://[user:pass@]host:port/db (or rediss://, unix://): one server
//     (redis.ParseURL).
//   - redis://[user:pass@]host1:port1?addr=host2:port2&addr=host3:port3: a
//     Redis Cluster, the addresses its seed nodes (redis.ParseClusterURL); the
//     database, if given, must be 0, the only one a cluster has.
//   - redis://[user:pass@]sentinel1:26379/db?master_name=NAME&addr=sentinel2:26379:
//     Sentinel (redis.ParseFailoverURL); the host and each addr are Sentinels,
//     the user and password those of the Sentinels, and the master's own
//     credentials go in the username= and password= options.
//
// master_name decides over addr, since a Sentinel URL lists several addresses
// too. A cluster known by one address (a managed service's configuration
// endpoint) names it twice, as host and as addr: redis://cfg:6379?addr=cfg:6379.
// The dial_timeout, read_timeout and write_timeout options are kept when the
// URL sets them; failFast fills in the rest. It does not dial; the first
// command does.
func NewRedisClient(rawURL string) (redis.UniversalClient, RedisMode, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the URL, password included.
		return nil, "", errors.New("parse redis URL: not a URL")
	}
	q := u.Query()
	switch {
	case q.Has("master_name"):
		if q.Get("master_name") == "" {
			return nil, "", errors.New("parse redis Sentinel URL: master_name is empty: it names the master the Sentinels watch")
		}
		opts, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, "", fmt.Errorf("parse redis Sentinel URL: %w", err)
		}
		if err := failFast(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout); err != nil {
			return nil, "", fmt.Errorf("parse redis Sentinel URL: %w", err)
		}
		return redis.NewFailoverClient(opts), RedisSentinel, nil
	case q.Has("addr"):
		if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
			return nil, "", fmt.Errorf("parse redis Cluster URL: database %q: a Redis Cluster has database 0 only", db)
		}
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, "", fmt.Errorf("parse redis Cluster URL: %w", err)
		}
		if err := failFast(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout); err != nil {
			return nil, "", fmt.Errorf("parse redis Cluster URL: %w", err)
		}
		// go-redis learns of a failover from a MOVED answer or from this
		// reload; a dead master answers nothing, and the pipelines the store
		// sends do not reload on a connection error, so without it they would
		// go to the dead master for up to a minute (the default).
		opts.ClusterStateReloadInterval = clusterStateReloadInterval
		return redis.NewClusterClient(opts), RedisCluster, nil
	default:
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, "", fmt.Errorf("parse redis URL: %w", err)
		}
		if err := failFast(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout); err != nil {
			return nil, "", fmt.Errorf("parse redis URL: %w", err)
		}
		return redis.NewClient(opts), RedisSingle, nil
	}
}

// failFast gives the timeouts the URL left unset the fail-fast bounds. One the
// URL sets is the operator's choice for their network (a Redis across a slow
// link, a TLS handshake to a managed service) and is kept: go-redis's parsers
// leave an option the URL does not set at zero, and turn one it sets to 0 or
// less into -1, so zero means unset. -1 turns a read or write timeout off,
// but go-redis hands a dial timeout of -1 to net.Dialer, whose every dial
// would then fail at once: that one is refused. An unset write timeout
// follows the read timeout, as go-redis's own default does.
func failFast(dial, read, write *time.Duration) error {
	switch {
	case *dial < 0:
		return errors.New("dial_timeout must be positive: 0 or less would fail every dial at once")
	case *dial == 0:
		*dial = redisDialTimeout
	}
	if *read == 0 {
		*read = redisReadTimeout
	}
	if *write == 0 {
		*write = *read
	}
	return nil
}

// CheckRedisKeyPrefix refuses a key prefix with '{' or '}'. Every key
// hookwheel writes is <prefix>{<tag>}:..., and a Redis Cluster hashes only
// the text between the first '{' and the next '}': a brace in the prefix
// would make it hash something else, and the keys one script touches could
// land on different slots, which a cluster refuses (CROSSSLOT).
func CheckRedisKeyPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("redis key prefix %q: '{' and '}' are not allowed: they would break the hash tags that keep each script's keys on one Redis Cluster slot", prefix)
	}
	return nil
}

// Redis holds the fast, expendable layer of coordination: fire-once claims
// and the rate and concurrency limiters.
// Postgres stays the arbiter; Redis spares it contention and catches what a
// lease alone cannot.
type Redis struct {
	client  redis.UniversalClient
	mode    RedisMode
	prefix  string
	scripts scripts
}

// OpenRedis parses the URL and creates the client; it does not dial until used.
func OpenRedis(cfg RedisConfig) (*Redis, error) {
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "hookwheel:"
	}
	if err := CheckRedisKeyPrefix(prefix); err != nil {
		return nil, err
	}
	client, mode, err := NewRedisClient(cfg.URL)
	if err != nil {
		return nil, err
	}
	return &Redis{
		client:  client,
		mode:    mode,
		prefix:  prefix,
		scripts: loadScripts(),
	}, nil
}

// Mode is the kind of deployment the URL named, for logs.
func (r *Redis) Mode() RedisMode { return r.mode }

// Close closes the client's connections.
func (r *Redis) Close() error { return r.client.Close() }

// Ping checks that Redis answers: on a Redis Cluster, every master.
func (r *Redis) Ping(ctx context.Context) error {
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		// The cluster client sends PING to any one node, so with a master
		// down the answer would depend on which was picked. Every master
		// holds some of the keys, so each must answer.
		err := cc.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
			if err := master.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("master %s: %w", master.Options().Addr, err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("ping redis cluster: %w", err)
		}
		return nil
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}
