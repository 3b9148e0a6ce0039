package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/openapi"
)

// createPortalLink creates a link for tn with POST /v1/portal-links and
// returns it with its token, read from the URL's fragment.
func (h *harness) createPortalLink(tn tenant, body string) (openapi.PortalLinkCreated, string) {
	h.t.Helper()
	resp := h.do(http.MethodPost, "/v1/portal-links", tn.APIKey, strings.NewReader(body), nil)
	require.Equal(h.t, http.StatusCreated, resp.Status, "create portal link: %s", resp.Body)
	var link openapi.PortalLinkCreated
	require.NoError(h.t, json.Unmarshal(resp.Body, &link))
	_, token, ok := strings.Cut(link.URL, "/portal/#")
	require.True(h.t, ok, "url %s", link.URL)
	return link, token
}

// TestPortalLinks: a link is created for a label, with its URL shown once
// (the token in the fragment); lists show live links without their token;
// bad requests are refused field by field.
func TestPortalLinks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")

	resp := h.do(http.MethodPost, "/v1/portal-links", tn.APIKey,
		strings.NewReader(`{"label": "customer:42", "expires_in": "2h", "name": "Acme Corp", "description": "Deliveries to Acme"}`), nil)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	var link openapi.PortalLinkCreated
	require.NoError(t, json.Unmarshal(resp.Body, &link))
	require.Equal(t, "customer:42", link.Label)
	require.Equal(t, "Acme Corp", link.Name)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), link.ExpiresAt, time.Minute)
	require.Regexp(t, `^`+h.URL+`/portal/#hwpl_[a-z2-7]{26}_[a-z2-7]{32}$`, link.URL)
	token := link.URL[strings.Index(link.URL, "#")+1:]

	other, _ := h.createPortalLink(tn, `{"label": "customer:43"}`)
	require.WithinDuration(t, time.Now().Add(time.Hour), other.ExpiresAt, time.Minute, "an hour by default")
	list := h.get("/v1/portal-links", tn.APIKey)
	require.NotContains(t, list, strings.TrimPrefix(token, "hwpl_")[27:], "a list never shows a token")
	var links openapi.PortalLinkList
	require.NoError(t, json.Unmarshal([]byte(list), &links))
	require.Len(t, links.Data, 2)
	require.Equal(t, other.ID, links.Data[0].ID, "newest first")
	require.Equal(t, link.ID, links.Data[1].ID)
	var page openapi.PortalLinkList
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal-links?limit=1", tn.APIKey)), &page))
	require.Len(t, page.Data, 1)
	require.NotNil(t, page.NextCursor)
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal-links?limit=1&cursor="+*page.NextCursor, tn.APIKey)), &page))
	require.Equal(t, link.ID, page.Data[0].ID)

	// Another tenant sees none of them, and cannot revoke them.
	b := h.createTenant("b")
	require.JSONEq(t, `{"data": []}`, h.get("/v1/portal-links", b.APIKey))
	requireProblem(t, h.do(http.MethodDelete, "/v1/portal-links/"+link.ID.String(), b.APIKey, nil, nil), http.StatusNotFound)

	for body, field := range map[string]string{
		`{}`:                                     "label",
		`{"label": "customer"}`:                  "label",
		`{"label": "Customer:42"}`:               "label",
		`{"label": ":42"}`:                       "label",
		`{"label": "a:1", "expires_in": "721h"}`: "expires_in",
		`{"label": "a:1", "expires_in": "-1h"}`:  "expires_in",
		`{"label": "a:1", "expires_in": "soon"}`: "expires_in",
		`{"label": "a:1", "name": "` + strings.Repeat("n", 101) + `"}`:        "name",
		`{"label": "a:1", "description": "` + strings.Repeat("d", 501) + `"}`: "description",
		`{"label": "a:1", "token": "hwpl_mine"}`:                              "token",
	} {
		requireFieldProblem(t, h.do(http.MethodPost, "/v1/portal-links", tn.APIKey, strings.NewReader(body), nil), field)
	}

	// A link never outlives the key that made it.
	short := h.createKey(tn, `{"name": "short", "expires_at": "`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	resp = h.do(http.MethodPost, "/v1/portal-links", short.APIKey, strings.NewReader(`{"label": "a:1", "expires_in": "2h"}`), nil)
	requireFieldProblem(t, resp, "expires_in")

	// Revoked: gone from the list, the same answer twice.
	revoked := h.do(http.MethodDelete, "/v1/portal-links/"+link.ID.String(), tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, revoked.Status, "body: %s", revoked.Body)
	var gone openapi.PortalLink
	require.NoError(t, json.Unmarshal(revoked.Body, &gone))
	require.NotNil(t, gone.RevokedAt)
	again := h.do(http.MethodDelete, "/v1/portal-links/"+link.ID.String(), tn.APIKey, nil, nil)
	require.Equal(t, string(revoked.Body), string(again.Body))
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal-links", tn.APIKey)), &links))
	require.Len(t, links.Data, 1)
	require.Equal(t, other.ID, links.Data[0].ID)
	requireProblem(t, h.do(http.MethodDelete, "/v1/portal-links/"+uuid.NewString(), tn.APIKey, nil, nil), http.StatusNotFound)

	audit := h.get("/v1/audit", tn.APIKey)
	require.Contains(t, audit, `"portal_link.created"`)
	require.Contains(t, audit, `"portal_link.revoked"`)
	require.NotContains(t, audit, strings.TrimPrefix(token, "hwpl_")[27:], "the audit log never holds a token")
}

