package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/stretchr/testify/require"
)

// TestAnswerJournal: an answer marked under a claim's token is read back
// for that claim only: not for the same attempt claimed again under another
// token, not for another attempt, and not once its TTL has run out; and it
// leaves the attempt's fire-once key alone.
func TestAnswerJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, prefix, raw := openRedis(t)
	task, other := uuid.New(), uuid.New()
	token, reclaimed := uuid.New(), uuid.New()
	started := time.Date(2026, 11, 28, 9, 0, 0, 123456000, time.UTC)
	answer := model.AnsweredAttempt{TaskID: task, Attempt: 2, Token: token, StatusCode: 204,
		StartedAt: started, Duration: 1234567 * time.Microsecond}

	held, err := r.ClaimAttempt(ctx, task, 2, token, time.Minute)
	require.NoError(t, err)
	require.True(t, held)
	// Marked together with another task's answer, as the journal writes
	// the answers of many senders.
	neighbour := model.AnsweredAttempt{TaskID: uuid.New(), Attempt: 1, Token: uuid.New(), StatusCode: 200,
		StartedAt: started, Duration: time.Millisecond, BytesSent: 10, BytesReceived: 2}
	require.NoError(t, r.MarkAnswered(ctx, []model.AnsweredAttempt{answer, neighbour}, time.Minute))

	got, err := r.AnsweredAttempts(ctx, []model.AttemptClaim{
		{TaskID: task, Attempt: 1, Token: token},     // another attempt
		{TaskID: task, Attempt: 2, Token: reclaimed}, // claimed again since
		{TaskID: uuid.New(), Attempt: 1, Token: token},
		{TaskID: task, Attempt: 2, Token: token},
		{TaskID: neighbour.TaskID, Attempt: 1, Token: neighbour.Token},
	})
	require.NoError(t, err)
	require.Equal(t, []model.AnsweredAttempt{answer, neighbour}, got)

	held, err = r.ClaimAttempt(ctx, task, 2, reclaimed, time.Minute)
	require.NoError(t, err)
	require.False(t, held, "the mark leaves the fire-once claim as it was")
	require.Len(t, keysUnder(t, raw, prefix), 3, "the fire-once key and the two marks")

	// A mark lives for the TTL it is given. Made only now: a loaded machine
	// may take longer than its 50 ms between any two of the calls above.
	require.NoError(t, r.MarkAnswered(ctx, []model.AnsweredAttempt{{TaskID: other, Attempt: 1, Token: token,
		StatusCode: 200, StartedAt: started}}, 50*time.Millisecond))

	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err = r.AnsweredAttempts(ctx, []model.AttemptClaim{{TaskID: other, Attempt: 1, Token: token}})
		require.NoError(t, err)
		if len(got) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the mark outlived its TTL")
		time.Sleep(10 * time.Millisecond) // polling until a deadline, not waiting a fixed time
	}

	got, err = r.AnsweredAttempts(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}
