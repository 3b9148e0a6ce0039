package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/claim_attempt.lua
	claimAttemptLua string
	//go:embed lua/release_attempt.lua
	releaseAttemptLua string
)

// RedisConfig configures the Redis side of the store.
type RedisConfig struct {
	// URL is a go-redis URL, e.g. redis://localhost:6379/0. Required.
	URL string
	// KeyPrefix starts every key hookwheel writes, so several installations
	// (or test packages) can share one Redis. Default "hookwheel:".
	KeyPrefix string
}

// Redis holds the fast, expendable layer of coordination: fire-once claims.
// Postgres stays the arbiter; Redis spares it contention and catches what a
// lease alone cannot.
type Redis struct {
	client         *redis.Client
	prefix         string
	claimAttempt   *redis.Script
	releaseAttempt *redis.Script
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
		client:         redis.NewClient(opts),
		prefix:         prefix,
		claimAttempt:   redis.NewScript(claimAttemptLua),
		releaseAttempt: redis.NewScript(releaseAttemptLua),
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

func (r *Redis) attemptKey(taskID uuid.UUID, attempt int) string {
	return r.prefix + "{" + taskID.String() + "}:attempt:" + strconv.Itoa(attempt)
}

// ClaimAttempt takes the fire-once claim of one attempt for token, for ttl.
// It reports false when another token holds it.
func (r *Redis) ClaimAttempt(ctx context.Context, taskID uuid.UUID, attempt int, token uuid.UUID, ttl time.Duration) (bool, error) {
	n, err := r.claimAttempt.Run(ctx, r.client, []string{r.attemptKey(taskID, attempt)}, token.String(), ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("claim attempt %d of task %s: %w", attempt, taskID, err)
	}
	return n == 1, nil
}

// ReleaseAttempt gives back a claim the caller holds; another's is left alone.
func (r *Redis) ReleaseAttempt(ctx context.Context, taskID uuid.UUID, attempt int, token uuid.UUID) error {
	err := r.releaseAttempt.Run(ctx, r.client, []string{r.attemptKey(taskID, attempt)}, token.String()).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("release attempt %d of task %s: %w", attempt, taskID, err)
	}
	return nil
}
