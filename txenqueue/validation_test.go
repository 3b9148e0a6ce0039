package txenqueue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
	"github.com/hookwheel/hookwheel/txenqueue"
)

// TestValidationMatchesTheAPI sends each task both to Insert and, as JSON,
// to POST /v1/tasks of an API server with a node's default bounds and SSRF
// guard: both accept it, with the same resolved fields, or both refuse it
// naming the same fields. The tenant's own settings (max_timeout, retry
// defaults, a granted private range) are read from the database by both.
// Refusals leave the application's transaction usable.
func TestValidationMatchesTheAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	tenantSvc := tenants.New(tenants.Config{Store: e.db, KeyCacheTTL: -1})
	_, err := tenantSvc.SetLimits(ctx, e.tenant, model.Limits{MaxTimeout: 2 * time.Minute}, model.ActorCLI)
	require.NoError(t, err)
	attempts := 5
	_, err = tenantSvc.SetRetryDefaults(ctx, e.tenant, model.RetryDefaults{MaxAttempts: &attempts}, model.ActorCLI)
	require.NoError(t, err)
	_, err = tenantSvc.SetTargetGrants(ctx, e.tenant, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}, model.ActorCLI)
	require.NoError(t, err)
	taskSvc, err := tasks.New(tasks.Config{Store: e.db})
	require.NoError(t, err)
	server, err := api.New(api.Config{Tasks: taskSvc, Tenants: tenantSvc, Guard: netguard.New(netguard.Config{}), Logger: quietLogger()})
	require.NoError(t, err)
	c := e.client(func(cfg *txenqueue.Config) { cfg.AllowPrivateTargets = false })

	const hook = "https://example.com/hook"
	now := time.Now()
	labels := map[string]string{}
	for i := range 33 {
		labels[string(rune('a'+i%26))+strings.Repeat("x", i)] = "v"
	}
	cases := []struct {
		name   string
		task   txenqueue.Task
		fields []string // nil: accepted
	}{
		{"plain", txenqueue.Task{URL: hook}, nil},
		{"every field", txenqueue.Task{
			URL: hook, Method: "PUT", Headers: map[string]string{"x-order": "42", "Authorization": "Bearer t"},
			Body: []byte(`{"order": 42}`), Delay: 90 * time.Second, Timeout: 90 * time.Second, MaxAttempts: 3,
			MinBackoff: 2 * time.Second, MaxBackoff: 10 * time.Minute, Labels: map[string]string{"team": "payments"},
			IdempotencyKey: "order-42",
		}, nil},
		{"ordering key and callbacks", txenqueue.Task{URL: hook, OrderingKey: "order-42",
			Callback: "https://example.com/done", FailureCallback: "https://example.com/failed"}, nil},
		{"ordering key too long", txenqueue.Task{URL: hook, OrderingKey: strings.Repeat("k", 256)}, []string{"ordering_key"}},
		{"flow key", txenqueue.Task{URL: hook, FlowKey: "customer-1042"}, nil},
		{"flow key with a space", txenqueue.Task{URL: hook, FlowKey: "customer 1042"}, []string{"flow_key"}},
		{"callback to a private address", txenqueue.Task{URL: hook, Callback: "http://127.0.0.1/done"}, []string{"callback"}},
		{"failure callback not http", txenqueue.Task{URL: hook, FailureCallback: "ftp://example.com/x"}, []string{"failure_callback"}},
		{"run_at at the horizon", txenqueue.Task{URL: hook, RunAt: now.Add(tasks.DefaultMaxScheduleAhead)}, nil},
		{"run_at past", txenqueue.Task{URL: hook, RunAt: now.Add(-time.Hour)}, nil},
		{"a range granted to the tenant", txenqueue.Task{URL: "http://10.20.0.5/x"}, nil},
		{"timeout at the tenant's max_timeout", txenqueue.Task{URL: hook, Timeout: 2 * time.Minute}, nil},
		{"retry at its bounds", txenqueue.Task{URL: hook, MaxAttempts: 100, MinBackoff: 100 * time.Millisecond, MaxBackoff: 168 * time.Hour}, nil},

		{"no url", txenqueue.Task{Method: "POST"}, []string{"url"}},
		{"ftp url", txenqueue.Task{URL: "ftp://example.com/x"}, []string{"url"}},
		{"relative url", txenqueue.Task{URL: "/hooks/x"}, []string{"url"}},
		{"url with credentials", txenqueue.Task{URL: "https://user:pass@example.com/x"}, []string{"url"}},
		{"url with a fragment", txenqueue.Task{URL: "https://example.com/x#y"}, []string{"url"}},
		{"url over 4096 characters", txenqueue.Task{URL: hook + strings.Repeat("a", 4096)}, []string{"url"}},
		{"loopback url", txenqueue.Task{URL: "http://127.0.0.1:8080/x"}, []string{"url"}},
		{"cloud metadata url", txenqueue.Task{URL: "http://169.254.169.254/latest"}, []string{"url"}},
		{"private url not granted", txenqueue.Task{URL: "http://10.21.0.5/x"}, []string{"url"}},
		{"method TRACE", txenqueue.Task{URL: hook, Method: "TRACE"}, []string{"method"}},
		{"method in lowercase", txenqueue.Task{URL: hook, Method: "post"}, []string{"method"}},
		{"header Host", txenqueue.Task{URL: hook, Headers: map[string]string{"Host": "evil.example"}}, []string{"headers.Host"}},
		{"header webhook_id", txenqueue.Task{URL: hook, Headers: map[string]string{"webhook_id": "x"}}, []string{"headers.webhook_id"}},
		{"header Hookwheel-Attempt", txenqueue.Task{URL: hook, Headers: map[string]string{"Hookwheel-Attempt": "1"}}, []string{"headers.Hookwheel-Attempt"}},
		{"header Idempotency-Key", txenqueue.Task{URL: hook, Headers: map[string]string{"Idempotency-Key": "k"}}, []string{"headers.Idempotency-Key"}},
		{"header Transfer-Encoding", txenqueue.Task{URL: hook, Headers: map[string]string{"Transfer-Encoding": "chunked"}}, []string{"headers.Transfer-Encoding"}},
		{"header value with a newline", txenqueue.Task{URL: hook, Headers: map[string]string{"X-Test": "a\nInjected: yes"}}, []string{"headers.X-Test"}},
		{"header twice in other letters", txenqueue.Task{URL: hook, Headers: map[string]string{"X-Token": "a", "x-token": "b"}}, []string{"headers.x-token"}},
		{"body not UTF-8", txenqueue.Task{URL: hook, Body: []byte("a\xff\xfeb")}, []string{"body"}},
		{"body over 1 MiB", txenqueue.Task{URL: hook, Body: bytes.Repeat([]byte("a"), tasks.DefaultMaxBody+1)}, []string{"body"}},
		{"run_at and delay", txenqueue.Task{URL: hook, RunAt: now.Add(time.Hour), Delay: time.Minute}, []string{"run_at"}},
		{"run_at beyond the horizon", txenqueue.Task{URL: hook, RunAt: now.Add(tasks.DefaultMaxScheduleAhead + time.Hour)}, []string{"run_at"}},
		{"negative delay", txenqueue.Task{URL: hook, Delay: -time.Second}, []string{"delay"}},
		{"delay beyond the horizon", txenqueue.Task{URL: hook, Delay: tasks.DefaultMaxScheduleAhead + time.Hour}, []string{"delay"}},
		{"timeout below 1s", txenqueue.Task{URL: hook, Timeout: 999 * time.Millisecond}, []string{"timeout"}},
		{"timeout above the tenant's max_timeout", txenqueue.Task{URL: hook, Timeout: 3 * time.Minute}, []string{"timeout"}},
		{"negative timeout", txenqueue.Task{URL: hook, Timeout: -time.Second}, []string{"timeout"}},
		{"max_attempts 101", txenqueue.Task{URL: hook, MaxAttempts: 101}, []string{"retry.max_attempts"}},
		{"negative max_attempts", txenqueue.Task{URL: hook, MaxAttempts: -1}, []string{"retry.max_attempts"}},
		{"min_backoff 10ms", txenqueue.Task{URL: hook, MinBackoff: 10 * time.Millisecond}, []string{"retry.min_backoff"}},
		{"max_backoff below min_backoff", txenqueue.Task{URL: hook, MinBackoff: 10 * time.Second, MaxBackoff: 5 * time.Second}, []string{"retry.max_backoff"}},
		{"max_backoff over a week", txenqueue.Task{URL: hook, MaxBackoff: 169 * time.Hour}, []string{"retry.max_backoff"}},
		{"label key in capitals", txenqueue.Task{URL: hook, Labels: map[string]string{"Team": "x"}}, []string{"labels.Team"}},
		{"33 labels", txenqueue.Task{URL: hook, Labels: labels}, []string{"labels"}},
		{"label value with a control character", txenqueue.Task{URL: hook, Labels: map[string]string{"team": "a\tb"}}, []string{"labels.team"}},
		{"idempotency key of 256 characters", txenqueue.Task{URL: hook, IdempotencyKey: strings.Repeat("k", 256)}, []string{"idempotency_key"}},
		{"idempotency key not UTF-8", txenqueue.Task{URL: hook, IdempotencyKey: "k\xff"}, []string{"idempotency_key"}},
		{"every field wrong at once", txenqueue.Task{URL: "ftp://example.com", Method: "FOO", Delay: -time.Second, Timeout: time.Millisecond},
			[]string{"url", "method", "delay", "timeout"}},
	}

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var accepted []*txenqueue.Inserted
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Insert(ctx, tx, tc.task)
			apiStatus, apiTask, apiFields := postTask(t, server, e.apiKey, tc.task)
			if tc.fields == nil {
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, apiStatus, "the API refused what Insert accepted: %v", apiFields)
				requireSameTask(t, apiTask, got)
				accepted = append(accepted, got)
				return
			}
			var invalid *txenqueue.ValidationError
			require.ErrorAs(t, err, &invalid)
			var fields []string
			for _, f := range invalid.Fields {
				require.NotEmpty(t, f.Message, "field %s", f.Field)
				require.Contains(t, err.Error(), f.Field+" "+f.Message)
				fields = append(fields, f.Field)
			}
			require.ElementsMatch(t, tc.fields, fields)
			require.Equal(t, http.StatusUnprocessableEntity, apiStatus)
			require.ElementsMatch(t, tc.fields, apiFields, "the API and Insert disagree")
		})
	}
	// The refusals left the transaction usable: the accepted tasks commit.
	require.NoError(t, tx.Commit(ctx))
	require.NotEmpty(t, accepted)
	for _, task := range accepted {
		require.True(t, e.taskExists(task.ID))
	}
}

