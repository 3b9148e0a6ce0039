package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig configures the Redis side of the store.
type RedisConfig struct {
	// URL is a go-redis URL, e.g. redis://localhost:6379/0. Required.
	URL string
	// KeyPrefix starts every key hookwheel writes, so several installations
	// (or test packages) can share one Redis. Default "hookwheel:".
	KeyPrefix string
}

// Redis holds the fast, expendable layer of coordination: fire-once claims
// and the rate and concurrency limiters.
// Postgres stays the arbiter; Redis spares it contention and catches what a
// lease alone cannot.
type Redis struct {
	client  *redis.Client
	prefix  string
	scripts scripts
}

// OpenRedis parses the URL and creates the client; it does not dial until used.
func OpenRedis(cfg RedisConfig) (*Redis, error) {
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis URL: %w", err)
	}
	// Fail fast: a slow Redis must not hold up a send that Postgres already protects.
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = time.Second
	opts.WriteTimeout = time.Second
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "hookwheel:"
	}
	return &Redis{
		client:  redis.NewClient(opts),
		prefix:  prefix,
		scripts: loadScripts(),
	}, nil
}

// Close closes the client's connections.
func (r *Redis) Close() error { return r.client.Close() }

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}
