package hookwheel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// TestExpiryReachesTheAPI: ExpiresAt and ExpiresIn go out as the API spells
// them, in a create and in a batch line, and the task's expiry and the
// expired status come back.
func TestExpiryReachesTheAPI(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	expires := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		task := taskJSON(id, "https://example.com/")
		task["expires_at"] = expires
		task["status"] = "expired"
		writeJSON(w, http.StatusCreated, task)
	})
	c := f.client(t)

	task, err := c.CreateTask(context.Background(), hookwheel.TaskRequest{URL: "https://example.com/", ExpiresAt: expires})
	require.NoError(t, err)
	require.True(t, expires.Equal(*task.ExpiresAt))
	require.Equal(t, hookwheel.StatusExpired, task.Status)
	_, err = c.CreateTask(context.Background(), hookwheel.TaskRequest{URL: "https://example.com/", ExpiresIn: 10 * time.Minute})
	require.NoError(t, err)
	got := f.got()
	require.Len(t, got, 2)
	require.JSONEq(t, `{"url": "https://example.com/", "expires_at": "2026-11-28T15:00:00Z"}`, string(got[0].body))
	require.JSONEq(t, `{"url": "https://example.com/", "expires_in": "10m0s"}`, string(got[1].body))

	// A batch line spells them as the API does.
	var req hookwheel.TaskRequest
	require.NoError(t, json.Unmarshal([]byte(`{"url": "https://example.com/", "expires_in": "10m"}`), &req))
	require.Equal(t, hookwheel.TaskRequest{URL: "https://example.com/", ExpiresIn: 10 * time.Minute}, req)
	require.NoError(t, json.Unmarshal([]byte(`{"url": "https://example.com/", "expires_at": "2026-11-28T15:00:00Z"}`), &req))
	require.True(t, expires.Equal(req.ExpiresAt))
	require.Error(t, json.Unmarshal([]byte(`{"url": "https://example.com/", "expires_in": "soon"}`), &req))
}

// TestDecodeExpiredCallback: a failure callback reporting an expiry is
// decoded, attempt 0 included when no attempt was made; attempt 0 of any
// other status is refused.
func TestDecodeExpiredCallback(t *testing.T) {
	t.Parallel()
	body := func(status string) []byte {
		return []byte(`{"task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41", "status": "` + status + `", "attempt": 0,
			"error": "expired", "response": {"status_code": null, "headers": {}, "body": "", "body_truncated": false}}`)
	}
	cb, err := webhook.DecodeCallback(body("expired"))
	require.NoError(t, err)
	require.Equal(t, webhook.CallbackExpired, cb.Status)
	require.Zero(t, cb.Attempt)
	_, err = webhook.DecodeCallback(body("dead"))
	require.Error(t, err)
}
