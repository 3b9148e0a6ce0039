package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/openapi"
)

// listBodyBytes is the bound on a page's bodies the tests below run with:
// two 4,000-byte bodies fit in it, a third does not.
const listBodyBytes = 10_000

// listed is one item of a list answer: its id and, when the answer carries
// it, its body.
type listed struct {
	ID     string           `json:"id"`
	Body   *string          `json:"body"`
	Report *json.RawMessage `json:"report"`
}

// listPage is a list answer read as sent.
type listPage struct {
	Data       []listed `json:"data"`
	NextCursor *string  `json:"next_cursor"`
}

// walk reads every page of a list from path with query q, following
// next_cursor, and returns the pages.
func (h *harness) walk(tn tenant, path string, q url.Values) []listPage {
	h.t.Helper()
	var pages []listPage
	for range 100 {
		resp := h.do(http.MethodGet, path+"?"+q.Encode(), tn.APIKey, nil, nil)
		require.Equal(h.t, http.StatusOK, resp.Status, "body: %.300s", resp.Body)
		require.Equal(h.t, "application/json", resp.Header.Get("Content-Type"))
		var page listPage
		require.NoError(h.t, json.Unmarshal(resp.Body, &page), "answer: %.300s", resp.Body)
		pages = append(pages, page)
		if page.NextCursor == nil {
			return pages
		}
		q.Set("cursor", *page.NextCursor)
	}
	h.t.Fatalf("%s: no last page after 100", path)
	return nil
}

// TestListBodies: lists carry bodies only when asked with include=body, and
// then no more than the bound of bodies a page (unless its one item alone
// passes it): a page is cut short, with a cursor the walk continues from,
// and the walk meets every item once. An include the API does not know is
// refused, not ignored.
func TestListBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Limits.ListBodyBytes = listBodyBytes })
	acme := h.createTenant("acme")

	// Newest first, as the lists give them: a body over the bound alone, an
	// empty one, and six of 4,000 bytes full of '<', which JSON spells in six.
	sizes := []int{4000, 4000, 4000, 4000, 4000, 0, 12_000, 4000}
	bodies := map[string]map[string]string{"/v1/tasks": {}, "/v1/schedules": {}}
	for i := len(sizes) - 1; i >= 0; i-- {
		body := strings.Repeat("<", sizes[i])
		task := h.createTask(acme, taskBody(t, map[string]any{"url": "https://example.com/t", "delay": "1h", "body": body}))
		bodies["/v1/tasks"][task.ID.String()] = body
		sc := h.createSchedule(acme, taskBody(t, map[string]any{"cron": "0 9 * * *", "url": "https://example.com/s", "body": body}))
		bodies["/v1/schedules"][sc.ID.String()] = body
	}

	for _, path := range []string{"/v1/tasks", "/v1/schedules"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			want := bodies[path]

			// Without include, no item has a body: one page of all of them.
			plain := h.walk(acme, path, url.Values{"limit": {"500"}})
			require.Len(t, plain, 1)
			require.Len(t, plain[0].Data, len(sizes))
			var order []string
			for _, item := range plain[0].Data {
				require.Nil(t, item.Body, "%s: no body unless asked", item.ID)
				require.Nil(t, item.Report)
				order = append(order, item.ID)
			}
			raw := h.do(http.MethodGet, path+"?limit=500", acme.APIKey, nil, nil)
			require.NotContains(t, string(raw.Body), `\u003c`, "not a byte of a body")

			// With it, pages of at most the bound, cut short with a cursor.
			pages := h.walk(acme, path, url.Values{"limit": {"500"}, "include": {"body"}})
			var (
				walked []string
				counts []int
			)
			for i, page := range pages {
				total := 0
				for _, item := range page.Data {
					require.Equal(t, want[item.ID], strings.Repeat("<", len(want[item.ID])))
					if want[item.ID] == "" {
						require.Nil(t, item.Body, "an empty body is left out")
					} else {
						require.NotNil(t, item.Body, "%s: asked for bodies", item.ID)
						require.Equal(t, want[item.ID], *item.Body)
						total += len(*item.Body)
					}
					walked = append(walked, item.ID)
				}
				counts = append(counts, len(page.Data))
				require.True(t, total <= listBodyBytes || len(page.Data) == 1,
					"page %d holds %d bytes of bodies in %d items", i, total, len(page.Data))
			}
			require.Equal(t, order, walked, "every item once, in order")
			// 4000+4000 | 4000+4000 | 4000+0 | 12000 alone | 4000.
			require.Equal(t, []int{2, 2, 2, 1, 1}, counts)

			// A limit under the bound pages as before.
			small := h.walk(acme, path, url.Values{"limit": {"1"}, "include": {"body"}})
			require.Len(t, small, len(sizes))
		})
	}

	t.Run("unknown include", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/v1/tasks", "/v1/schedules"} {
			for _, include := range []string{"bodies", "BODY", "body,headers", "headers", ""} {
				resp := h.do(http.MethodGet, path+"?include="+url.QueryEscape(include), acme.APIKey, nil, nil)
				require.Equal(t, http.StatusBadRequest, resp.Status, "%s include=%q: %s", path, include, resp.Body)
				require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
				var p openapi.Problem
				require.NoError(t, json.Unmarshal(resp.Body, &p))
				require.Equal(t, http.StatusBadRequest, p.Status)
				require.Len(t, p.Errors, 1, "%s include=%q", path, include)
				require.Equal(t, "include", p.Errors[0].Field)
			}
		}
	})
}

