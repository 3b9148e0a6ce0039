package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
)

// callbackBody is a callback's JSON as a receiver reads it, by the names
// the API reference gives (CallbackPayload), with the body still base64.
type callbackBody struct {
	TaskID   string  `json:"task_id"`
	Status   string  `json:"status"`
	Attempt  int     `json:"attempt"`
	Error    *string `json:"error"`
	Response struct {
		StatusCode    *int              `json:"status_code"`
		Headers       map[string]string `json:"headers"`
		Body          string            `json:"body"`
		BodyTruncated bool              `json:"body_truncated"`
	} `json:"response"`
}

// TestCallbacks follows tasks with callback URLs through a whole node: the
// delivery of one, then the death of another, each reported by a signed
// POST that the official Standard Webhooks library verifies, carrying the
// final attempt's response; a callback refused at first is retried like
// any task; the callback tasks are linked to their sources in the API.
func TestCallbacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	targets, callbacks := newReceiver(t), newReceiver(t)
	wh, err := standardwebhooks.NewWebhook(acme.signingSecret)
	require.NoError(t, err)
	ctx := context.Background()
	fast := &openapi.RetryPolicy{MaxAttempts: ptr(3), MinBackoff: ptr("100ms"), MaxBackoff: ptr("200ms")}

	// received waits for the first callback at path and checks it as a
	// receiver would: signature first, then the payload.
	received := func(t *testing.T, path string) (delivery, callbackBody) {
		t.Helper()
		ds := callbacks.waitFor(t, 15*time.Second, "a callback at "+path, func(ds []delivery) bool {
			for _, d := range ds {
				if d.path == path {
					return true
				}
			}
			return false
		})
		for _, d := range ds {
			if d.path != path {
				continue
			}
			require.Equal(t, http.MethodPost, d.method)
			require.Equal(t, "application/json", d.header.Get("Content-Type"))
			require.NoError(t, wh.Verify(d.body, d.header), "signed as every webhook")
			require.Error(t, wh.Verify([]byte(strings.Replace(string(d.body), `"attempt":`, `"attempt":1`, 1)), d.header), "a tampered payload does not verify")
			var p callbackBody
			require.NoError(t, json.Unmarshal(d.body, &p))
			return d, p
		}
		panic("unreachable")
	}

	t.Run("delivered", func(t *testing.T) {
		source := acme.schedule(t, openapi.TaskRequest{
			URL: targets.URL + "/charge", Body: `{"invoice": 1207}`, Retry: fast,
			Callback: ptr(callbacks.URL + "/charge-done"), FailureCallback: ptr(callbacks.URL + "/charge-failed"),
		})
		d, p := received(t, "/charge-done")
		require.Equal(t, source.ID.String(), p.TaskID)
		require.Equal(t, "delivered", p.Status)
		require.Equal(t, 1, p.Attempt)
		require.Nil(t, p.Error)
		require.Equal(t, ptr(200), p.Response.StatusCode)
		answer, err := base64.StdEncoding.DecodeString(p.Response.Body)
		require.NoError(t, err)
		require.Equal(t, `{"ok":true}`, string(answer), "what the receiver answered, byte for byte")
		require.False(t, p.Response.BodyTruncated)
		require.Contains(t, p.Response.Headers, "Content-Length")

		delivered := acme.waitStatus(t, source.ID, openapi.TaskStatusDelivered, 5*time.Second)
		require.NotNil(t, delivered.CallbackTaskID)
		require.Equal(t, delivered.CallbackTaskID.String(), d.webhookID(), "the callback is a task of its own")
		cb := acme.waitStatus(t, *delivered.CallbackTaskID, openapi.TaskStatusDelivered, 5*time.Second)
		require.Equal(t, &source.ID, cb.CallbackOf)
		require.Equal(t, callbacks.URL+"/charge-done", cb.URL)
		require.Nil(t, cb.Callback, "a callback has no callbacks")
		require.NotNil(t, cb.Report)
		require.Equal(t, source.ID, cb.Report.TaskID)
		require.Equal(t, []byte(`{"ok":true}`), cb.Report.Response.Body)
		require.Equal(t, source.Retry, cb.Retry, "the source's retry policy")
		require.Equal(t, source.Timeout, cb.Timeout)

		list, err := acme.client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{CallbackOf: &source.ID})
		require.NoError(t, err)
		require.Len(t, list.JSON200.Data, 1)
		require.Equal(t, cb.ID, list.JSON200.Data[0].ID)
		require.Empty(t, deliveriesAt(callbacks.snapshot(), "/charge-failed"), "the failure callback hears nothing")
	})

	t.Run("dead", func(t *testing.T) {
		targets.setRespond(func(d delivery, _ int) (int, http.Header) {
			if d.path == "/refund" {
				return http.StatusInternalServerError, nil
			}
			return http.StatusOK, nil
		})
		source := acme.schedule(t, openapi.TaskRequest{
			URL: targets.URL + "/refund", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)},
			Callback: ptr(callbacks.URL + "/refund-done"), FailureCallback: ptr(callbacks.URL + "/refund-failed"),
		})
		_, p := received(t, "/refund-failed")
		require.Equal(t, source.ID.String(), p.TaskID)
		require.Equal(t, "dead", p.Status)
		require.Equal(t, 1, p.Attempt)
		require.Equal(t, ptr("receiver answered 500 Internal Server Error"), p.Error)
		require.Equal(t, ptr(500), p.Response.StatusCode)
		answer, err := base64.StdEncoding.DecodeString(p.Response.Body)
		require.NoError(t, err)
		require.Equal(t, `{"ok":true}`, string(answer))
		dead := acme.waitStatus(t, source.ID, openapi.TaskStatusDead, 5*time.Second)
		require.NotNil(t, dead.CallbackTaskID)
		require.Empty(t, deliveriesAt(callbacks.snapshot(), "/refund-done"))
	})

	t.Run("a refused callback is retried", func(t *testing.T) {
		callbacks.setRespond(func(d delivery, nth int) (int, http.Header) {
			if d.path == "/flaky" && nth == 1 {
				return http.StatusInternalServerError, nil
			}
			return http.StatusOK, nil
		})
		source := acme.schedule(t, openapi.TaskRequest{URL: targets.URL + "/ship", Retry: fast,
			Callback: ptr(callbacks.URL + "/flaky")})
		ds := callbacks.waitFor(t, 15*time.Second, "the callback twice", func(ds []delivery) bool {
			return len(deliveriesAt(ds, "/flaky")) >= 2
		})
		sent := deliveriesAt(ds, "/flaky")
		require.Equal(t, sent[0].webhookID(), sent[1].webhookID(), "the same callback, retried")
		require.Equal(t, "2", sent[1].header.Get("Hookwheel-Attempt"))
		for _, d := range sent {
			require.NoError(t, wh.Verify(d.body, d.header))
		}
		cbID, err := uuid.Parse(sent[0].webhookID())
		require.NoError(t, err)
		cb := acme.waitStatus(t, cbID, openapi.TaskStatusDelivered, 5*time.Second)
		require.Equal(t, 2, cb.Attempts)
		require.Equal(t, &source.ID, cb.CallbackOf)
		require.Len(t, deliveriesAt(callbacks.snapshot(), "/flaky"), 2, "delivered, the callback makes no callback of its own")
	})
}

// TestCallbackRefusedTarget: a callback URL the node's target rules refuse
// (here loopback, with private targets not allowed) is a 422 naming the
// field at create, as a task's url is.
func TestCallbackRefusedTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Targets = netguard.Config{} })
	acme := e.createTenant(n, "acme")
	for _, field := range []string{"callback", "failure_callback"} {
		req := map[string]any{"url": "https://example.com/hook", field: "http://127.0.0.1:8080/done"}
		resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey, mustJSON(t, req), nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, string(body))
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		var p openapi.Problem
		require.NoError(t, json.Unmarshal(body, &p))
		require.Len(t, p.Errors, 1, string(body))
		require.Equal(t, field, p.Errors[0].Field)
	}
}

// deliveriesAt are the deliveries of ds to path, in order.
func deliveriesAt(ds []delivery, path string) []delivery {
	var out []delivery
	for _, d := range ds {
		if d.path == path {
			out = append(out, d)
		}
	}
	return out
}
