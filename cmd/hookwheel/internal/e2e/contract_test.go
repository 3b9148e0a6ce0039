package e2e_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
)

// TestEveryOperationAnswersAsDocumented calls the operations the other
// tests leave out, and the answers they rarely see (404, 409, 401, 403,
// 422, an API-only node's empty lists), through the clients that check
// every answer against openapi.yaml: together with the rest of the package,
// every operation's answers are checked.
func TestEveryOperationAnswersAsDocumented(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	ctx := context.Background()
	admin := clientFor(t, n.base, "admin-token")
	status := func(want int, got int, body []byte, what string) {
		t.Helper()
		require.Equal(t, want, got, "%s: %s", what, body)
	}

	// The operator's calls.
	created, err := admin.CreateTenantWithResponse(ctx, openapi.TenantCreateRequest{Name: "acme"})
	require.NoError(t, err)
	status(http.StatusCreated, created.StatusCode(), created.Body, "createTenant")
	tenantID := created.JSON201.ID
	acme := clientFor(t, n.base, created.JSON201.APIKey)
	tenants, err := admin.ListTenantsWithResponse(ctx, &openapi.ListTenantsParams{Limit: ptr(1)})
	require.NoError(t, err)
	status(http.StatusOK, tenants.StatusCode(), tenants.Body, "listTenants")
	tenant, err := admin.GetTenantWithResponse(ctx, tenantID)
	require.NoError(t, err)
	status(http.StatusOK, tenant.StatusCode(), tenant.Body, "getTenant")
	missing, err := admin.GetTenantWithResponse(ctx, uuid.New())
	require.NoError(t, err)
	status(http.StatusNotFound, missing.StatusCode(), missing.Body, "getTenant of no tenant")
	nodes, err := admin.ListNodesWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, nodes.StatusCode(), nodes.Body, "listNodes")
	audit, err := admin.ListAuditWithResponse(ctx, &openapi.ListAuditParams{TenantID: &tenantID})
	require.NoError(t, err)
	status(http.StatusOK, audit.StatusCode(), audit.Body, "listAudit")
	unauthorized, err := clientFor(t, n.base, "not-the-token").ListNodesWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusUnauthorized, unauthorized.StatusCode(), unauthorized.Body, "listNodes with a wrong token")

	// A tenant's calls about itself.
	me, err := acme.GetCallerWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, me.StatusCode(), me.Body, "getCaller")
	limits, err := acme.GetLimitsWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, limits.StatusCode(), limits.Body, "getLimits")
	stats, err := acme.GetStatsWithResponse(ctx, &openapi.GetStatsParams{Window: ptr("5m")})
	require.NoError(t, err)
	status(http.StatusOK, stats.StatusCode(), stats.Body, "getStats")
	badWindow, err := acme.GetStatsWithResponse(ctx, &openapi.GetStatsParams{Window: ptr("forever")})
	require.NoError(t, err)
	require.GreaterOrEqual(t, badWindow.StatusCode(), 400, "getStats with an invalid window: %s", badWindow.Body)

	// Tasks: created, replayed by key, moved, canceled, and refused.
	req := openapi.TaskRequest{URL: "https://example.com/hooks/later", Body: `{"order": 42}`, Delay: ptr("1h")}
	first, err := acme.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42")}, req)
	require.NoError(t, err)
	status(http.StatusCreated, first.StatusCode(), first.Body, "createTask")
	again, err := acme.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42")}, req)
	require.NoError(t, err)
	status(http.StatusOK, again.StatusCode(), again.Body, "createTask repeated")
	task := taskOf(t, first.JSON201).ID
	moved, err := acme.RescheduleTaskWithResponse(ctx, task, openapi.RescheduleRequest{Delay: ptr("2h")})
	require.NoError(t, err)
	status(http.StatusOK, moved.StatusCode(), moved.Body, "rescheduleTask")
	attempts, err := acme.ListTaskAttemptsWithResponse(ctx, task, nil)
	require.NoError(t, err)
	status(http.StatusOK, attempts.StatusCode(), attempts.Body, "listTaskAttempts")
	for _, include := range []*openapi.ListTasksParamsInclude{nil, ptr(openapi.ListTasksParamsIncludeBody)} {
		tasks, err := acme.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Include: include})
		require.NoError(t, err)
		status(http.StatusOK, tasks.StatusCode(), tasks.Body, "listTasks")
		require.Equal(t, include != nil, tasks.JSON200.Data[0].Body != "", "a body only when asked")
	}
	badInclude, err := acme.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Include: ptr(openapi.ListTasksParamsInclude("bodies"))})
	require.NoError(t, err)
	status(http.StatusBadRequest, badInclude.StatusCode(), badInclude.Body, "listTasks with an unknown include")
	canceled, err := acme.CancelTasksWithResponse(ctx, openapi.CancelFilter{Status: ptr(openapi.CancelFilterStatusScheduled)})
	require.NoError(t, err)
	status(http.StatusOK, canceled.StatusCode(), canceled.Body, "cancelTasks")
	require.Equal(t, 1, canceled.JSON200.Canceled)
	cancelAgain, err := acme.CancelTaskWithResponse(ctx, task)
	require.NoError(t, err)
	status(http.StatusConflict, cancelAgain.StatusCode(), cancelAgain.Body, "cancelTask of a canceled task")
	replay, err := acme.ReplayTaskWithBodyWithResponse(ctx, task, "application/json", nil)
	require.NoError(t, err)
	status(http.StatusConflict, replay.StatusCode(), replay.Body, "replayTask of a canceled task")
	noTask, err := acme.GetTaskWithResponse(ctx, uuid.New())
	require.NoError(t, err)
	status(http.StatusNotFound, noTask.StatusCode(), noTask.Body, "getTask of no task")
	invalid, err := acme.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{}, openapi.TaskRequest{URL: "ftp://example.com/x"})
	require.NoError(t, err)
	status(http.StatusUnprocessableEntity, invalid.StatusCode(), invalid.Body, "createTask of an ftp URL")
	dry, err := acme.ReplayTasksWithResponse(ctx, openapi.ReplayFilter{DryRun: ptr(true)})
	require.NoError(t, err)
	status(http.StatusOK, dry.StatusCode(), dry.Body, "replayTasks dry run")

	// Schedules, through their whole life.
	sched, err := acme.CreateScheduleWithResponse(ctx, openapi.ScheduleRequest{Cron: "0 9 * * 1-5", Timezone: ptr("Europe/Paris"),
		URL: "https://example.com/hooks/daily", Paused: ptr(true)})
	require.NoError(t, err)
	status(http.StatusCreated, sched.StatusCode(), sched.Body, "createSchedule")
	id := sched.JSON201.ID
	list, err := acme.ListSchedulesWithResponse(ctx, &openapi.ListSchedulesParams{})
	require.NoError(t, err)
	status(http.StatusOK, list.StatusCode(), list.Body, "listSchedules")
	withBodies, err := acme.ListSchedulesWithResponse(ctx, &openapi.ListSchedulesParams{Include: ptr(openapi.ListSchedulesParamsIncludeBody)})
	require.NoError(t, err)
	status(http.StatusOK, withBodies.StatusCode(), withBodies.Body, "listSchedules with bodies")
	next, err := acme.NextScheduleTimesWithResponse(ctx, id, &openapi.NextScheduleTimesParams{Count: ptr(3)})
	require.NoError(t, err)
	status(http.StatusOK, next.StatusCode(), next.Body, "nextScheduleTimes")
	resumed, err := acme.ResumeScheduleWithResponse(ctx, id)
	require.NoError(t, err)
	status(http.StatusOK, resumed.StatusCode(), resumed.Body, "resumeSchedule")
	paused, err := acme.PauseScheduleWithResponse(ctx, id)
	require.NoError(t, err)
	status(http.StatusOK, paused.StatusCode(), paused.Body, "pauseSchedule")
	got, err := acme.GetScheduleWithResponse(ctx, id)
	require.NoError(t, err)
	status(http.StatusOK, got.StatusCode(), got.Body, "getSchedule")
	deleted, err := acme.DeleteScheduleWithResponse(ctx, id)
	require.NoError(t, err)
	status(http.StatusOK, deleted.StatusCode(), deleted.Body, "deleteSchedule")
	gone, err := acme.GetScheduleWithResponse(ctx, id)
	require.NoError(t, err)
	status(http.StatusNotFound, gone.StatusCode(), gone.Body, "getSchedule of a deleted schedule")

	// A key without the scope a call needs.
	reader, err := acme.CreateKeyWithResponse(ctx, openapi.APIKeyRequest{Name: ptr("reader"), Scopes: []openapi.Scope{"tasks:read"}})
	require.NoError(t, err)
	status(http.StatusCreated, reader.StatusCode(), reader.Body, "createKey")
	forbidden, err := clientFor(t, n.base, reader.JSON201.APIKey).CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{}, req)
	require.NoError(t, err)
	status(http.StatusForbidden, forbidden.StatusCode(), forbidden.Body, "createTask with a read-only key")

	// A dashboard session: signed in, read, signed out.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	var csrf string
	browser, err := openapi.NewClientWithResponses(n.base,
		openapi.WithHTTPClient(&http.Client{Jar: jar, Transport: contractTransport{t: t, next: http.DefaultTransport}}),
		openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if csrf != "" {
				r.Header.Set("X-CSRF-Token", csrf)
			}
			return nil
		}))
	require.NoError(t, err)
	noSession, err := browser.GetSessionWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusUnauthorized, noSession.StatusCode(), noSession.Body, "getSession signed out")
	signedIn, err := browser.SignInWithResponse(ctx, openapi.SignInRequest{APIKey: &created.JSON201.APIKey})
	require.NoError(t, err)
	status(http.StatusOK, signedIn.StatusCode(), signedIn.Body, "signIn")
	csrf = signedIn.JSON200.CsrfToken
	session, err := browser.GetSessionWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, session.StatusCode(), session.Body, "getSession")
	signedOut, err := browser.SignOutWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusNoContent, signedOut.StatusCode(), signedOut.Body, "signOut")

	// What any client may read.
	healthz, err := acme.HealthzWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, healthz.StatusCode(), healthz.Body, "healthz")
	readyz, err := acme.ReadyzWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, readyz.StatusCode(), readyz.Body, "readyz")
	metrics, err := acme.MetricsWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, metrics.StatusCode(), nil, "metrics")
	document, err := acme.GetOpenAPIWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, document.StatusCode(), nil, "getOpenAPI")
	require.Equal(t, openapi.Spec(), document.Body)
	require.Equal(t, "hookwheel", (*document.YAML200)["info"].(map[string]any)["title"], "a generated client reads the document")

	// An API-only node has no dispatcher: no breakers and no targets, and
	// says so as the document does.
	// Its key cache outlives the test: only the announcement of a tenant's
	// change can make it refuse a key it has seen.
	apiOnly := e.startNode(func(c *app.Config) { c.DisableDispatcher, c.KeyCacheTTL = true, time.Hour })
	breakers, err := clientFor(t, apiOnly.base, "admin-token").ListBreakersWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, breakers.StatusCode(), breakers.Body, "listBreakers on an API-only node")
	require.Empty(t, breakers.JSON200.Data)
	require.Equal(t, uuid.Nil, breakers.JSON200.Node)
	targets, err := clientFor(t, apiOnly.base, created.JSON201.APIKey).ListTargetsWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, targets.StatusCode(), targets.Body, "listTargets on an API-only node")
	require.Empty(t, targets.JSON200.Data)

	// The tenant's life, heard by the API-only node (which listens for it
	// itself) as it commits.
	acmeThere := clientFor(t, apiOnly.base, created.JSON201.APIKey)
	caller, err := acmeThere.GetCallerWithResponse(ctx)
	require.NoError(t, err)
	status(http.StatusOK, caller.StatusCode(), caller.Body, "getCaller on the API-only node")
	suspended, err := admin.SuspendTenantWithResponse(ctx, tenantID)
	require.NoError(t, err)
	status(http.StatusOK, suspended.StatusCode(), suspended.Body, "suspendTenant")
	require.Equal(t, openapi.TenantStatusSuspended, suspended.JSON200.Status)
	refusedWithin := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := acmeThere.GetCallerWithResponse(ctx)
			require.NoError(t, err)
			if got.StatusCode() == want {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: %d %s", what, got.StatusCode(), got.Body)
			time.Sleep(5 * time.Millisecond) // polling
		}
	}
	refusedWithin(http.StatusForbidden, "a suspended tenant's call on the API-only node")
	tenantResumed, err := admin.ResumeTenantWithResponse(ctx, tenantID)
	require.NoError(t, err)
	status(http.StatusOK, tenantResumed.StatusCode(), tenantResumed.Body, "resumeTenant")
	refusedWithin(http.StatusOK, "a resumed tenant's call on the API-only node")
	tenantDeleted, err := admin.DeleteTenantWithResponse(ctx, tenantID)
	require.NoError(t, err)
	status(http.StatusAccepted, tenantDeleted.StatusCode(), tenantDeleted.Body, "deleteTenant")
	require.Equal(t, openapi.TenantStatusDeleting, tenantDeleted.JSON202.Status)
	refusedWithin(http.StatusUnauthorized, "a deleted tenant's call on the API-only node")
	conflict, err := admin.SuspendTenantWithResponse(ctx, tenantID)
	require.NoError(t, err)
	status(http.StatusConflict, conflict.StatusCode(), conflict.Body, "suspendTenant of a tenant being deleted")
	noTenant, err := admin.DeleteTenantWithResponse(ctx, uuid.New())
	require.NoError(t, err)
	status(http.StatusNotFound, noTenant.StatusCode(), noTenant.Body, "deleteTenant of no tenant")
}