// postTask sends task as the JSON of POST /v1/tasks and returns the status,
// the task created or the fields of the problem (Idempotency-Key reported
// as idempotency_key, as Insert names it).
func postTask(t *testing.T, server *api.Server, apiKey string, task txenqueue.Task) (int, *openapi.Task, []string) {
	t.Helper()
	m := map[string]any{}
	if task.URL != "" {
		m["url"] = task.URL
	}
	if task.Method != "" {
		m["method"] = task.Method
	}
	if task.Headers != nil {
		m["headers"] = task.Headers
	}
	if !task.RunAt.IsZero() {
		m["run_at"] = task.RunAt.Format(time.RFC3339Nano)
	}
	if task.Delay != 0 {
		m["delay"] = task.Delay.String()
	}
	if task.Timeout != 0 {
		m["timeout"] = task.Timeout.String()
	}
	retry := map[string]any{}
	if task.MaxAttempts != 0 {
		retry["max_attempts"] = task.MaxAttempts
	}
	if task.MinBackoff != 0 {
		retry["min_backoff"] = task.MinBackoff.String()
	}
	if task.MaxBackoff != 0 {
		retry["max_backoff"] = task.MaxBackoff.String()
	}
	if len(retry) > 0 {
		m["retry"] = retry
	}
	if task.Labels != nil {
		m["labels"] = task.Labels
	}
	for name, v := range map[string]string{"ordering_key": task.OrderingKey, "flow_key": task.FlowKey, "callback": task.Callback,
		"failure_callback": task.FailureCallback} {
		if v != "" {
			m[name] = v
		}
	}
	body, err := json.Marshal(m)
	require.NoError(t, err)
	if task.Body != nil {
		// Spliced in as raw bytes: json.Marshal would replace invalid
		// UTF-8, and the API must see what was sent.
		quoted, err := json.Marshal(string(task.Body))
		require.NoError(t, err)
		if !utf8.Valid(task.Body) {
			quoted = append(append([]byte(`"`), task.Body...), '"')
		}
		body = append(append(append(body[:len(body)-1], `,"body":`...), quoted...), '}')
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/tasks", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	if task.IdempotencyKey != "" {
		// Another key than Insert's: the two calls must not meet as
		// repeats of each other.
		req.Header.Set("Idempotency-Key", "api-"+task.IdempotencyKey)
	}
	rec := httptest.NewRecorder()
	server.ServeHTTP(rec, req)
	switch rec.Code {
	case http.StatusCreated:
		var created openapi.Task
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &created))
		return rec.Code, &created, nil
	case http.StatusUnprocessableEntity:
		var p openapi.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		var fields []string
		for _, f := range p.Errors {
			if f.Field == "Idempotency-Key" {
				f.Field = "idempotency_key"
			}
			fields = append(fields, f.Field)
		}
		return rec.Code, nil, fields
	}
	require.FailNow(t, "unexpected answer", "%d: %s", rec.Code, rec.Body)
	return 0, nil, nil
}

