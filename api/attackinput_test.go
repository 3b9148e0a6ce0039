package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestAttackMalformedBodies: every endpoint that takes a body answers a
// body over its limit with 413, one that is not JSON or is nested beyond
// what the decoder follows with 400, a known field of the wrong type and an
// unknown field with 422 naming the field; none of them changes anything.
func TestAttackMalformedBodies(t *testing.T) {
	t.Parallel()
	const maxBody = 16 << 10
	h := newHarness(t, func(c *api.Config) { c.Limits.MaxBody = maxBody }, withSignup(tenants.SignupOpen, api.SignupLimit{}))
	tn := h.createTenant("acme")
	task := h.createTask(tn, `{"url": "https://example.com/x", "delay": "1h"}`)
	sched := h.createSchedule(tn, scheduleBody(t, nil))
	// The requests' limits: a single call's (see api.New), and the batch
	// route's own.
	const singleLimit, batchLimit = 4*maxBody + 64<<10, 32 << 20

	cases := map[string]struct {
		params    map[string]string
		token     string
		limit     int
		wrongType string // a known field with a value of the wrong type
		field     string
	}{
		"createTenant":        {nil, adminToken, singleLimit, `{"name": 42}`, "name"},
		"updateTenant":        {map[string]string{"id": tn.ID.String()}, adminToken, singleLimit, `{"retention": 42}`, "retention"},
		"createTenantKey":     {map[string]string{"id": tn.ID.String()}, adminToken, singleLimit, `{"expires_at": 5}`, "expires_at"},
		"createTask":          {nil, tn.APIKey, singleLimit, `{"url": 42}`, "url"},
		"createTasksBatch":    {nil, tn.APIKey, batchLimit, `{"tasks": "x"}`, "tasks"},
		"cancelTasks":         {nil, tn.APIKey, singleLimit, `{"status": 42}`, "status"},
		"rescheduleTask":      {map[string]string{"id": task.ID.String()}, tn.APIKey, singleLimit, `{"delay": 30}`, "delay"},
		"createSchedule":      {nil, tn.APIKey, singleLimit, `{"cron": 42, "url": "https://example.com/x"}`, "cron"},
		"createKey":           {nil, tn.APIKey, singleLimit, `{"scopes": "tasks:read"}`, "scopes"},
		"rotateSigningSecret": {nil, tn.APIKey, singleLimit, `{"grace": 24}`, "grace"},
		"replayTask":          {map[string]string{"id": task.ID.String()}, tn.APIKey, singleLimit, `{"url": 42}`, "url"},
		"updateSchedule":      {map[string]string{"id": sched.ID.String()}, tn.APIKey, singleLimit, `{"cron": 42}`, "cron"},
		"replayTasks":         {nil, tn.APIKey, singleLimit, `{"dry_run": "yes"}`, "dry_run"},
		"putTopic":            {map[string]string{"name": "orders"}, tn.APIKey, singleLimit, `{"endpoints": 42}`, "endpoints"},
		"putFlowLimit":        {map[string]string{"key": "customer-1"}, tn.APIKey, singleLimit, `{"rate": "ten"}`, "rate"},
		"putPlan":             {map[string]string{"name": "free"}, adminToken, singleLimit, `{"tasks_per_day": "ten"}`, "tasks_per_day"},
		"signIn":              {nil, "", singleLimit, `{"api_key": 42}`, "api_key"},
		"signUp":              {nil, "", singleLimit, `{"name": 42}`, "name"},
		"createInvite":        {nil, adminToken, singleLimit, `{"expires_in": 5}`, "expires_in"},
		"createPortalLink":    {nil, tn.APIKey, singleLimit, `{"label": 42}`, "label"},
		"updateSettings":      {nil, tn.APIKey, singleLimit, `{"operations_url": 42}`, "operations_url"},
		"pauseTarget":         {nil, tn.APIKey, singleLimit, `{"target": 42}`, "target"},
		"resumeTarget":        {nil, tn.APIKey, singleLimit, `{"target": 42}`, "target"},
	}
	// Five times the depth encoding/json follows, and within the limit.
	const depth = 50_000
	deep := `{"a": ` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	require.Less(t, len(deep), singleLimit)

	auditBefore := h.get("/v1/admin/audit", adminToken)
	before := h.snapshot(tn, "/v1/tasks/"+task.ID.String(), "/v1/schedules/"+sched.ID.String())
	for _, op := range specOperations(t) {
		if !op.HasBody {
			continue
		}
		tc, ok := cases[op.ID]
		require.True(t, ok, "%s %s takes a body: give this test its limit and a field to mistype", op.Method, op.Path)
		path := fillPath(t, op.Path, tc.params)
		t.Run(op.ID, func(t *testing.T) {
			t.Parallel()
			huge := `{"a": "` + strings.Repeat("a", tc.limit) + `"}`
			p := requireProblem(t, h.call(op, path, tc.token, huge, nil), http.StatusRequestEntityTooLarge)
			require.Equal(t, problemTypePrefix+"too-large", p.Type)

			for _, body := range []string{`name=acme`, `{"a": `, `[]`, deep} {
				p := requireProblem(t, h.call(op, path, tc.token, body, nil), http.StatusBadRequest)
				require.Equal(t, problemTypePrefix+"malformed-json", p.Type, "body %.20q", body)
				if body == deep {
					require.Contains(t, p.Detail, "exceeded max depth")
				}
			}

			requireFieldProblem(t, h.call(op, path, tc.token, tc.wrongType, nil), tc.field)
			requireFieldProblem(t, h.call(op, path, tc.token, `{"no_such_field": 1}`, nil), "no_such_field")
		})
	}
	t.Cleanup(func() {
		require.Equal(t, auditBefore, h.get("/v1/admin/audit", adminToken), "a refused body changed something")
		require.Equal(t, before, h.snapshot(tn, "/v1/tasks/"+task.ID.String(), "/v1/schedules/"+sched.ID.String()))
	})
}

