package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
)

func TestGetCaller(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	limited := h.createKey(tn, `{"name": "reader", "scopes": ["tasks:read"], "expires_at": "`+expires.Format(time.RFC3339)+`"}`)
	keyID, _, _ := strings.Cut(strings.TrimPrefix(tn.APIKey, "hw_"), "_")

	tests := []struct {
		name, token, keyID, keyName string
		scopes                      []openapi.Scope
		expiresAt                   *time.Time
	}{
		{"the first key", tn.APIKey, keyID, "initial", []openapi.Scope{"*"}, nil},
		{"a key with one scope", limited.APIKey, limited.ID, "reader", []openapi.Scope{"tasks:read"}, &expires},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.client(tt.token).GetCallerWithResponse(context.Background())
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			got := resp.JSON200
			require.Equal(t, tn.ID, got.Tenant.ID)
			require.Equal(t, "acme", got.Tenant.Name)
			require.Equal(t, tt.keyID, got.Key.ID)
			require.Equal(t, tt.keyName, got.Key.Name)
			require.Equal(t, tt.scopes, got.Key.Scopes)
			if tt.expiresAt == nil {
				require.Nil(t, got.Key.ExpiresAt)
			} else {
				require.True(t, tt.expiresAt.Equal(*got.Key.ExpiresAt))
			}
			require.NotContains(t, string(resp.Body), tt.token[len(tt.token)-10:], "never the secret")
		})
	}

	requireUnauthorized(t, h.do(http.MethodGet, "/v1/me", "", nil, nil))
	requireUnauthorized(t, h.do(http.MethodGet, "/v1/me", adminToken, nil, nil))
}

func TestListTenants(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.client(adminToken)
	ctx := context.Background()
	var tenants []tenant
	for _, name := range []string{"acme", "globex", "initech", "umbrella", "hooli"} {
		tenants = append(tenants, h.createTenant(name))
	}
	// globex: two tasks waiting and one dead; initech: one waiting (a retry).
	for range 3 {
		h.createTask(tenants[1], `{"url": "https://example.com/x", "delay": "1h"}`)
	}
	dead := h.createTask(tenants[1], `{"url": "https://example.com/x", "delay": "1h"}`)
	finishForReplay(h, dead.ID, "dead", 1, 500, nil)
	retrying := h.createTask(tenants[2], `{"url": "https://example.com/x", "delay": "1h"}`)
	h.exec(`UPDATE tasks SET status = 'retrying' WHERE id = $1`, retrying.ID)
	h.patchLimits(tenants[3], `{"limits":{"max_pending_tasks":3}}`)
	waiting := map[uuid.UUID]int{tenants[1].ID: 3, tenants[2].ID: 1}

	resp, err := admin.ListTenantsWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Nil(t, resp.JSON200.NextCursor)
	require.Len(t, resp.JSON200.Data, len(tenants))
	for i, got := range resp.JSON200.Data {
		require.Equal(t, tenants[i].ID, got.ID, "oldest first")
		require.Equal(t, waiting[got.ID], got.WaitingTasks, "%s", got.Name)
		require.Equal(t, openapi.TenantSummaryStatusActive, got.Status)
		one, err := admin.GetTenantWithResponse(ctx, got.ID)
		require.NoError(t, err)
		require.Equal(t, *one.JSON200, openapi.Tenant{ID: got.ID, Name: got.Name, CreatedAt: got.CreatedAt, Retry: got.Retry,
			Limits: got.Limits, EffectiveLimits: got.EffectiveLimits, TargetAllowCidrs: got.TargetAllowCidrs, Retention: got.Retention,
			Status: openapi.TenantStatus(got.Status), Deletion: got.Deletion},
			"the settings GET shows")
	}
	require.Equal(t, 3, *resp.JSON200.Data[3].Limits.MaxPendingTasks)

	t.Run("pages of 2", func(t *testing.T) {
		var seen []uuid.UUID
		params := &openapi.ListTenantsParams{Limit: ptr(2)}
		for range len(tenants) + 1 {
			page, err := admin.ListTenantsWithResponse(ctx, params)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, page.StatusCode(), "body: %s", page.Body)
			for _, s := range page.JSON200.Data {
				seen = append(seen, s.ID)
			}
			if page.JSON200.NextCursor == nil {
				break
			}
			params.Cursor = page.JSON200.NextCursor
		}
		want := make([]uuid.UUID, len(tenants))
		for i, tn := range tenants {
			want[i] = tn.ID
		}
		require.Equal(t, want, seen)
	})

	t.Run("bad parameters", func(t *testing.T) {
		for query, field := range map[string]string{"limit=0": "limit", "limit=501": "limit", "cursor=nope": "cursor"} {
			requireFieldProblem(t, h.do(http.MethodGet, "/v1/admin/tenants?"+query, adminToken, nil, nil), field)
		}
		requireProblem(t, h.do(http.MethodGet, "/v1/admin/tenants?limit=x", adminToken, nil, nil), http.StatusBadRequest)
	})
}

func TestListNodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	admin := h.client(adminToken)

	resp, err := admin.ListNodesWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Equal(t, openapi.NodeList{Data: []openapi.Node{}, Partitions: model.Partitions, UnownedPartitions: model.Partitions}, *resp.JSON200,
		"no node runs: nobody sends")

	// Two nodes share the partitions, but for ten nobody holds.
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, node := range []uuid.UUID{a, b, a, b} {
		_, err := h.DB.Heartbeat(ctx, node, "host/"+node.String()[:8], time.Minute)
		require.NoError(t, err)
	}
	h.exec(`UPDATE partitions SET owner = NULL, lease_expires_at = NULL WHERE id >= 246`)

	resp, err = admin.ListNodesWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	got := resp.JSON200
	require.Equal(t, model.Partitions, got.Partitions)
	require.Equal(t, 10, got.UnownedPartitions)
	require.Len(t, got.Data, 2)
	require.Equal(t, []uuid.UUID{a, b}, []uuid.UUID{got.Data[0].ID, got.Data[1].ID}, "oldest first")
	require.Equal(t, "host/"+a.String()[:8], got.Data[0].Name)
	held := map[int]bool{}
	for _, n := range got.Data {
		require.True(t, n.ExpiresAt.After(n.HeartbeatAt))
		for i, p := range n.Partitions {
			if i > 0 {
				require.Less(t, n.Partitions[i-1], p, "ascending")
			}
			require.False(t, held[p], "partition %d held twice", p)
			held[p] = true
		}
	}
	require.Len(t, held, model.Partitions-10)
}

// TestListTasksByURLAndKey: the url filter lists tasks whose URL starts with
// the text given, taken literally; idempotency_key the task created with it.
func TestListTasksByURLAndKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn, other := h.createTenant("acme"), h.createTenant("other")
	urls := []string{
		"https://example.com/a_1",
		"https://example.com/ab1",
		"https://example.com/a%251", // a%1 once decoded: the % is the URL's
		"https://EXAMPLE.com/a_1",
		"https://example.net/",
	}
	ids := make([]uuid.UUID, len(urls))
	for i, u := range urls {
		resp := h.postTask(tn, `{"url": "`+u+`", "delay": "1h"}`, "key-"+u)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		var task openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &task))
		ids[i] = task.ID
		// The same, another tenant's.
		require.Equal(t, http.StatusCreated, h.postTask(other, `{"url": "`+u+`", "delay": "1h"}`, "key-"+u).Status)
	}
	h.exec(`UPDATE tasks SET status = 'dead' WHERE id = $1`, ids[1])
	newestFirst := func(idx ...int) []uuid.UUID {
		out := []uuid.UUID{}
		for i := len(idx) - 1; i >= 0; i-- {
			out = append(out, ids[idx[i]])
		}
		return out
	}

	tests := []struct {
		name  string
		query string
		want  []uuid.UUID
	}{
		{"a host", "url=" + url.QueryEscape("https://example.com/"), newestFirst(0, 1, 2)},
		{"_ taken literally", "url=" + url.QueryEscape("https://example.com/a_"), newestFirst(0)},
		{"% taken literally", "url=" + url.QueryEscape("https://example.com/a%"), newestFirst(2)},
		{"a whole URL", "url=" + url.QueryEscape(urls[4]), newestFirst(4)},
		{"case and all", "url=" + url.QueryEscape("https://EXAMPLE.com/"), newestFirst(3)},
		{"no match", "url=" + url.QueryEscape("https://example.org/"), []uuid.UUID{}},
		{"with a status", "status=dead&url=" + url.QueryEscape("https://example.com/"), newestFirst(1)},
		{"idempotency key", "idempotency_key=" + url.QueryEscape("key-"+urls[2]), newestFirst(2)},
		{"unknown idempotency key", "idempotency_key=nothing", []uuid.UUID{}},
		{"key and url apart", "idempotency_key=" + url.QueryEscape("key-"+urls[2]) + "&url=" + url.QueryEscape("https://example.net/"),
			[]uuid.UUID{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var list openapi.TaskList
			require.NoError(t, json.Unmarshal([]byte(h.get("/v1/tasks?"+tt.query, tn.APIKey)), &list))
			require.Equal(t, tt.want, taskIDs(list.Data))

			var paged []uuid.UUID
			query := tt.query + "&limit=1"
			for range len(urls) + 1 {
				var page openapi.TaskList
				require.NoError(t, json.Unmarshal([]byte(h.get("/v1/tasks?"+query, tn.APIKey)), &page))
				paged = append(paged, taskIDs(page.Data)...)
				if page.NextCursor == nil {
					break
				}
				query = tt.query + "&limit=1&cursor=" + *page.NextCursor
			}
			require.Equal(t, tt.want, append([]uuid.UUID{}, paged...), "pages keep the filters")
		})
	}

	t.Run("the generated client", func(t *testing.T) {
		t.Parallel()
		resp, err := tn.Client.ListTasksWithResponse(context.Background(), &openapi.ListTasksParams{URL: ptr("https://example.com/a_")})
		require.NoError(t, err)
		require.Equal(t, newestFirst(0), taskIDs(resp.JSON200.Data))
	})

	t.Run("bad parameters", func(t *testing.T) {
		t.Parallel()
		for query, field := range map[string]string{
			"url=":                                "url",
			"url=" + strings.Repeat("a", 2049):    "url",
			"url=https%3A%2F%2Fexample.com%2F%00": "url",
			"url=%FF":                             "url",
			"idempotency_key=":                    "idempotency_key",
			"idempotency_key=" + strings.Repeat("k", 256): "idempotency_key",
			"idempotency_key=a%00b":                       "idempotency_key",
		} {
			requireFieldProblem(t, h.do(http.MethodGet, "/v1/tasks?"+query, tn.APIKey, nil, nil), field)
		}
	})
}
