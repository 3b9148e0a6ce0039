package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

const quotaExceededType = "urn:hookwheel:problem:quota-exceeded"

// TestDailyQuotaAcrossNodes: a tenant on a plan of tasks_per_day 300 and
// 24 concurrent clients, spread over three serve processes, two in three
// creating single tasks and the others batches of 1 to 8, each until it is
// refused. The quota holds exactly across the nodes: 300 tasks stored (in
// Postgres and in GET /v1/usage), none more for singles or batches; every
// refusal is a 429 quota-exceeded (a single call's with Retry-After until
// the next UTC midnight; in a batch, the items past the room left, each,
// and only those after the first refused, the answer with the same
// Retry-After); every task asked for is either
// stored or refused. Then a schedule's occurrences over the quota are
// skipped and counted on the schedule, and make no task.
func TestDailyQuotaAcrossNodes(t *testing.T) {
	t.Parallel()
	const (
		quota   = 300
		clients = 24
		// Past this many tasks stored the clients stop, the quota being
		// plainly broken; the counts below then fail the test.
		runaway = 3 * quota
	)
	if until := time.Until(nextUTCMidnight(time.Now())); until < 5*time.Minute {
		t.Skipf("the UTC day ends in %s, which would reset the quota during the test", until.Round(time.Second))
	}
	c := startCluster(t, 3)
	ctx := context.Background()
	admin := func(method, path string, body any) []byte {
		t.Helper()
		status, out, err := apiCall(ctx, method, c.bases[0]+path, chaosAdminToken, body, nil)
		require.NoError(t, err)
		require.Less(t, status, 300, "%s %s: %d %s", method, path, status, out)
		return out
	}
	admin(http.MethodPut, "/v1/admin/plans/daily-300", map[string]int{"tasks_per_day": quota})
	var tenant struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal(admin(http.MethodPost, "/v1/admin/tenants",
		map[string]string{"name": "metered", "plan": "daily-300"}), &tenant))
	for _, base := range c.bases {
		status, out, err := apiCall(ctx, http.MethodGet, base+"/v1/limits", tenant.APIKey, nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(out))
		var view struct {
			Plan   string `json:"plan"`
			Limits struct {
				TasksPerDay int `json:"tasks_per_day"`
			} `json:"limits"`
		}
		require.NoError(t, json.Unmarshal(out, &view))
		require.Equal(t, "daily-300", view.Plan, base)
		require.Equal(t, quota, view.Limits.TasksPerDay, base)
	}
	rcv := newCountingReceiver(t) // the tasks fall due in an hour, after the test

	q := &quotaTally{key: tenant.APIKey, url: rcv.URL + "/quota", ids: map[string]bool{}}
	started := time.Now()
	var wg sync.WaitGroup
	for g := range clients {
		base := c.bases[g%len(c.bases)]
		wg.Go(func() {
			for q.stored() < runaway {
				var refused bool
				if g%3 != 0 {
					refused = q.single(ctx, base)
				} else {
					refused = q.batch(ctx, base, 1+rand.IntN(8))
				}
				if refused {
					return
				}
			}
		})
	}
	wg.Wait()
	// Once the quota is full, every node refuses a single and a whole batch.
	var admittedAfter []string
	for _, base := range c.bases {
		if !q.single(ctx, base) {
			admittedAfter = append(admittedAfter, "a single create through "+base)
		}
		if !q.batch(ctx, base, 5) {
			admittedAfter = append(admittedAfter, "a batch through "+base)
		}
	}
	took := time.Since(started)

	// Every client is done (wg.Wait): q is read without its lock.
	t.Logf("%d clients asked for %d tasks in %s: %d stored (%d singles, %d in %d batches), %d refused (%d single calls, %d batch items)",
		clients, q.asked.Load(), took.Round(time.Millisecond), q.accepted, q.singlesStored, q.batchItemsStored, q.batches,
		q.refused, q.singlesRefused, q.batchItemsRefused)
	require.Empty(t, q.unexpected, "answers other than stored or refused by the quota")
	require.Empty(t, q.badRetry, "every create refused, single or batch, carries Retry-After until the next UTC midnight")
	require.EqualValues(t, q.asked.Load(), q.accepted+q.refused, "every task asked for is stored or refused")
	require.Equal(t, quota, q.accepted, "exactly tasks_per_day tasks stored, across three nodes")
	require.Len(t, q.ids, quota, "as many distinct tasks")
	require.Empty(t, admittedAfter, "admitted after the quota was reached")
	require.Positive(t, q.singlesRefused)
	require.Positive(t, q.batchItemsRefused)

	dbCount := func() (tasks, fromSchedules int) {
		conn, err := pgx.Connect(ctx, c.dbURL)
		require.NoError(t, err)
		defer conn.Close(ctx)
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(schedule_id) FROM tasks WHERE tenant_id = $1`,
			tenant.ID).Scan(&tasks, &fromSchedules))
		return tasks, fromSchedules
	}
	stored, _ := dbCount()
	require.Equal(t, quota, stored, "tasks of the tenant in Postgres")
	require.EqualValues(t, quota, tasksCreatedToday(t, c.bases[1], tenant.APIKey), "tasks_created in GET /v1/usage")

	// A schedule firing every second, past the quota: its occurrences are
	// skipped and counted on it, none stored.
	status, out, err := apiCall(ctx, http.MethodPost, c.bases[2]+"/v1/schedules", tenant.APIKey,
		map[string]string{"url": rcv.URL + "/tick", "cron": "@every 1s"}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status, string(out))
	var schedule struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(out, &schedule))
	skipped := waitSkippedOccurrences(t, c.bases[0], tenant.APIKey, schedule.ID, 2, time.Now().Add(60*time.Second))
	stored, fromSchedules := dbCount()
	t.Logf("the schedule skipped %d occurrences", skipped)
	require.Zero(t, fromSchedules, "no occurrence stored past the quota")
	require.Equal(t, quota, stored)
	require.EqualValues(t, quota, tasksCreatedToday(t, c.bases[1], tenant.APIKey))
	distinct, _ := rcv.counts()
	require.Zero(t, distinct, "nothing fell due")
	c.termAll(t)
}

// quotaTally makes a tenant's creates and counts what became of them.
type quotaTally struct {
	key, url string
	// asked counts the tasks asked for, as they are sent.
	asked atomic.Int64

	mu                                  sync.Mutex
	ids                                 map[string]bool
	accepted, refused                   int
	singlesStored, singlesRefused       int
	batches                             int
	batchItemsStored, batchItemsRefused int
	unexpected, badRetry                []string
}

func (q *quotaTally) stored() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.accepted
}

func (q *quotaTally) fail(list *[]string, format string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	*list = append(*list, fmt.Sprintf(format, args...))
}

// single creates one task through base and reports whether the quota
// refused it.
func (q *quotaTally) single(ctx context.Context, base string) bool {
	q.asked.Add(1)
	before := time.Now()
	status, header, body, err := apiCallHeader(ctx, http.MethodPost, base+"/v1/tasks", q.key, map[string]any{"url": q.url, "delay": "1h"}, nil)
	after := time.Now()
	if err != nil {
		q.fail(&q.unexpected, "single via %s: %v", base, err)
		return true
	}
	switch status {
	case http.StatusCreated:
		var task struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &task); err != nil || task.ID == "" {
			q.fail(&q.unexpected, "single via %s: 201 %s", base, body)
			return true
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		q.ids[task.ID] = true
		q.accepted++
		q.singlesStored++
		return false
	case http.StatusTooManyRequests:
		if pt := problemTypeOf(body); pt != quotaExceededType || header.Get("Content-Type") != "application/problem+json" {
			q.fail(&q.unexpected, "single via %s: 429 %s %s", base, header.Get("Content-Type"), body)
			return true
		}
		if wrong := retryAfterWrong(header, before, after); wrong != "" {
			q.fail(&q.badRetry, "single via %s: %s", base, wrong)
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		q.refused++
		q.singlesRefused++
		return true
	default:
		q.fail(&q.unexpected, "single via %s: %d %s", base, status, body)
		return true
	}
}

// batch creates size tasks in one batch call through base and reports
// whether the quota refused any of them.
func (q *quotaTally) batch(ctx context.Context, base string, size int) bool {
	q.asked.Add(int64(size))
	items := make([]map[string]any, size)
	for i := range items {
		items[i] = map[string]any{"url": q.url, "delay": "1h"}
	}
	before := time.Now()
	status, header, body, err := apiCallHeader(ctx, http.MethodPost, base+"/v1/tasks/batch", q.key, map[string]any{"tasks": items}, nil)
	after := time.Now()
	if err != nil {
		q.fail(&q.unexpected, "batch via %s: %v", base, err)
		return true
	}
	var out struct {
		Data []struct {
			Task *struct {
				ID string `json:"id"`
			} `json:"task"`
			Error *struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			} `json:"error"`
		} `json:"data"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil || len(out.Data) != size {
		q.fail(&q.unexpected, "batch of %d via %s: %d %s", size, base, status, body)
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches++
	refused := 0
	for i, item := range out.Data {
		switch {
		case item.Task != nil && item.Task.ID != "" && refused == 0:
			q.ids[item.Task.ID] = true
			q.accepted++
			q.batchItemsStored++
		case item.Error != nil && item.Error.Type == quotaExceededType && item.Error.Status == http.StatusTooManyRequests:
			refused++
			q.refused++
			q.batchItemsRefused++
		default:
			q.unexpected = append(q.unexpected, fmt.Sprintf("batch of %d via %s: item %d after %d refused: %s", size, base, i, refused, body))
			return true
		}
	}
	switch wrong := retryAfterWrong(header, before, after); {
	case refused > 0 && wrong != "":
		q.badRetry = append(q.badRetry, fmt.Sprintf("batch of %d via %s, %d refused: %s", size, base, refused, wrong))
	case refused == 0 && header.Get("Retry-After") != "":
		q.badRetry = append(q.badRetry, fmt.Sprintf("batch of %d via %s stored whole, yet Retry-After %q", size, base, header.Get("Retry-After")))
	}
	return refused > 0
}

// retryAfterWrong says what is wrong with the Retry-After of a refusal over
// tasks_per_day answered between before and after, or "" when it is the
// time to the next UTC midnight: the node computes it between the two
// instants, rounding up.
func retryAfterWrong(header http.Header, before, after time.Time) string {
	lo := int(math.Floor(nextUTCMidnight(after).Sub(after).Seconds()))
	hi := int(math.Ceil(nextUTCMidnight(before).Sub(before).Seconds()))
	if ra, err := strconv.Atoi(header.Get("Retry-After")); err != nil || ra < lo || ra > hi {
		return fmt.Sprintf("Retry-After %q, want %d to %d", header.Get("Retry-After"), lo, hi)
	}
	return ""
}

func problemTypeOf(body []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Type
}

// nextUTCMidnight is the first UTC midnight after t.
func nextUTCMidnight(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// tasksCreatedToday is the tenant's tasks_created today (UTC) in GET
// /v1/usage through base.
func tasksCreatedToday(t *testing.T, base, apiKey string) int64 {
	t.Helper()
	today := time.Now().UTC().Format(time.DateOnly)
	status, body, err := apiCall(context.Background(), http.MethodGet, base+"/v1/usage?from="+today+"&to="+today, apiKey, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, string(body))
	var usage struct {
		Totals struct {
			TasksCreated int64 `json:"tasks_created"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal(body, &usage))
	return usage.Totals.TasksCreated
}

// waitSkippedOccurrences polls the schedule until it has counted at least
// want skipped occurrences, and returns its count.
func waitSkippedOccurrences(t *testing.T, base, apiKey, id string, want int64, deadline time.Time) int64 {
	t.Helper()
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		status, body, err := apiCall(context.Background(), http.MethodGet, base+"/v1/schedules/"+id, apiKey, nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(body))
		var s struct {
			SkippedOccurrences int64 `json:"skipped_occurrences"`
		}
		require.NoError(t, json.Unmarshal(body, &s))
		if s.SkippedOccurrences >= want {
			return s.SkippedOccurrences
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule %s skipped %d occurrences by the deadline, want %d", id, s.SkippedOccurrences, want)
		}
		<-poll.C
	}
}
