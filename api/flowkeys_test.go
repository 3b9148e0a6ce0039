package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// putFlowLimit sets a flow key's limits and requires a 200 or 201,
// returning them.
func (h *harness) putFlowLimit(tn tenant, key, body string) openapi.FlowLimit {
	h.t.Helper()
	resp := h.do(http.MethodPut, "/v1/flow-keys/"+key, tn.APIKey, strings.NewReader(body), nil)
	require.Contains(h.t, []int{http.StatusOK, http.StatusCreated}, resp.Status, "put flow limit: %s", resp.Body)
	var l openapi.FlowLimit
	require.NoError(h.t, json.Unmarshal(resp.Body, &l))
	return l
}

func TestFlowKeyField(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("flow")

	keyed := h.createTask(tn, `{"url": "https://example.com/a", "flow_key": "customer-1042"}`)
	require.NotNil(t, keyed.FlowKey)
	require.Equal(t, "customer-1042", *keyed.FlowKey)
	require.Equal(t, keyed.FlowKey, h.getTask(tn, keyed.ID).FlowKey)
	bare := h.postTask(tn, `{"url": "https://example.com/b"}`, "")
	require.NotContains(t, rawKeys(t, bare.Body), "flow_key", "no key, no member")

	for _, key := range []string{"user@example.com", "a:b=c+d", "A.b_c-d", strings.Repeat("k", 255)} {
		created := h.createTask(tn, `{"url": "https://example.com/", "flow_key": "`+key+`"}`)
		require.Equal(t, key, *created.FlowKey)
	}
	for name, value := range map[string]string{
		"empty":         `""`,
		"too long":      `"` + strings.Repeat("k", 256) + `"`,
		"space":         `"a b"`,
		"slash":         `"a/b"`,
		"the default":   `"*"`,
		"brace":         `"a{b}"`,
		"hash":          `"a#b"`,
		"non-ASCII":     `"é"`,
		"not a string":  `42`,
		"control":       `"a\tb"`,
		"percent":       `"a%20b"`,
		"dot":           `"."`,
		"dots":          `"..."`,
		"question mark": `"a?b"`,
	} {
		t.Run(name, func(t *testing.T) {
			requireFieldProblem(t, h.postTask(tn, `{"url": "https://example.com/", "flow_key": `+value+`}`, ""), "flow_key")
		})
	}

	// A batch item's key is its own; a bad one fails that item alone.
	results := h.batch(tn, `{"url": "https://example.com/1", "flow_key": "k"}`, `{"url": "https://example.com/2", "flow_key": "a b"}`)
	require.NotNil(t, results[0].Task)
	require.Equal(t, "k", *results[0].Task.FlowKey)
	require.NotNil(t, results[1].Error)
	require.Equal(t, "flow_key", results[1].Error.Errors[0].Field)

	// A schedule's occurrences carry its key; a patch changes or removes it.
	s := h.createSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/", "flow_key": "nightly"}`)
	require.Equal(t, "nightly", *s.FlowKey)
	requireFieldProblem(t, h.postSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/", "flow_key": "a b"}`), "flow_key")
	require.Equal(t, "reports", *h.mustPatchSchedule(tn, s.ID, `{"flow_key": "reports"}`).FlowKey)
	require.Nil(t, h.mustPatchSchedule(tn, s.ID, `{"flow_key": null}`).FlowKey)
	requireFieldProblem(t, h.patchSchedule(tn, s.ID, `{"flow_key": ""}`), "flow_key")
}

func TestFlowLimitsAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn, other := h.createTenant("flow limits"), h.createTenant("other")

	resp := h.do(http.MethodPut, "/v1/flow-keys/customer-1", tn.APIKey, strings.NewReader(`{"rate": 100, "parallelism": 5}`), nil)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Equal(t, "/v1/flow-keys/customer-1", resp.Header.Get("Location"))
	var created openapi.FlowLimit
	require.NoError(t, json.Unmarshal(resp.Body, &created))
	require.Equal(t, "customer-1", created.Key)
	require.Equal(t, 100, created.Rate)
	require.Equal(t, "1s", created.Period, "the default period")
	require.Equal(t, 5, created.Parallelism)

	replaced := h.putFlowLimit(tn, "customer-1", `{"rate": 10, "period": "1m"}`)
	require.Equal(t, 10, replaced.Rate)
	require.Equal(t, "1m", replaced.Period)
	require.Zero(t, replaced.Parallelism, "replaced whole")
	require.Equal(t, created.CreatedAt, replaced.CreatedAt)

	var got openapi.FlowLimit
	require.NoError(t, json.Unmarshal([]byte(h.get("/v1/flow-keys/customer-1", tn.APIKey)), &got))
	require.Equal(t, replaced, got)
	requireProblem(t, h.do(http.MethodGet, "/v1/flow-keys/customer-1", other.APIKey, nil, nil), http.StatusNotFound)

	// The default for every key without its own is the key "*".
	def := h.putFlowLimit(tn, "*", `{"parallelism": 2}`)
	require.Equal(t, "*", def.Key)
	for _, key := range []string{"b", "a", "A"} {
		h.putFlowLimit(tn, key, `{"parallelism": 1}`)
	}
	// Listed in byte order, a page at a time.
	var keys []string
	path := "/v1/flow-keys?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		var page openapi.FlowLimitList
		require.NoError(t, json.Unmarshal([]byte(h.get(path, tn.APIKey)), &page))
		for _, l := range page.Data {
			keys = append(keys, l.Key)
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/flow-keys?limit=2&cursor=" + *page.NextCursor
	}
	require.Equal(t, []string{"*", "A", "a", "b", "customer-1"}, keys)
	require.JSONEq(t, `{"data": []}`, h.get("/v1/flow-keys", other.APIKey))

	resp = h.do(http.MethodDelete, "/v1/flow-keys/customer-1", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	var deleted openapi.FlowLimit
	require.NoError(t, json.Unmarshal(resp.Body, &deleted))
	require.Equal(t, replaced, deleted)
	requireProblem(t, h.do(http.MethodDelete, "/v1/flow-keys/customer-1", tn.APIKey, nil, nil), http.StatusNotFound)
	requireProblem(t, h.do(http.MethodGet, "/v1/flow-keys/customer-1", tn.APIKey, nil, nil), http.StatusNotFound)

	invalid := []struct {
		name, key, body, field string
	}{
		{"nothing limited", "k", `{}`, "rate"},
		{"both zero", "k", `{"rate": 0, "parallelism": 0}`, "rate"},
		{"negative rate", "k", `{"rate": -1}`, "rate"},
		{"rate too high", "k", `{"rate": 1000001}`, "rate"},
		{"fractional rate", "k", `{"rate": 1.5}`, "rate"},
		{"period too short", "k", `{"rate": 1, "period": "999ms"}`, "period"},
		{"period too long", "k", `{"rate": 1, "period": "25h"}`, "period"},
		{"period not a duration", "k", `{"rate": 1, "period": "soon"}`, "period"},
		{"period not whole milliseconds", "k", `{"rate": 1, "period": "1000500us"}`, "period"},
		{"period without a rate", "k", `{"parallelism": 1, "period": "1m"}`, "period"},
		{"negative parallelism", "k", `{"parallelism": -1}`, "parallelism"},
		{"parallelism too high", "k", `{"parallelism": 100001}`, "parallelism"},
		{"unknown field", "k", `{"rate": 1, "burst": 5}`, "burst"},
		{"bad key", "a%20b", `{"rate": 1}`, "key"},
		{"non-ASCII key", "%C3%A9", `{"rate": 1}`, "key"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.do(http.MethodPut, "/v1/flow-keys/"+tc.key, tn.APIKey, strings.NewReader(tc.body), nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "body: %s", resp.Body)
			require.Contains(t, string(resp.Body), `"field":"`+tc.field+`"`)
		})
	}
	for _, cursor := range []string{"!!!", "YSBi"} { // not base64; "a b", no key
		requireFieldProblem(t, h.do(http.MethodGet, "/v1/flow-keys?cursor="+cursor, tn.APIKey, nil, nil), "cursor")
	}
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/flow-keys/a%20b", tn.APIKey, nil, nil), "key")
}