// TestListBodiesInFlightBounded: lists with bodies reserve their bound of a
// node's budget while they answer, a tenant at most half of it, so that
// clients that ask for long pages and never read them cannot add up the
// per-answer bound: the tenant's next list with bodies gets 429 lists-busy
// while its first is stuck, another tenant's is still answered, and lists
// without bodies are never held back.
func TestListBodiesInFlightBounded(t *testing.T) {
	t.Parallel()
	// A page of 16 MB: four of the tasks below, 14.4 MB, more than the
	// socket buffers of a client that reads none of it can take, so its
	// answer stays unwritten.
	const bound = 16 << 20
	h := newHarness(t, func(c *api.Config) {
		c.Limits.ListBodyBytes = bound
		c.Limits.ListBytesInFlight = 2 * bound
	})
	acme, globex := h.createTenant("acme"), h.createTenant("globex")
	body := strings.Repeat("<", 600_000) // 3.6 MB once escaped, in the request too
	for range 6 {
		h.createTask(acme, taskBody(t, map[string]any{"url": "https://example.com/t", "delay": "1h", "body": body}))
	}
	h.createTask(globex, taskBody(t, map[string]any{"url": "https://example.com/t", "delay": "1h", "body": "hi"}))

	// A client that asks for a page with bodies and reads nothing past the
	// status line: its answer fills the socket's buffers and holds its
	// reservation. The status line says the answer has begun, and so that
	// the reservation is taken.
	u, err := url.Parse(h.URL)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	stuck := conn.(*net.TCPConn)
	defer stuck.Close()
	require.NoError(t, stuck.SetReadBuffer(16<<10))
	_, err = fmt.Fprintf(stuck, "GET /v1/tasks?include=body&limit=500 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, acme.APIKey)
	require.NoError(t, err)
	status, err := bufio.NewReaderSize(stuck, 16).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK\r\n", status)

	refused := h.do(http.MethodGet, "/v1/tasks?include=body&limit=1", acme.APIKey, nil, nil)
	require.Equal(t, http.StatusTooManyRequests, refused.Status, "the stuck list holds the tenant's half")
	require.Equal(t, "application/problem+json", refused.Header.Get("Content-Type"))
	require.Equal(t, "1", refused.Header.Get("Retry-After"))
	require.Contains(t, string(refused.Body), "lists-busy")

	other := h.do(http.MethodGet, "/v1/tasks?include=body", globex.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, other.Status, "another tenant's list is answered: %.300s", other.Body)
	plain := h.do(http.MethodGet, "/v1/tasks?limit=500", acme.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, plain.Status, "a list without bodies reserves nothing")

	// Once the stuck client goes, its reservation is given back.
	require.NoError(t, stuck.Close())
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := h.do(http.MethodGet, "/v1/tasks?include=body&limit=1", acme.APIKey, nil, nil)
		if resp.Status == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusTooManyRequests, resp.Status)
		require.True(t, time.Now().Before(deadline), "the reservation was never given back")
	}
}
