package e2e_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestREADMEReceiver runs the receiver README.md shows (receiveWebhooks, in
// readme_receiver_test.go) against real webhooks: it takes a signed one,
// retries one its handler failed, refuses a forged one, and README.md holds
// its code verbatim.
func TestREADMEReceiver(t *testing.T) {
	t.Parallel()
	source, err := os.ReadFile("readme_receiver_test.go")
	require.NoError(t, err)
	_, code, ok := strings.Cut(string(source), "\nimport (")
	require.True(t, ok, "readme_receiver_test.go has no import block")
	code = "import (" + code
	readme, err := os.ReadFile("../../../../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```go\n"+code+"```\n",
		"README.md's receiver must be readme_receiver_test.go from its imports on, verbatim")

	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")

	var (
		mu      sync.Mutex
		handled = map[string][]byte{}
		calls   int
	)
	handler, err := receiveWebhooks(acme.signingSecret, func(id string, body []byte) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return errors.New("the first call fails, as a receiver's database might")
		}
		handled[id] = body
		return nil
	})
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)

	task := acme.schedule(t, openapi.TaskRequest{URL: srv.URL + "/hooks/order-timeout", Body: `{"order": 42}`,
		Retry: &openapi.RetryPolicy{MinBackoff: ptr("100ms"), MaxBackoff: ptr("100ms")}})
	done := acme.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 30*time.Second)
	require.Equal(t, 2, done.Attempts, "the failed first call was retried")
	require.NotNil(t, done.LastStatusCode)
	require.Equal(t, http.StatusNoContent, *done.LastStatusCode)
	mu.Lock()
	require.Equal(t, map[string][]byte{task.ID.String(): []byte(`{"order": 42}`)}, handled)
	mu.Unlock()

	// A request hookwheel did not sign is refused before handle sees it.
	forged, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/order-timeout", bytes.NewReader([]byte(`{"order": 43}`)))
	require.NoError(t, err)
	forged.Header.Set("webhook-id", task.ID.String())
	forged.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	forged.Header.Set("webhook-signature", "v1,bm90IGEgc2lnbmF0dXJl")
	resp, err := http.DefaultClient.Do(forged)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	mu.Lock()
	require.Equal(t, 2, calls)
	mu.Unlock()
}
