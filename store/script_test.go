package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/stretchr/testify/require"
)

// TestScriptsSurviveFlush runs every pipelined script right after the server
// forgot its scripts (as after a restart or SCRIPT FLUSH): the EVALSHA
// pipeline fails with NOSCRIPT and must be sent again with the source.
func TestScriptsSurviveFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, _, raw := openRedis(t)
	task, token := uuid.Must(uuid.NewV7()), uuid.New()
	claims := []model.AttemptClaim{
		{TaskID: task, Attempt: 1, Token: token, TTL: time.Minute},
		{TaskID: task, Attempt: 2, Token: token, TTL: time.Minute},
	}

	require.NoError(t, raw.ScriptFlush(ctx).Err())
	held, err := r.ClaimAttempts(ctx, claims)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, held)

	require.NoError(t, raw.ScriptFlush(ctx).Err())
	require.NoError(t, r.ReleaseAttempts(ctx, claims))
	held, err = r.ClaimAttempts(ctx, []model.AttemptClaim{{TaskID: task, Attempt: 1, Token: uuid.New(), TTL: time.Minute}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, held, "the release ran: another token takes the claim")

	require.NoError(t, raw.ScriptFlush(ctx).Err())
	limit := model.DispatchLimit{TenantID: uuid.New(), Host: "flush.example", Rate: 10}
	admissions, err := r.AdmitDispatches(ctx, []model.DispatchRequest{
		{Limit: limit, TaskID: uuid.New(), Token: uuid.New(), At: time.Now()},
	})
	require.NoError(t, err)
	require.Len(t, admissions, 1)
	require.Equal(t, model.DispatchNow, admissions[0].Outcome)
}
