package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// apiClient makes the tests' API calls; it keeps enough connections per
// node for the concurrent task creators.
var apiClient = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	},
}

// apiCall sends a JSON request and returns the status and body.
func apiCall(ctx context.Context, method, url, token string, body any, header map[string]string) (int, []byte, error) {
	status, _, out, err := apiCallHeader(ctx, method, url, token, body, header)
	return status, out, err
}

// apiCallHeader is apiCall that also returns the answer's header.
func apiCallHeader(ctx context.Context, method, url, token string, body any, header map[string]string) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out, err
}

// createTenantVia creates a tenant through the admin API of base and
// returns its API key.
func createTenantVia(t testing.TB, base, adminToken, name string) string {
	t.Helper()
	status, body, err := apiCall(context.Background(), http.MethodPost, base+"/v1/admin/tenants", adminToken, map[string]string{"name": name}, nil)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create tenant: %d %v %s", status, err, body)
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.APIKey == "" {
		t.Fatalf("create tenant: %v %s", err, body)
	}
	return created.APIKey
}

// plannedTask is a task a test creates, and what its webhooks must carry.
type plannedTask struct {
	runAt   time.Time
	idemKey string // given at creation; empty: none
	// Filled in at creation.
	id          string
	expectedKey string // Idempotency-Key of its webhooks
}

// countTasks counts the tenant's tasks in status through GET /v1/tasks.
func countTasks(ctx context.Context, base, apiKey, status string) (int, error) {
	count := 0
	cursor := ""
	for {
		url := base + "/v1/tasks?limit=500&status=" + status
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		code, body, err := apiCall(ctx, http.MethodGet, url, apiKey, nil, nil)
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("list tasks: %d %s", code, body)
		}
		var page struct {
			Data       []json.RawMessage `json:"data"`
			NextCursor *string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, err
		}
		count += len(page.Data)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return count, nil
		}
		cursor = *page.NextCursor
	}
}

// waitTasksInStatus polls until want of the tenant's tasks are in status.
func waitTasksInStatus(base, apiKey, status string, want int, deadline time.Time) error {
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err := countTasks(ctx, base, apiKey, status)
		cancel()
		if err == nil && got == want {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("%d of %d tasks %s by the deadline", got, want, status)
		}
		<-poll.C
	}
}

// createTasksInBatches creates the tasks with POST /v1/tasks/batch, 500 per
// call, four calls at a time spread over the nodes, and fills in their ids
// and expected Idempotency-Keys.
func createTasksInBatches(t testing.TB, bases []string, apiKey, url string, tasks []plannedTask) {
	t.Helper()
	const per = 500
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, 4)
	for from := 0; from < len(tasks); from += per {
		to := min(from+per, len(tasks))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			items := make([]map[string]any, 0, to-from)
			for i := from; i < to; i++ {
				item := map[string]any{"url": url, "body": `{"n":` + strconv.Itoa(i) + `}`, "run_at": tasks[i].runAt.Format(time.RFC3339Nano)}
				if tasks[i].idemKey != "" {
					item["idempotency_key"] = tasks[i].idemKey
				}
				items = append(items, item)
			}
			base := bases[(from/per)%len(bases)]
			status, body, err := apiCall(context.Background(), http.MethodPost, base+"/v1/tasks/batch", apiKey, map[string]any{"tasks": items}, nil)
			var answer struct {
				Data []struct {
					Task *struct {
						ID string `json:"id"`
					} `json:"task"`
					Error any `json:"error"`
				} `json:"data"`
			}
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("status %d: %s", status, body)
			}
			if err == nil {
				err = json.Unmarshal(body, &answer)
			}
			if err == nil && len(answer.Data) != to-from {
				err = fmt.Errorf("%d results for %d items", len(answer.Data), to-from)
			}
			for k := 0; err == nil && k < len(answer.Data); k++ {
				r := answer.Data[k]
				if r.Task == nil {
					err = fmt.Errorf("item %d: %v", from+k, r.Error)
					break
				}
				task := &tasks[from+k]
				task.id, task.expectedKey = r.Task.ID, task.idemKey
				if task.expectedKey == "" {
					task.expectedKey = r.Task.ID
				}
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("create tasks %d to %d via %s: %w", from, to-1, base, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
}
