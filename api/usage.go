package api

import (
	"encoding/base64"
	"encoding/csv"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

const (
	defaultUsageRows = 1000
	maxUsageRows     = 10000
)

// GetUsage answers the calling tenant's usage, day by day, with its plan
// and daily limits.
func (s *Server) GetUsage(c echo.Context, params openapi.GetUsageParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	from, to, err := s.usageRange(params.From, params.To)
	if err != nil {
		return err
	}
	u, err := s.tenants.Usage(c.Request().Context(), tenant.ID, from, to)
	if err != nil {
		return err
	}
	out := openapi.TenantUsage{
		From:   openapi_types.Date{Time: u.From},
		To:     openapi_types.Date{Time: u.To},
		Days:   make([]openapi.UsageDay, len(u.Days)),
		Totals: usageCountsJSON(u.Totals),
		Plan:   tenant.Plan,
		Limits: openapi.DailyLimits{
			TasksPerDay:      positiveInt(tenant.Limits.TasksPerDay),
			DeliveriesPerDay: positiveInt(tenant.Limits.DeliveriesPerDay),
		},
	}
	for i, d := range u.Days {
		n := d.UsageCounts
		out.Days[i] = openapi.UsageDay{Date: openapi_types.Date{Time: d.Date}, TasksCreated: n.TasksCreated,
			Deliveries: n.Deliveries, Attempts: n.Attempts, FailedAttempts: n.FailedAttempts, BytesSent: n.BytesSent,
			BytesReceived: n.BytesReceived}
	}
	return c.JSON(http.StatusOK, out)
}

func usageCountsJSON(n model.UsageCounts) openapi.UsageCounts {
	return openapi.UsageCounts{TasksCreated: n.TasksCreated, Deliveries: n.Deliveries, Attempts: n.Attempts,
		FailedAttempts: n.FailedAttempts, BytesSent: n.BytesSent, BytesReceived: n.BytesReceived}
}

// usageRange reads from and to (YYYY-MM-DD) and has the service resolve
// the defaults and check the range: a 422 naming the parameter otherwise.
func (s *Server) usageRange(rawFrom, rawTo *string) (time.Time, time.Time, error) {
	var fe fieldErrors
	from, to := usageDate(&fe, "from", rawFrom), usageDate(&fe, "to", rawTo)
	if err := fe.problem(); err != nil {
		return time.Time{}, time.Time{}, err
	}
	f, t, err := s.tenants.UsageRange(from, to)
	switch {
	case errors.Is(err, tenants.ErrUsageRangeOrder):
		fe.add("to", "must not be before from (%s)", f.Format(time.DateOnly))
	case errors.Is(err, tenants.ErrUsageRangeLength):
		fe.add("to", "must be less than %d days after from (%s)", model.UsageKeepDays, f.Format(time.DateOnly))
	case err != nil:
		return time.Time{}, time.Time{}, err
	}
	if err := fe.problem(); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return f, t, nil
}

// usageDate reads a YYYY-MM-DD parameter; nil when absent.
func usageDate(fe *fieldErrors, name string, raw *string) *time.Time {
	if raw == nil {
		return nil
	}
	d, err := time.Parse(time.DateOnly, strings.TrimSpace(*raw))
	if err != nil {
		fe.add(name, "must be a date as YYYY-MM-DD, such as 2026-11-01")
		return nil
	}
	return &d
}

// ListUsage answers every tenant's usage (or one tenant's), a JSON page or,
// with Accept: text/csv, every row of the range as CSV.
func (s *Server) ListUsage(c echo.Context, params openapi.ListUsageParams) error {
	from, to, err := s.usageRange(params.From, params.To)
	if err != nil {
		return err
	}
	f := model.UsageReportFilter{From: from, To: to, TenantID: params.TenantID, Limit: defaultUsageRows}
	if wantsCSV(c.Request()) {
		return s.writeUsageCSV(c, f)
	}
	var fe fieldErrors
	if params.Limit != nil {
		if *params.Limit < 1 || *params.Limit > maxUsageRows {
			fe.add("limit", "must be between 1 and %d", maxUsageRows)
		}
		f.Limit = *params.Limit
	}
	if params.Cursor != nil {
		day, tenant, ok := decodeUsageCursor(*params.Cursor)
		if !ok {
			fe.add("cursor", "is not a cursor this API returned")
		}
		f.AfterDate, f.AfterTenant = day, tenant
	}
	if err := fe.problem(); err != nil {
		return err
	}
	page := f.Limit
	f.Limit++ // one more tells whether another page follows
	rows, err := s.tenants.UsageReport(c.Request().Context(), f)
	if err != nil {
		return err
	}
	data, next := paginate(rows, page, encodeUsageCursor, usageRowJSON)
	return c.JSON(http.StatusOK, openapi.UsageRowList{Data: data, NextCursor: next})
}

func usageRowJSON(r model.TenantUsageDay) openapi.UsageRow {
	n := r.UsageCounts
	return openapi.UsageRow{Date: openapi_types.Date{Time: r.Date}, TenantID: r.TenantID, TenantName: r.TenantName,
		Plan: r.Plan, TasksCreated: n.TasksCreated, Deliveries: n.Deliveries, Attempts: n.Attempts,
		FailedAttempts: n.FailedAttempts, BytesSent: n.BytesSent, BytesReceived: n.BytesReceived}
}

// wantsCSV reports whether the request's Accept names text/csv.
func wantsCSV(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get(echo.HeaderAccept), ",") {
		media, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(media), "text/csv") {
			return true
		}
	}
	return false
}