// requireSameTask checks that the API and Insert resolved a task alike.
func requireSameTask(t *testing.T, want *openapi.Task, got *txenqueue.Inserted) {
	t.Helper()
	require.Equal(t, string(want.Status), got.Status)
	require.Equal(t, want.URL, got.URL)
	require.Equal(t, string(want.Method), got.Method)
	require.Equal(t, want.Headers, orNil(got.Headers))
	require.Equal(t, want.Body, string(got.Body))
	require.Equal(t, map[string]string(want.Labels), orNil(got.Labels))
	require.Equal(t, deref(want.OrderingKey), got.OrderingKey)
	require.Equal(t, deref(want.FlowKey), got.FlowKey)
	require.Equal(t, deref(want.Callback), got.Callback)
	require.Equal(t, deref(want.FailureCallback), got.FailureCallback)
	require.Equal(t, want.Timeout, formatDuration(got.Timeout))
	require.Equal(t, want.MaxAttempts, got.MaxAttempts)
	require.Equal(t, *want.Retry.MinBackoff, formatDuration(got.MinBackoff))
	require.Equal(t, *want.Retry.MaxBackoff, formatDuration(got.MaxBackoff))
	// The API answered later, from its own clock: a task due "now" or
	// after a delay is due a little later there.
	require.False(t, want.RunAt.Before(got.RunAt), "API run_at %s, Insert's %s", want.RunAt, got.RunAt)
	require.Less(t, want.RunAt.Sub(got.RunAt), 5*time.Second)
}

