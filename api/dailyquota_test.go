package api_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
)

// rawPost posts body as the tenant from any goroutine (h.do requires on
// the test's goroutine).
func rawPost(url, key, body string) (status int, header http.Header, out []byte, err error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out, err
}

// TestDailyTaskQuotaConcurrent: concurrent creates of one tenant against a
// tasks_per_day of K admit exactly K, from any number of callers at once;
// the others get 429 quota-exceeded with Retry-After until the next UTC
// midnight. Batches admit their items in order up to the room left, never
// more than K together.
func TestDailyTaskQuotaConcurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const quota, callers = 5, 16
	acme := h.createTenant("acme")
	resp := h.do(http.MethodPatch, "/v1/admin/tenants/"+acme.ID.String(), adminToken,
		strings.NewReader(`{"limits": {"tasks_per_day": 5}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	wantRetry := strconv.Itoa(ceilSecondsOf(model.NextUTCMidnight(h.Clock.Now()).Sub(h.Clock.Now())))

	type answer struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	answers := make(chan answer, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			status, header, body, err := rawPost(h.URL+"/v1/tasks", acme.APIKey, `{"url": "https://example.com/a"}`)
			answers <- answer{status, header, body, err}
		})
	}
	wg.Wait()
	close(answers)
	created := 0
	for a := range answers {
		require.NoError(t, a.err)
		switch a.status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			var p problem
			require.NoError(t, json.Unmarshal(a.body, &p))
			require.Equal(t, problemTypePrefix+"quota-exceeded", p.Type)
			require.Contains(t, p.Detail, "tasks_per_day")
			require.Equal(t, wantRetry, a.header.Get("Retry-After"))
		default:
			t.Fatalf("unexpected answer %d: %s", a.status, a.body)
		}
	}
	require.Equal(t, quota, created, "exactly the quota admitted")
	n, err := h.DB.TasksCreatedToday(t.Context(), acme.ID)
	require.NoError(t, err)
	require.Equal(t, quota, n)

	// A repeat of a key already used passes the full quota: it stores nothing.
	resp = h.do(http.MethodPatch, "/v1/admin/tenants/"+acme.ID.String(), adminToken,
		strings.NewReader(`{"limits": {"tasks_per_day": 6}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, http.StatusCreated, h.postTask(acme, `{"url": "https://example.com/k"}`, "k1").Status)
	require.Equal(t, http.StatusOK, h.postTask(acme, `{"url": "https://example.com/k"}`, "k1").Status, "the replay")
	p := requireProblem(t, h.postTask(acme, `{"url": "https://example.com/k"}`, "k2"), http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"quota-exceeded", p.Type)

	// Batches: four callers of four items each against a quota of 10.
	globex := h.createTenant("globex")
	resp = h.do(http.MethodPatch, "/v1/admin/tenants/"+globex.ID.String(), adminToken,
		strings.NewReader(`{"limits": {"tasks_per_day": 10}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	item := `{"url": "https://example.com/b"}`
	batches := make(chan answer, 4)
	for range 4 {
		wg.Go(func() {
			status, header, body, err := rawPost(h.URL+"/v1/tasks/batch", globex.APIKey, batchBody(item, item, item, item))
			batches <- answer{status, header, body, err}
		})
	}
	wg.Wait()
	close(batches)
	created = 0
	for a := range batches {
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status, string(a.body))
		var out openapi.BatchResponse
		require.NoError(t, json.Unmarshal(a.body, &out))
		refused := false
		for i, res := range out.Data {
			if res.Error == nil {
				require.False(t, refused, "an item admitted after one refused: %s", a.body)
				created++
				continue
			}
			refused = true
			requireItemProblem(t, res, i, http.StatusTooManyRequests, "")
			require.Equal(t, problemTypePrefix+"quota-exceeded", res.Error.Type)
		}
		if refused {
			require.Equal(t, wantRetry, a.header.Get("Retry-After"), "a batch with items over the quota says when they fit")
		} else {
			require.Empty(t, a.header.Get("Retry-After"), "a batch stored whole has no Retry-After")
		}
	}
	require.Equal(t, 10, created, "batches fill the quota and never pass it")
	n, err = h.DB.TasksCreatedToday(t.Context(), globex.ID)
	require.NoError(t, err)
	require.Equal(t, 10, n)
}

// TestDailyTaskQuotaPublish: a topic publish counts one task per endpoint
// and fits whole or not at all.
func TestDailyTaskQuotaPublish(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	resp := h.do(http.MethodPatch, "/v1/admin/tenants/"+acme.ID.String(), adminToken,
		strings.NewReader(`{"limits": {"tasks_per_day": 5}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	resp = h.do(http.MethodPut, "/v1/topics/orders", acme.APIKey, strings.NewReader(
		`{"endpoints": [{"name": "a", "url": "https://a.example/h"}, {"name": "b", "url": "https://b.example/h"}, {"name": "c", "url": "https://c.example/h"}]}`), nil)
	require.Less(t, resp.Status, 300, string(resp.Body))

	require.Equal(t, http.StatusCreated, h.postTask(acme, `{"topic": "orders"}`, "").Status)
	p := requireProblem(t, h.postTask(acme, `{"topic": "orders"}`, ""), http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"quota-exceeded", p.Type)
	require.Contains(t, p.Detail, "would add 3")
	h.createTask(acme, `{"url": "https://example.com/a"}`)
	h.createTask(acme, `{"url": "https://example.com/a"}`)
	requireProblem(t, h.postTask(acme, `{"url": "https://example.com/a"}`, ""), http.StatusTooManyRequests)
	n, err := h.DB.TasksCreatedToday(t.Context(), acme.ID)
	require.NoError(t, err)
	require.Equal(t, 5, n)
}

func ceilSecondsOf(d time.Duration) int { return int(math.Ceil(d.Seconds())) }