// TestPortalOfferedOrigin: a link's URL takes the configured public URL
// when there is one.
func TestPortalOfferedOrigin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.PublicURL = "https://hooks.example.com/" })
	link, _ := h.createPortalLink(h.createTenant("acme"), `{"label": "customer:42"}`)
	require.True(t, strings.HasPrefix(link.URL, "https://hooks.example.com/portal/#hwpl_"), link.URL)
}

// TestPortalShowsOnlyItsLabel: a token for label A lists A's tasks only, in
// the portal's shape (no headers, labels, query string or keys), reads one
// with its attempts, and gets for a task of label B, of no label or of
// another tenant the very answer an id that names nothing gets.
func TestPortalShowsOnlyItsLabel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn, other := h.createTenant("acme"), h.createTenant("other")
	_, tokenA := h.createPortalLink(tn, `{"label": "customer:a", "name": "Customer A"}`)
	_, tokenB := h.createPortalLink(tn, `{"label": "customer:b"}`)

	a1 := h.createTask(tn, `{"url": "https://a.example/hook?secret=s3cr3t&sig=frag", "delay": "1h", "headers": {"Authorization": "Bearer receiver-key"},
		"labels": {"customer": "a", "team": "payments"}, "body": "{\"for\": \"a\"}"}`)
	a2 := h.createTask(tn, `{"url": "https://a.example/hook", "delay": "2h", "labels": {"customer": "a"}}`)
	b1 := h.createTask(tn, `{"url": "https://b.example/hook", "delay": "1h", "labels": {"customer": "b"}}`)
	none := h.createTask(tn, `{"url": "https://c.example/hook", "delay": "1h"}`)
	theirs := h.createTask(other, `{"url": "https://a.example/hook", "delay": "1h", "labels": {"customer": "a"}}`)
	finishForReplay(h, a1.ID, "dead", 2, 500, ptr("receiver answered 500 Internal Server Error"))
	started := h.Clock.Now()
	h.exec(`INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body, response_headers)
		VALUES ($1, 1, $2, 40, 503, 'receiver answered 503', 'retry', 'busy', '{"X-Request-Id": "r1"}'),
		       ($1, 2, $3, 35, 500, 'receiver answered 500 Internal Server Error', 'fail', 'broken', NULL)`,
		a1.ID, started, started.Add(time.Second))

	list := h.get("/v1/portal/tasks", tokenA)
	for _, leak := range []string{"receiver-key", "Authorization", "s3cr3t", "frag", "payments", "team", b1.ID.String(), none.ID.String(),
		theirs.ID.String(), tn.ID.String()} {
		require.NotContains(t, list, leak)
	}
	var page openapi.PortalTaskList
	require.NoError(t, json.Unmarshal([]byte(list), &page))
	require.Equal(t, "customer:a", page.Label)
	require.Equal(t, "Customer A", page.Name)
	require.Equal(t, []uuid.UUID{a2.ID, a1.ID}, portalTaskIDs(page.Data), "the label's tasks, newest first")
	require.Equal(t, "https://a.example/hook", page.Data[1].URL, "no query, no fragment")
	require.Equal(t, openapi.TaskStatusDead, page.Data[1].Status)

	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal/tasks?status=dead", tokenA)), &page))
	require.Equal(t, []uuid.UUID{a1.ID}, portalTaskIDs(page.Data))
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal/tasks?limit=1", tokenA)), &page))
	require.Equal(t, []uuid.UUID{a2.ID}, portalTaskIDs(page.Data))
	require.NotNil(t, page.NextCursor)
	var last openapi.PortalTaskList
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal/tasks?limit=1&cursor="+*page.NextCursor, tokenA)), &last))
	require.Equal(t, []uuid.UUID{a1.ID}, portalTaskIDs(last.Data))
	require.Nil(t, last.NextCursor)
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/portal/tasks", tokenB)), &page))
	require.Equal(t, []uuid.UUID{b1.ID}, portalTaskIDs(page.Data), "label B's link lists B's task only")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/portal/tasks?limit=101", tokenA, nil, nil), "limit")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/portal/tasks?status=lost", tokenA, nil, nil), "status")

	detail := h.get("/v1/portal/tasks/"+a1.ID.String(), tokenA)
	for _, leak := range []string{"receiver-key", "Authorization", "s3cr3t", "payments", "X-Request-Id", "headers", "labels"} {
		require.NotContains(t, detail, leak)
	}
	var task openapi.PortalTaskDetail
	require.NoError(t, json.Unmarshal([]byte(detail), &task))
	require.Equal(t, `{"for": "a"}`, task.Body)
	require.False(t, task.MoreAttempts)
	require.Len(t, task.AttemptList, 2)
	require.Equal(t, 1, task.AttemptList[0].Attempt)
	require.Equal(t, "busy", *task.AttemptList[0].ResponseBody)
	require.Equal(t, 500, *task.AttemptList[1].StatusCode)
	require.Equal(t, openapi.AttemptOutcomeFail, task.AttemptList[1].Outcome)

	missing := uuid.Must(uuid.NewV7())
	nothing := requireProblem(t, h.do(http.MethodGet, "/v1/portal/tasks/"+missing.String(), tokenA, nil, nil), http.StatusNotFound)
	for _, id := range []uuid.UUID{b1.ID, none.ID, theirs.ID} {
		resp := h.do(http.MethodGet, "/v1/portal/tasks/"+id.String(), tokenA, nil, nil)
		p := requireProblem(t, resp, http.StatusNotFound)
		require.Equal(t, nothing.Type, p.Type)
		require.Equal(t, strings.ReplaceAll(nothing.Detail, missing.String(), "<id>"), strings.ReplaceAll(p.Detail, id.String(), "<id>"))
	}
	requireProblem(t, h.do(http.MethodGet, "/v1/portal/tasks/"+a1.ID.String(), tokenB, nil, nil), http.StatusNotFound)
}