// orNil is nil for an empty map, as the API's JSON leaves one out.
func orNil(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	return l
}

// formatDuration spells a duration as the API does.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TestInsertRefusesWithoutTouchingTheTransaction: an unknown tenant and a
// connection in the simple protocol are refused before any statement could
// fail, so the transaction goes on.
func TestInsertRefusesWithoutTouchingTheTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	stranger, err := txenqueue.New(txenqueue.Config{TenantID: uuid.New()})
	require.NoError(t, err)
	_, err = stranger.Insert(ctx, tx, txenqueue.Task{URL: "https://example.com/hook"})
	require.ErrorIs(t, err, txenqueue.ErrUnknownTenant)
	_, err = stranger.InsertMany(ctx, tx, []txenqueue.Task{{URL: "https://example.com/hook"}})
	require.ErrorIs(t, err, txenqueue.ErrUnknownTenant)
	_, err = tx.Exec(ctx, `INSERT INTO orders (id, status) VALUES (1, 'created')`)
	require.NoError(t, err, "the refusal aborted the transaction")

	_, err = txenqueue.New(txenqueue.Config{})
	require.Error(t, err, "a client without a tenant")

	// pgx's simple protocol cannot encode the insert's parameters.
	cfg, err := pgx.ParseConfig(e.url)
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	simpleTx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = simpleTx.Rollback(ctx) }()
	_, err = e.client().Insert(ctx, simpleTx, txenqueue.Task{URL: "http://127.0.0.1/x"})
	require.ErrorContains(t, err, `"simple protocol" query exec mode`)
	require.False(t, errors.Is(err, txenqueue.ErrUnknownTenant))
	_, err = simpleTx.Exec(ctx, `SELECT 1`)
	require.NoError(t, err, "the refusal aborted the transaction")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
