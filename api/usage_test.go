package api_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/tenants"
)

type usageDayJSON struct {
	Date           string `json:"date"`
	TasksCreated   int64  `json:"tasks_created"`
	Deliveries     int64  `json:"deliveries"`
	Attempts       int64  `json:"attempts"`
	FailedAttempts int64  `json:"failed_attempts"`
	BytesSent      int64  `json:"bytes_sent"`
	BytesReceived  int64  `json:"bytes_received"`
}

// addUsage writes a usage row as the metering statements would.
func (h *harness) addUsage(tenant uuid.UUID, day time.Time, shard int, n int64) {
	h.t.Helper()
	h.exec(`INSERT INTO usage_days (tenant_id, day, shard, tasks_created, deliveries, attempts, failed_attempts,
		bytes_sent, bytes_received) VALUES ($1, $2, $3, $4::bigint, $4::bigint, 2 * $4::bigint, $4::bigint, 100 * $4::bigint, 10 * $4::bigint)`,
		tenant, day.Format(time.DateOnly), shard, n)
}

// TestUsage: a tenant reads its own usage day by day, shards summed, every
// day of the range listed (zeros where none), with totals, its plan and
// its daily limits; bad ranges are 422s naming the parameter.
func TestUsage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme, other := h.createTenant("acme"), h.createTenant("other")
	require.Equal(t, http.StatusCreated, h.do(http.MethodPut, "/v1/admin/plans/small", adminToken,
		strings.NewReader(`{"deliveries_per_day": 50}`), nil).Status)
	require.Equal(t, http.StatusOK, h.do(http.MethodPatch, "/v1/admin/tenants/"+acme.ID.String(), adminToken,
		strings.NewReader(`{"plan": "small", "limits": {"tasks_per_day": 9}}`), nil).Status)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	h.addUsage(acme.ID, today, 0, 1)
	h.addUsage(acme.ID, today, 3, 2)
	h.addUsage(acme.ID, today.AddDate(0, 0, -2), 20, 4)
	h.addUsage(other.ID, today, 3, 100)

	day := func(d time.Time) string { return d.Format(time.DateOnly) }
	resp := h.do(http.MethodGet, "/v1/usage?from="+day(today.AddDate(0, 0, -3))+"&to="+day(today), acme.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var got struct {
		From   string         `json:"from"`
		To     string         `json:"to"`
		Days   []usageDayJSON `json:"days"`
		Totals usageDayJSON   `json:"totals"`
		Plan   *string        `json:"plan"`
		Limits struct {
			TasksPerDay      *int `json:"tasks_per_day"`
			DeliveriesPerDay *int `json:"deliveries_per_day"`
		} `json:"limits"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &got))
	require.Len(t, got.Days, 4, "every day of the range")
	require.Equal(t, usageDayJSON{Date: day(today.AddDate(0, 0, -3))}, got.Days[0], "a day without usage is zeros")
	require.Equal(t, usageDayJSON{Date: day(today.AddDate(0, 0, -2)), TasksCreated: 4, Deliveries: 4, Attempts: 8,
		FailedAttempts: 4, BytesSent: 400, BytesReceived: 40}, got.Days[1])
	require.Equal(t, usageDayJSON{Date: day(today), TasksCreated: 3, Deliveries: 3, Attempts: 6, FailedAttempts: 3,
		BytesSent: 300, BytesReceived: 30}, got.Days[3], "shards summed, another tenant's left out")
	require.Equal(t, usageDayJSON{TasksCreated: 7, Deliveries: 7, Attempts: 14, FailedAttempts: 7, BytesSent: 700,
		BytesReceived: 70}, got.Totals)
	require.Equal(t, "small", *got.Plan)
	require.Equal(t, 9, *got.Limits.TasksPerDay)
	require.Equal(t, 50, *got.Limits.DeliveriesPerDay)

	// Default: this month so far.
	resp = h.do(http.MethodGet, "/v1/usage", other.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.NoError(t, json.Unmarshal(resp.Body, &got))
	require.Equal(t, day(today.AddDate(0, 0, 1-today.Day())), got.From)
	require.Equal(t, day(today), got.To)
	require.Len(t, got.Days, today.Day())
	require.EqualValues(t, 100, got.Totals.Deliveries)
	require.Nil(t, got.Limits.TasksPerDay, "unlimited")

	for query, field := range map[string]string{
		"from=2026-13-01":                 "from",
		"from=yesterday":                  "from",
		"to=2026-02-30":                   "to",
		"from=2026-11-02&to=2026-11-01":   "to",
		"from=2025-01-01&to=2026-02-05":   "to",
		"from=2026-11-01&to=2026-11-1%20": "to",
	} {
		requireFieldProblem(t, h.do(http.MethodGet, "/v1/usage?"+query, acme.APIKey, nil, nil), field)
	}
	resp = h.do(http.MethodGet, "/v1/usage?from=2025-01-01&to=2026-02-04", acme.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, "400 days: %s", resp.Body)
	requireProblem(t, h.do(http.MethodGet, "/v1/usage", "", nil, nil), http.StatusUnauthorized)
}

// TestAdminUsage: the operator reads every tenant's usage as JSON pages or
// as CSV; a deleted tenant's rows stay, without a name.
func TestAdminUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	acme, gone := h.createTenant("=acme"), h.createTenant("gone")
	today := time.Now().UTC().Truncate(24 * time.Hour)
	yesterday := today.AddDate(0, 0, -1)
	h.addUsage(acme.ID, yesterday, 0, 1)
	h.addUsage(acme.ID, today, 0, 2)
	h.addUsage(acme.ID, today, 5, 3)
	h.addUsage(gone.ID, today, 1, 7)

	// The tenant is deleted; its usage is not.
	require.Equal(t, http.StatusAccepted, h.do(http.MethodDelete, "/v1/admin/tenants/"+gone.ID.String(), adminToken, nil, nil).Status)
	deleter := tenants.NewDeleter(tenants.DeleterConfig{Store: h.DB, Interval: 10 * time.Millisecond, Pause: time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- deleter.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for h.do(http.MethodGet, "/v1/admin/tenants/"+gone.ID.String(), adminToken, nil, nil).Status != http.StatusNotFound {
		require.True(t, time.Now().Before(deadline), "the tenant is still there")
		time.Sleep(10 * time.Millisecond) // polling
	}
	stop()
	require.NoError(t, <-ran)

	from := "from=" + yesterday.Format(time.DateOnly) + "&to=" + today.Format(time.DateOnly)
	type row struct {
		usageDayJSON
		TenantID   uuid.UUID `json:"tenant_id"`
		TenantName *string   `json:"tenant_name"`
		Plan       *string   `json:"plan"`
	}
	var page struct {
		Data       []row   `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	resp := h.do(http.MethodGet, "/v1/admin/usage?"+from+"&limit=2", adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.NoError(t, json.Unmarshal(resp.Body, &page))
	require.Len(t, page.Data, 2)
	require.Equal(t, yesterday.Format(time.DateOnly), page.Data[0].Date)
	require.Equal(t, acme.ID, page.Data[0].TenantID)
	require.Equal(t, "=acme", *page.Data[0].TenantName)
	require.NotNil(t, page.NextCursor)
	var all []row
	all = append(all, page.Data...)
	resp = h.do(http.MethodGet, "/v1/admin/usage?"+from+"&limit=2&cursor="+*page.NextCursor, adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	page.NextCursor = nil
	require.NoError(t, json.Unmarshal(resp.Body, &page))
	require.Len(t, page.Data, 1)
	require.Nil(t, page.NextCursor)
	all = append(all, page.Data...)
	byTenant := map[uuid.UUID]row{}
	for _, r := range all[1:] {
		byTenant[r.TenantID] = r
	}
	require.EqualValues(t, 5, byTenant[acme.ID].Deliveries)
	require.Nil(t, byTenant[gone.ID].TenantName, "deleted: no name")
	require.EqualValues(t, 7, byTenant[gone.ID].Deliveries, "a deleted tenant's usage stays")

	resp = h.do(http.MethodGet, "/v1/admin/usage?"+from+"&tenant_id="+gone.ID.String(), adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.NoError(t, json.Unmarshal(resp.Body, &page))
	require.Len(t, page.Data, 1)

	resp = h.do(http.MethodGet, "/v1/admin/usage?"+from, adminToken, nil, map[string]string{"Accept": "text/csv"})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv"))
	records, err := csv.NewReader(strings.NewReader(string(resp.Body))).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 4)
	require.Equal(t, []string{"date", "tenant_id", "tenant_name", "plan", "tasks_created", "deliveries", "attempts",
		"failed_attempts", "bytes_sent", "bytes_received"}, records[0])
	require.Equal(t, []string{yesterday.Format(time.DateOnly), acme.ID.String(), "'=acme", "", "1", "1", "2", "1", "100", "10"},
		records[1], "a name a spreadsheet would run is quoted")

	requireFieldProblem(t, h.do(http.MethodGet, "/v1/admin/usage?from=nope", adminToken, nil, nil), "from")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/admin/usage?cursor=nope", adminToken, nil, nil), "cursor")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/admin/usage?limit=0", adminToken, nil, nil), "limit")
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/usage", acme.APIKey, nil, nil), http.StatusUnauthorized)
}