// usageCSVHeader is the CSV report's header row.
var usageCSVHeader = []string{"date", "tenant_id", "tenant_name", "plan", "tasks_created", "deliveries", "attempts",
	"failed_attempts", "bytes_sent", "bytes_received"}

// writeUsageCSV writes every row of f's range as CSV, read a page at a
// time: a node holds one page, whatever the number of tenants and days.
// The status is sent with the first page, so a read failing after it
// ends the answer short rather than with a problem.
func (s *Server) writeUsageCSV(c echo.Context, f model.UsageReportFilter) error {
	ctx := c.Request().Context()
	rows, err := s.tenants.UsageReport(ctx, f)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := csv.NewWriter(w)
	if err := out.Write(usageCSVHeader); err != nil {
		return nil // the client has gone
	}
	for {
		for _, r := range rows {
			n := r.UsageCounts
			if err := out.Write([]string{r.Date.Format(time.DateOnly), r.TenantID.String(), csvText(r.TenantName),
				csvText(r.Plan), itoa(n.TasksCreated), itoa(n.Deliveries), itoa(n.Attempts), itoa(n.FailedAttempts),
				itoa(n.BytesSent), itoa(n.BytesReceived)}); err != nil {
				return nil
			}
		}
		out.Flush()
		if len(rows) < f.Limit {
			return nil
		}
		last := rows[len(rows)-1]
		f.AfterDate, f.AfterTenant = last.Date, last.TenantID
		if rows, err = s.tenants.UsageReport(ctx, f); err != nil {
			s.logger.Error("reading the usage report failed; the CSV ends short", "err", err)
			return nil
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// csvText is a text cell: empty for none, and a value a spreadsheet would
// take for a formula (a tenant name is chosen by whoever signs up) led by
// an apostrophe, as OWASP advises.
func csvText(s *string) string {
	if s == nil {
		return ""
	}
	if *s != "" && strings.ContainsRune("=+-@\t\r", rune((*s)[0])) {
		return "'" + *s
	}
	return *s
}

// A usage cursor is the last row's day and tenant.
func encodeUsageCursor(r model.TenantUsageDay) string {
	return base64.RawURLEncoding.EncodeToString([]byte(r.Date.Format(time.DateOnly) + "|" + r.TenantID.String()))
}

func decodeUsageCursor(s string) (time.Time, uuid.UUID, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	day, id, ok := strings.Cut(string(b), "|")
	d, err1 := time.Parse(time.DateOnly, day)
	u, err2 := uuid.Parse(id)
	if !ok || err1 != nil || err2 != nil {
		return time.Time{}, uuid.Nil, false
	}
	return d, u, true
}