// TestPortalTokenOpensNothingElse: every operation but the portal's refuses
// a portal token with 401, whatever its security (tenant key, admin token,
// session), and signing in with one fails; the portal's operations refuse
// every credential but a portal token: an API key, the admin token, a
// dashboard session.
func TestPortalTokenOpensNothingElse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.AuthFailures.Max = 100_000 })
	tn := h.createTenant("acme")
	task := h.createTask(tn, `{"url": "https://a.example/hook", "delay": "1h", "labels": {"customer": "a"}}`)
	_, token := h.createPortalLink(tn, `{"label": "customer:a"}`)
	params := map[string]string{"id": task.ID.String(), "key_id": unknownKeyID, "name": "free", "key": "k"}
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/portal/tasks/"+task.ID.String(), token, nil, nil).Status)

	before := h.snapshot(tn)
	checked := 0
	for _, op := range specOperations(t) {
		if op.Security == "" || op.Security == "portalToken" {
			continue
		}
		t.Run(op.ID, func(t *testing.T) {
			requireUnauthorized(t, h.call(op, fillPath(t, op.Path, params), token, `{"label": "customer:b"}`, nil))
		})
		checked++
	}
	require.Greater(t, checked, 50, "every secured operation of the document")
	_, resp := h.signIn(`{"api_key":"` + token + `"}`)
	requireUnauthorized(t, resp)
	require.Equal(t, before, h.snapshot(tn), "a refused call changed something")

	s, _ := h.signIn(`{"api_key":"` + tn.APIKey + `"}`)
	for _, op := range operationsSecuredBy(t, "portalToken") {
		path := fillPath(t, op.Path, params)
		for _, credential := range []string{tn.APIKey, adminToken, "hw_" + token[len("hwpl_"):]} {
			requireUnauthorized(t, h.call(op, path, credential, "", nil))
		}
		requireUnauthorized(t, h.as(s, true, op.Method, path, ""))
	}
}

