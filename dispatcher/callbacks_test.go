package dispatcher

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// sentCallback is a callback task's body as receivers read it: the names
// the API documents (CallbackPayload), not the sender's own type.
type sentCallback struct {
	TaskID   string  `json:"task_id"`
	Status   string  `json:"status"`
	Attempt  int     `json:"attempt"`
	Error    *string `json:"error"`
	Response struct {
		StatusCode    *int              `json:"status_code"`
		Headers       map[string]string `json:"headers"`
		Body          []byte            `json:"body"` // base64 in the JSON
		BodyTruncated bool              `json:"body_truncated"`
	} `json:"response"`
}

// TestSenderMakesCallbacks: the attempt that delivers a task with a
// callback, or kills one with a failure_callback, carries the callback task
// to record (and arms it once written); any other outcome, or a task
// without the URL for its outcome, carries none.
func TestSenderMakesCallbacks(t *testing.T) {
	t.Parallel()
	const (
		done   = "https://receiver.example/done"
		failed = "https://receiver.example/failed"
	)
	cases := []struct {
		name              string
		status            int
		lastAttempt       bool
		callback, failure *string
		wantURL           string // "" for no callback
		wantStatus        model.TaskStatus
		wantErr           *string
	}{
		{name: "delivered", status: http.StatusOK, callback: ptr(done), failure: ptr(failed), wantURL: done,
			wantStatus: model.StatusDelivered},
		{name: "refused", status: http.StatusBadRequest, callback: ptr(done), failure: ptr(failed), wantURL: failed,
			wantStatus: model.StatusDead, wantErr: ptr("receiver answered 400 Bad Request")},
		{name: "retryable, no attempt left", status: http.StatusServiceUnavailable, lastAttempt: true, failure: ptr(failed),
			wantURL: failed, wantStatus: model.StatusDead, wantErr: ptr("receiver answered 503 Service Unavailable")},
		{name: "retrying", status: http.StatusServiceUnavailable, callback: ptr(done), failure: ptr(failed)},
		{name: "delivered, only a failure callback", status: http.StatusOK, failure: ptr(failed)},
		{name: "dead, only a callback", status: http.StatusBadRequest, callback: ptr(done)},
		{name: "no callbacks", status: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSender(t, senderOptions{})
			b.status.Store(int32(tc.status))
			b.header.Store(&http.Header{"X-Request-Id": {"req-7"}, "Set-Cookie": {"session=secret"}})
			c := b.claim()
			c.Callback, c.FailureCallback = tc.callback, tc.failure
			if tc.lastAttempt {
				c.Attempt = c.MaxAttempts
			}
			b.claimed <- c
			receive(t, b.requests)
			r := receive(t, b.records)
			receive(t, b.settled)
			if tc.wantURL == "" {
				require.Nil(t, r.Callback)
				if r.NextAttemptAt != nil {
					require.Equal(t, c.ID, receive(t, b.scheduled).id, "only the retry is armed")
				}
				require.Empty(t, b.scheduled)
				return
			}
			require.Equal(t, tc.wantStatus, r.Status)
			cb := r.Callback
			require.NotNil(t, cb)
			require.Equal(t, tc.wantURL, cb.URL)
			require.Equal(t, "POST", cb.Method)
			require.Equal(t, map[string]string{"Content-Type": "application/json"}, cb.Headers)
			require.Equal(t, &c.ID, cb.CallbackOf)
			require.Equal(t, c.TenantID, cb.TenantID)
			require.Equal(t, model.PartitionOf(c.ID), model.PartitionOf(cb.ID), "in its source's partition")
			require.NotEqual(t, c.ID, cb.ID)
			require.True(t, cb.RunAt.Equal(b.clock.Now()), "due at once")
			armed := receive(t, b.scheduled)
			require.Equal(t, cb.ID, armed.id, "armed here once written")
			require.True(t, armed.at.Equal(cb.RunAt))

			var p sentCallback
			require.NoError(t, json.Unmarshal(cb.Body, &p))
			require.Equal(t, c.ID.String(), p.TaskID)
			require.Equal(t, string(tc.wantStatus), p.Status)
			require.Equal(t, c.Attempt, p.Attempt)
			require.Equal(t, tc.wantErr, p.Error)
			require.Equal(t, &tc.status, p.Response.StatusCode)
			require.Equal(t, []byte("thanks"), p.Response.Body)
			require.False(t, p.Response.BodyTruncated)
			require.Equal(t, "req-7", p.Response.Headers["X-Request-Id"])
			require.NotContains(t, p.Response.Headers, "Set-Cookie", "the headers an attempt keeps, never a credential")
			var raw struct {
				Response map[string]json.RawMessage `json:"response"`
			}
			require.NoError(t, json.Unmarshal(cb.Body, &raw))
			require.Equal(t, `"dGhhbmtz"`, string(raw.Response["body"]), "the body is base64")
		})
	}
}

// TestCallbackBody: a callback carries the first CallbackBodyMax bytes of
// the response byte for byte, binary included, and says whether there was
// more; the attempt still keeps its MaxResponseBody as text. With no
// response at all it carries a null status, no headers, an empty body and
// the error.
func TestCallbackBody(t *testing.T) {
	t.Parallel()
	binary := bytes.Repeat([]byte{0xff, 0x00, 'a', 0xc3}, 256)
	cases := []struct {
		name      string
		size      int
		truncated bool
	}{
		{name: "short", size: 10},
		{name: "exactly the cap", size: CallbackBodyMax},
		{name: "one byte more", size: CallbackBodyMax + 1, truncated: true},
		{name: "long", size: 4 * CallbackBodyMax, truncated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := bytes.Repeat(binary, tc.size/len(binary)+1)[:tc.size]
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(answer)
			}))
			t.Cleanup(receiver.Close)
			b := setupSender(t, senderOptions{})
			c := b.claim()
			c.URL, c.Callback = receiver.URL, ptr("https://receiver.example/done")
			b.claimed <- c
			r := receive(t, b.records)
			require.NotNil(t, r.Callback)
			var p sentCallback
			require.NoError(t, json.Unmarshal(r.Callback.Body, &p))
			require.Equal(t, answer[:min(tc.size, CallbackBodyMax)], p.Response.Body, "byte for byte")
			require.Equal(t, tc.truncated, p.Response.BodyTruncated)
			require.Equal(t, validUTF8(answer[:min(tc.size, 4<<10)]), *r.ResponseBody, "the attempt keeps what it kept")
		})
	}

	t.Run("no response", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		closed := "http://" + l.Addr().String() + "/hook"
		require.NoError(t, l.Close())
		b := setupSender(t, senderOptions{})
		c := b.claim()
		c.URL, c.FailureCallback, c.Attempt = closed, ptr("https://receiver.example/failed"), c.MaxAttempts
		b.claimed <- c
		r := receive(t, b.records)
		require.Equal(t, model.StatusDead, r.Status)
		require.NotNil(t, r.Callback)
		var raw struct {
			Error    *string                    `json:"error"`
			Response map[string]json.RawMessage `json:"response"`
		}
		require.NoError(t, json.Unmarshal(r.Callback.Body, &raw))
		require.Equal(t, r.Error, raw.Error)
		require.Contains(t, *raw.Error, "connection refused")
		require.JSONEq(t, `{"status_code": null, "headers": {}, "body": "", "body_truncated": false}`,
			string(mustJSON(t, raw.Response)))
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func ptr[T any](v T) *T { return &v }
