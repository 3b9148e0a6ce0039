package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/redis/go-redis/v9"
)

// The answer journal. A receiver's 2xx reaches the sender some milliseconds
// before the recorder commits the attempt to Postgres; a node that freezes
// or dies in between leaves a claim that looks unsent, and the node that
// recovers it sends the webhook a second time. So the sender writes each
// delivery's answer to Redis the moment it has it (MarkAnswered, the
// answers of many senders in one round trip), and the recovery reads the
// answers of the claims it is about to hand back (AnsweredAttempts): those
// it finds are recorded delivered instead of being sent again. A mark is never read again once its claim is recorded
// or recovered, so none is deleted: each expires after its TTL, which
// bounds the journal at deliveries per second times the TTL (about 150
// bytes each).
//
// Each answer is a key of its own, apart from the attempt's fire-once key:
// a mark written late, by a sender whose claim was meanwhile recovered and
// claimed again, must not touch the new claim's key. The mark carries its
// claim's token, and only a stale claim with that same token reads it.

func (r *Redis) answerKey(taskID uuid.UUID, attempt int) string {
	return r.prefix + "{" + taskID.String() + "}:answered:" + strconv.Itoa(attempt)
}

// encodeAnswer writes the mark's value: "<token> <status> <started, unix µs>
// <duration, µs> <bytes sent> <bytes received>". A mark of the version
// before has the first four fields alone, and decodes with no bytes.
func encodeAnswer(a model.AnsweredAttempt) string {
	return fmt.Sprintf("%s %d %d %d %d %d", a.Token, a.StatusCode, a.StartedAt.UnixMicro(), a.Duration.Microseconds(),
		a.BytesSent, a.BytesReceived)
}

func decodeAnswer(taskID uuid.UUID, attempt int, v string) (model.AnsweredAttempt, error) {
	fields := strings.Fields(v)
	if len(fields) != 4 && len(fields) != 6 {
		return model.AnsweredAttempt{}, fmt.Errorf("want 4 or 6 fields, got %q", v)
	}
	token, err := uuid.Parse(fields[0])
	if err != nil {
		return model.AnsweredAttempt{}, fmt.Errorf("token: %w", err)
	}
	var n [5]int64
	for i, f := range fields[1:] {
		if n[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return model.AnsweredAttempt{}, fmt.Errorf("field %d of %q: %w", i+2, v, err)
		}
	}
	return model.AnsweredAttempt{TaskID: taskID, Attempt: attempt, Token: token, StatusCode: int(n[0]),
		StartedAt: time.UnixMicro(n[1]).UTC(), Duration: time.Duration(n[2]) * time.Microsecond,
		BytesSent: n[3], BytesReceived: n[4]}, nil
}

// MarkAnswered writes deliveries' answers to the journal for ttl, in one
// round trip.
func (r *Redis) MarkAnswered(ctx context.Context, answers []model.AnsweredAttempt, ttl time.Duration) error {
	_, err := r.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, a := range answers {
			pipe.Set(ctx, r.answerKey(a.TaskID, a.Attempt), encodeAnswer(a), ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark %d attempts answered: %w", len(answers), err)
	}
	return nil
}

// AnsweredAttempts returns, in one round trip, the answers the journal
// holds for these claims: one for each claim whose receiver acknowledged
// the attempt sent under that claim's token, in the claims' order.
func (r *Redis) AnsweredAttempts(ctx context.Context, claims []model.AttemptClaim) ([]model.AnsweredAttempt, error) {
	cmds := make([]*redis.StringCmd, len(claims))
	_, err := r.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range claims {
			cmds[i] = pipe.Get(ctx, r.answerKey(c.TaskID, c.Attempt))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the answers of %d claims: %w", len(claims), err)
	}
	var answered []model.AnsweredAttempt
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		c := claims[i]
		if err != nil {
			return nil, fmt.Errorf("read the answer of attempt %d of task %s: %w", c.Attempt, c.TaskID, err)
		}
		a, err := decodeAnswer(c.TaskID, c.Attempt, v)
		if err != nil {
			return nil, fmt.Errorf("read the answer of attempt %d of task %s: %w", c.Attempt, c.TaskID, err)
		}
		if a.Token == c.Token {
			answered = append(answered, a)
		}
	}
	return answered, nil
}