// TestPortalTokenEnds: a revoked link, an expired link, a wrong secret, a
// malformed token and a link of a suspended tenant all answer 401, the
// revocation from the very next call.
func TestPortalTokenEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.AuthFailures.Max = 100_000 })
	tn := h.createTenant("acme")
	revoked, revokedToken := h.createPortalLink(tn, `{"label": "customer:a"}`)
	expired, expiredToken := h.createPortalLink(tn, `{"label": "customer:a"}`)
	_, liveToken := h.createPortalLink(tn, `{"label": "customer:a"}`)
	for _, token := range []string{revokedToken, expiredToken, liveToken} {
		require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/portal/tasks", token, nil, nil).Status)
	}
	require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/portal-links/"+revoked.ID.String(), tn.APIKey, nil, nil).Status)
	h.exec(`UPDATE portal_links SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)

	wrongSecret := liveToken[:len(liveToken)-4] + "aaaa"
	if wrongSecret == liveToken {
		wrongSecret = liveToken[:len(liveToken)-4] + "bbbb"
	}
	for name, token := range map[string]string{
		"revoked": revokedToken, "expired": expiredToken, "wrong secret": wrongSecret,
		"unknown link": "hwpl_" + strings.Repeat("a", 26) + "_" + strings.Repeat("b", 32),
		"malformed":    "hwpl_abc", "upper case": strings.ToUpper(liveToken), "empty secret": liveToken[:len("hwpl_")+27],
	} {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/v1/portal/tasks", "/v1/portal/tasks/" + uuid.NewString()} {
				requireUnauthorized(t, h.do(http.MethodGet, path, token, nil, nil))
			}
		})
	}
	requireUnauthorized(t, h.do(http.MethodGet, "/v1/portal/tasks", "", nil, nil))

	require.Equal(t, http.StatusOK, h.do(http.MethodPost, "/v1/admin/tenants/"+tn.ID.String()+"/suspend", adminToken, nil, nil).Status)
	requireUnauthorized(t, h.do(http.MethodGet, "/v1/portal/tasks", liveToken, nil, nil))
}

func portalTaskIDs(tasks []openapi.PortalTask) []uuid.UUID {
	out := make([]uuid.UUID, len(tasks))
	for i := range tasks {
		out[i] = tasks[i].ID
	}
	return out
}
