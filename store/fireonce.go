package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/redis/go-redis/v9"
)

func (r *Redis) attemptKey(taskID uuid.UUID, attempt int) string {
	return r.prefix + "{" + taskID.String() + "}:attempt:" + strconv.Itoa(attempt)
}

// ClaimAttempt takes the fire-once claim of one attempt for token, for ttl.
// It reports false when another token holds it.
func (r *Redis) ClaimAttempt(ctx context.Context, taskID uuid.UUID, attempt int, token uuid.UUID, ttl time.Duration) (bool, error) {
	held, err := r.ClaimAttempts(ctx, []model.AttemptClaim{{TaskID: taskID, Attempt: attempt, Token: token, TTL: ttl}})
	if err != nil {
		return false, err
	}
	return held[0], nil
}

// ClaimAttempts takes several fire-once claims in one round trip (a
// pipeline of the claim script) and reports, in order, which the caller holds.
func (r *Redis) ClaimAttempts(ctx context.Context, claims []model.AttemptClaim) ([]bool, error) {
	cmds, err := r.scripts.claimAttempt.runEach(ctx, r.client, len(claims), func(i int) ([]string, []any) {
		c := claims[i]
		return []string{r.attemptKey(c.TaskID, c.Attempt)}, []any{c.Token.String(), c.TTL.Milliseconds()}
	})
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
	return r.ReleaseAttempts(ctx, []model.AttemptClaim{{TaskID: taskID, Attempt: attempt, Token: token}})
}

// ReleaseAttempts gives back, in one round trip, the claims the caller holds
// among these; others' are left alone.
func (r *Redis) ReleaseAttempts(ctx context.Context, claims []model.AttemptClaim) error {
	_, err := r.scripts.releaseAttempt.runEach(ctx, r.client, len(claims), func(i int) ([]string, []any) {
		c := claims[i]
		return []string{r.attemptKey(c.TaskID, c.Attempt)}, []any{c.Token.String()}
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("release %d attempt claims: %w", len(claims), err)
	}
	return nil
}
