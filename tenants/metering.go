package tenants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Metering: what tenants used, per UTC day. The counts are written by the
// statements that store what they count (store/usage.go); this reads them
// for the tenant (GET /v1/usage) and the operator (GET /v1/admin/usage).

// MeteringStore is what usage reads need of the store; *store.DB is one.
type MeteringStore interface {
	TenantUsage(ctx context.Context, tenantID uuid.UUID, from, to time.Time) ([]model.UsageDay, error)
	UsageReport(ctx context.Context, f model.UsageReportFilter) ([]model.TenantUsageDay, error)
}

// Errors of a usage range, for the caller to tell which bound is wrong.
var (
	// ErrUsageRangeOrder: to is before from.
	ErrUsageRangeOrder = errors.New("to is before from")
	// ErrUsageRangeLength: the range spans more than model.UsageKeepDays days.
	ErrUsageRangeLength = fmt.Errorf("the range spans more than %d days", model.UsageKeepDays)
)

// UsageRange resolves a usage range (from and to inclusive, UTC days; nil
// takes the default): from defaults to the first of the current UTC month,
// to to today, both by the node's clock. A range whose to is before its
// from, or that spans more than model.UsageKeepDays days, is refused.
func (s *Service) UsageRange(from, to *time.Time) (time.Time, time.Time, error) {
	today := utcDay(s.clock.Now())
	f, t := today.AddDate(0, 0, 1-today.Day()), today
	if from != nil {
		f = utcDay(*from)
	}
	if to != nil {
		t = utcDay(*to)
	}
	switch {
	case t.Before(f):
		return f, t, ErrUsageRangeOrder
	case daysBetween(f, t) >= model.UsageKeepDays:
		return f, t, ErrUsageRangeLength
	}
	return f, t, nil
}

// Usage is a tenant's usage over a range of days.
type Usage struct {
	From, To time.Time
	// Days has every day of the range, oldest first, zeros for a day
	// without usage.
	Days   []model.UsageDay
	Totals model.UsageCounts
}

// Usage reads a tenant's usage from from to to (a range UsageRange
// accepted), every day listed.
func (s *Service) Usage(ctx context.Context, tenantID uuid.UUID, from, to time.Time) (*Usage, error) {
	stored, err := s.store.TenantUsage(ctx, tenantID, from, to)
	if err != nil {
		return nil, err
	}
	u := &Usage{From: from, To: to, Days: make([]model.UsageDay, 0, daysBetween(from, to)+1)}
	next := 0
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		day := model.UsageDay{Date: d}
		if next < len(stored) && stored[next].Date.Equal(d) {
			day = stored[next]
			next++
		}
		u.Totals.Add(day.UsageCounts)
		u.Days = append(u.Days, day)
	}
	return u, nil
}

// UsageReport reads every tenant's usage (or f.TenantID's) over f's range
// (one UsageRange accepted), a page of f.Limit rows in (day, tenant) order.
func (s *Service) UsageReport(ctx context.Context, f model.UsageReportFilter) ([]model.TenantUsageDay, error) {
	return s.store.UsageReport(ctx, f)
}

// utcDay is t's UTC day at midnight UTC.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// daysBetween counts the days from from to to, two UTC midnights.
func daysBetween(from, to time.Time) int { return int(to.Sub(from).Hours() / 24) }