// requireRefusedEverywhere checks that the task members given are refused
// with 422 naming field by each way a tenant hands hookwheel a webhook to
// send: a task, an item of a batch, and a schedule.
func requireRefusedEverywhere(t *testing.T, h *harness, tn tenant, members map[string]any, field string) {
	t.Helper()
	requireFieldProblem(t, h.postTask(tn, taskBody(t, members), ""), field)
	requireItemProblem(t, h.batch(tn, taskBody(t, members))[0], 0, http.StatusUnprocessableEntity, field)
	requireFieldProblem(t, h.postSchedule(tn, scheduleBody(t, members)), field)
}

// requireAcceptedEverywhere is requireRefusedEverywhere's opposite.
func requireAcceptedEverywhere(t *testing.T, h *harness, tn tenant, members map[string]any) {
	t.Helper()
	resp := h.postTask(tn, taskBody(t, members), "")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	requireItemCreated(t, h.batch(tn, taskBody(t, members))[0])
	h.createSchedule(tn, scheduleBody(t, members))
}

// TestAttackTaskHeaderInjection: a task's headers cannot smuggle a header
// line (CR, LF), set what hookwheel sets (the signature, its own headers,
// Host, Content-Length), or manage the connection, in any letter case, or
// with underscores standing for hyphens (which CGI-style servers read as
// the same header); on every route that takes headers. The cases
// TestCreateTaskValidation already tries on POST /v1/tasks are not repeated.
func TestAttackTaskHeaderInjection(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	refused := []struct{ name, value string }{
		{"X-A\r\nX-Injected", "1"},
		{"X-A\nX-Injected", "1"},
		{"X-A\r", "1"},
		{"X-A:", "1"},
		{"", "1"},
		{"X-Ä", "1"},
		{"X-Test", "a\r\nX-Injected: 1"},
		{"X-Test", "a\rb"},
		{"X-Test", "a\x7fb"},
		{"HOST", "evil.example"},
		{"content-length", "0"},
		{"CoNtEnT-LeNgTh", "0"},
		{"Content_Length", "0"},
		{"Transfer_Encoding", "chunked"},
		{"TE", "trailers"},
		{"Upgrade", "h2c"},
		{"Keep-Alive", "timeout=5"},
		{"Proxy-Authorization", "Basic eDp5"},
		{"WEBHOOK-ID", "forged"},
		{"Webhook-Timestamp", "0"},
		{"webhook_signature", "v1,forged"},
		{"HOOKWHEEL-SIGNATURE", "forged"},
		{"hookwheel-schedule-id", "forged"},
		{"Hookwheel_Attempt", "1"},
		{"idempotency_key", "forged"},
	}
	for _, tc := range refused {
		t.Run(strings.ToValidUTF8(tc.name+": "+tc.value, "?"), func(t *testing.T) {
			t.Parallel()
			requireRefusedEverywhere(t, h, tn, map[string]any{"headers": map[string]string{tc.name: tc.value}}, "headers."+tc.name)
		})
	}
	t.Run("ordinary headers", func(t *testing.T) {
		t.Parallel()
		requireAcceptedEverywhere(t, h, tn, map[string]any{"headers": map[string]string{
			"Authorization": "Bearer x", "X_Request_Id": "1", "X-Webhook-Id": "mine", "User-Agent": "mine",
		}})
	})
}

// TestAttackTaskURLTricks: the spellings of an internal address that URL
// parsers and resolvers accept are refused at creation on every route that
// takes a URL, as are credentials in the URL. The address checks themselves
// are netguard's (TestCheckURL); names that resolve to an internal address
// pass here and are refused when dialled (netguard's TestDialLocalhostName,
// e2e TestSSRFGuard).
func TestAttackTaskURLTricks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn := h.createTenant("acme")
	for _, url := range []string{
		"http://user:pass@example.com/",
		"http://example.com@127.0.0.1/",
		"http://example.com\\@127.0.0.1/",
		"http://127.0.0.1#@example.com/",
		"http://2130706433/",
		"http://0177.0.0.1/",
		"http://0x7f.1/",
		"http://127.1/",
		"http://0/",
		"http://0.0.0.0/",
		"http://127.0.0.1./",
		"http://[::]/",
		"http://[::1]/",
		"http://[fe80::1%25eth0]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:7f00:1]/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://[fd00:ec2::254]/",
		"http://100.100.100.200/",
		"http://localhost/",
		"http://LOCALHOST./",
		"http://api.localhost/",
		"http://ｌｏｃａｌｈｏｓｔ/",
		"http://１２７.０.０.１/",
	} {
		t.Run(url, func(t *testing.T) {
			t.Parallel()
			requireRefusedEverywhere(t, h, tn, map[string]any{"url": url}, "url")
		})
	}
	for _, url := range []string{"https://bücher.example/x", "http://1.1.1.1/", "http://[2606:4700::1111]/"} {
		t.Run("accepted "+url, func(t *testing.T) {
			t.Parallel()
			requireAcceptedEverywhere(t, h, tn, map[string]any{"url": url})
		})
	}
}
