package e2e_test

// A list call must never make a node build an answer the size of what a
// tenant stored: a page of 500 tasks carrying 1 MiB bodies each, rendered
// whole (and JSON spells '<' in six bytes), took gigabytes. Lists carry no
// bodies unless asked, and then at most 8 MiB of them a page.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store/storetest"
)

// The node's peak RSS may rise this much while the eight lists of
// TestListsKeepMemoryBounded run: what four answers of 8 MiB of bodies each
// (encoded one task at a time) need, with room for the runtime's slack. On
// 9cad166 the same lists raised it by gigabytes.
const listRSSRiseBound = 256 << 20

// procMemory reads a figure in bytes (VmRSS, VmHWM) of /proc/<pid>/status.
func procMemory(t testing.TB, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		require.NoError(t, err, "%s: %q", field, value)
		return kb << 10
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// listCall is what one GET of a list gave, read as it streamed.
type listCall struct {
	status  int
	wire    int64 // bytes of the answer
	items   int
	bodies  int   // items that carried a body
	bodyLen int64 // their bytes, decoded
	ids     []string
	next    *string
}

// getList reads one page of path, decoding it only when decode is set (an
// answer of gigabytes would otherwise be held by the test itself).
func getList(ctx context.Context, base, apiKey, path string, decode bool) (listCall, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return listCall{}, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return listCall{}, err
	}
	defer resp.Body.Close()
	call := listCall{status: resp.StatusCode}
	if !decode {
		call.wire, err = io.Copy(io.Discard, resp.Body)
		return call, err
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return call, err
	}
	call.wire = int64(len(raw))
	var page struct {
		Data []struct {
			ID   string  `json:"id"`
			Body *string `json:"body"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return call, fmt.Errorf("%s: %w (%.200s)", path, err, raw)
	}
	call.items, call.next = len(page.Data), page.NextCursor
	for _, item := range page.Data {
		call.ids = append(call.ids, item.ID)
		if item.Body != nil {
			call.bodies++
			call.bodyLen += int64(len(*item.Body))
		}
	}
	return call, nil
}

// TestListsKeepMemoryBounded stores 100 tasks of 1 MB bodies full of '<'
// in a real node, then runs four GET /v1/tasks?limit=500 and four with
// include=body at once, and reads the node's peak RSS (VmHWM) before and
// after: it must rise by less than listRSSRiseBound. The lists without
// bodies carry none; those with bodies are cut at 8 MiB of them, and their
// cursors lead through every task once (of a label, to keep the test short).
func TestListsKeepMemoryBounded(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)))
	apiKey := createTenantVia(t, node.base, chaosAdminToken, "big-lists")
	ctx := context.Background()

	const (
		tasks    = 100
		bodySize = 1_000_000
	)
	// Sent as it is: '<' needs no escape in JSON, and a client that escaped
	// it would pass the request size limit.
	request := func(labels string) []byte {
		return []byte(`{"url": "https://example.com/hooks/big", "delay": "24h", "labels": {` + labels + `}, "body": "` +
			strings.Repeat("<", bodySize) + `"}`)
	}
	// Every fifth task is labelled for the walk through the pages below.
	unlabelled, labelled := request(""), request(`"walk": "yes"`)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range work {
				req := unlabelled
				if i%5 == 0 {
					req = labelled
				}
				status, body, err := postRaw(ctx, node.base+"/v1/tasks", apiKey, req)
				if !assert201(t, status, body, err) {
					return
				}
			}
		})
	}
	for i := range tasks {
		work <- i
	}
	close(work)
	wg.Wait()
	require.False(t, t.Failed())

	pid, running := node.Running()
	require.True(t, running)
	// The peak so far is the creations'; from here on it is the lists'.
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0))
	before := procMemory(t, pid, "VmHWM")

	paths := []string{"/v1/tasks?limit=500", "/v1/tasks?limit=500", "/v1/tasks?limit=500", "/v1/tasks?limit=500",
		"/v1/tasks?limit=500&include=body", "/v1/tasks?limit=500&include=body",
		"/v1/tasks?limit=500&include=body", "/v1/tasks?limit=500&include=body"}
	calls := make([]listCall, len(paths))
	errs := make([]error, len(paths))
	start := make(chan struct{})
	started := time.Now()
	for i, path := range paths {
		wg.Go(func() {
			<-start
			calls[i], errs[i] = getList(ctx, node.base, apiKey, path, false)
		})
	}
	close(start)
	wg.Wait()
	took := time.Since(started)
	peak := procMemory(t, pid, "VmHWM")
	t.Logf("node peak RSS %d MiB before the lists, %d MiB after: a rise of %d MiB (bound %d MiB); lists took %s",
		before>>20, peak>>20, (peak-before)>>20, listRSSRiseBound>>20, took.Round(time.Millisecond))
	require.Less(t, peak-before, int64(listRSSRiseBound), "the lists raised the node's peak RSS by %d MiB", (peak-before)>>20)
	for i, c := range calls {
		require.NoError(t, errs[i], paths[i])
		require.Equal(t, http.StatusOK, c.status, paths[i])
		t.Logf("%s: %d bytes", paths[i], c.wire)
	}

	// Without include, no body: 100 tasks in well under a megabyte.
	plain, err := getList(ctx, node.base, apiKey, "/v1/tasks?limit=500", true)
	require.NoError(t, err)
	require.Equal(t, tasks, plain.items)
	require.Zero(t, plain.bodies)
	require.Nil(t, plain.next)
	require.Less(t, plain.wire, int64(1<<20))

	// With it, 8 MiB of bodies a page, and the cursors lead through all:
	// through the labelled fifth, as decoding a page of 48 MB of escapes
	// under the race detector takes seconds, and 13 of them took minutes.
	const walkedTasks = tasks / 5
	seen := map[string]bool{}
	path := "/v1/tasks?limit=500&include=body&label=walk:yes"
	pages := 0
	for {
		page, err := getList(ctx, node.base, apiKey, path, true)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, page.status)
		require.Equal(t, page.items, page.bodies, "every task with its body")
		require.LessOrEqual(t, page.bodyLen, int64(8<<20))
		for _, id := range page.ids {
			require.False(t, seen[id], "task %s listed twice", id)
			seen[id] = true
		}
		pages++
		if page.next == nil {
			break
		}
		require.Equal(t, 8, page.items, "a page cut at 8 MiB of 1 MB bodies")
		path = "/v1/tasks?limit=500&include=body&label=walk:yes&cursor=" + *page.next
	}
	require.Len(t, seen, walkedTasks)
	require.Equal(t, 3, pages, "20 tasks, 8 a page")
}

// postRaw posts body as it is (apiCall's encoder would escape each '<' into
// six bytes).
func postRaw(ctx context.Context, url, apiKey string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// assert201 reports, without stopping the test from another goroutine, a
// creation that did not answer 201.
func assert201(t *testing.T, status int, body []byte, err error) bool {
	t.Helper()
	if err != nil || status != http.StatusCreated {
		t.Errorf("create task: %d %v %s", status, err, bytes.TrimSpace(body[:min(len(body), 300)]))
		return false
	}
	return true
}
