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

// AttemptClaim names one attempt to claim.
type AttemptClaim struct {
	TaskID  uuid.UUID
	Attempt int
	Token   uuid.UUID
	TTL     time.Duration
}

// ClaimAttempt takes the fire-once claim of one attempt for token, for ttl.
// It reports false when another token holds it.
func (r *Redis) ClaimAttempt(ctx context.Context, taskID uuid.UUID, attempt int, token uuid.UUID, ttl time.Duration) (bool, error) {
	held, err := r.ClaimAttempts(ctx, []AttemptClaim{{TaskID: taskID, Attempt: attempt, Token: token, TTL: ttl}})
	if err != nil {
		return false, err
	}
	return held[0], nil
}

// ClaimAttempts takes several fire-once claims in one round trip (a
// pipeline of the claim script) and reports, in order, which the caller holds.
func (r *Redis) ClaimAttempts(ctx context.Context, claims []AttemptClaim) ([]bool, error) {
	run := func(eval func(redis.Pipeliner, AttemptClaim) *redis.Cmd) ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, len(claims))
		_, err := r.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i, c := range claims {
				cmds[i] = eval(pipe, c)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := run(func(pipe redis.Pipeliner, c AttemptClaim) *redis.Cmd {
		return r.claimAttempt.EvalSha(ctx, pipe, []string{r.attemptKey(c.TaskID, c.Attempt)}, c.Token.String(), c.TTL.Milliseconds())
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// First use on this server (or after a restart or SCRIPT FLUSH):
		// send the script itself, which also caches it.
		cmds, err = run(func(pipe redis.Pipeliner, c AttemptClaim) *redis.Cmd {
			return r.claimAttempt.Eval(ctx, pipe, []string{r.attemptKey(c.TaskID, c.Attempt)}, c.Token.String(), c.TTL.Milliseconds())
		})
	}
	if err != nil {
		return nil, fmt.Errorf("claim %d attempts: %w", len(claims), err)
	}
	held := make([]bool, len(claims))
	for i, cmd := range cmds {
		n, err := cmd.Int()
		if err != nil {
			return nil, fmt.Errorf("claim attempt %d of task %s: %w", claims[i].Attempt, claims[i].TaskID, err)
		}
		held[i] = n == 1
	}
	return held, nil
}

// ReleaseAttempt gives back a claim the caller holds; another's is left alone.
func (r *Redis) ReleaseAttempt(ctx context.Context, taskID uuid.UUID, attempt int, token uuid.UUID) error {
	return r.ReleaseAttempts(ctx, []AttemptClaim{{TaskID: taskID, Attempt: attempt, Token: token}})
}

// ReleaseAttempts gives back, in one round trip, the claims the caller holds
// among these; others' are left alone.
func (r *Redis) ReleaseAttempts(ctx context.Context, claims []AttemptClaim) error {
	_, err := r.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, c := range claims {
			// Eval, not EvalSha: releases are rare (shutdown, deferral),
			// and a pipeline cannot fall back on NOSCRIPT.
			r.releaseAttempt.Eval(ctx, pipe, []string{r.attemptKey(c.TaskID, c.Attempt)}, c.Token.String())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("release %d attempt claims: %w", len(claims), err)
	}
	return nil
}
