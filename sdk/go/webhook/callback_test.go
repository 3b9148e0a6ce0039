package webhook_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

func TestDecodeCallback(t *testing.T) {
	t.Parallel()
	delivered, err := webhook.DecodeCallback([]byte(`{"task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
		"status": "delivered", "attempt": 2, "error": null, "added_later": 1,
		"response": {"status_code": 200, "headers": {"Content-Type": "text/plain"}, "body": "/wBvaw==", "body_truncated": true}}`))
	require.NoError(t, err)
	require.Equal(t, "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41", delivered.TaskID.String())
	require.Equal(t, webhook.CallbackDelivered, delivered.Status)
	require.Equal(t, 2, delivered.Attempt)
	require.Nil(t, delivered.Error)
	require.Equal(t, 200, *delivered.Response.StatusCode)
	require.Equal(t, []byte{0xff, 0, 'o', 'k'}, delivered.Response.Body, "base64 decoded, byte for byte")
	require.True(t, delivered.Response.BodyTruncated)
	require.Equal(t, map[string]string{"Content-Type": "text/plain"}, delivered.Response.Headers)

	dead, err := webhook.DecodeCallback([]byte(`{"task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
		"status": "dead", "attempt": 10, "error": "no response within the 30s timeout",
		"response": {"status_code": null, "headers": {}, "body": "", "body_truncated": false}}`))
	require.NoError(t, err)
	require.Equal(t, webhook.CallbackDead, dead.Status)
	require.Nil(t, dead.Response.StatusCode)
	require.Equal(t, "no response within the 30s timeout", *dead.Error)
	require.Empty(t, dead.Response.Body)

	for name, body := range map[string]string{
		"not JSON":       `callback`,
		"another status": `{"task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41", "status": "retrying", "attempt": 1}`,
		"no attempt":     `{"task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41", "status": "dead"}`,
		"bad body":       `{"task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41", "status": "dead", "attempt": 1, "response": {"body": "%%"}}`,
	} {
		_, err := webhook.DecodeCallback([]byte(body))
		require.Error(t, err, name)
	}
}
