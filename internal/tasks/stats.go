package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// StatsStore is where delivery statistics are read: the minutes the
// dispatchers add up, and a tenant's tasks counted by status.
type StatsStore interface {
	// TaskStatsBetween returns a tenant's minutes from from (inclusive) to
	// to (exclusive) that saw attempts, oldest first.
	TaskStatsBetween(ctx context.Context, tenantID uuid.UUID, from, to time.Time) ([]model.MinuteStats, error)
	// CountTasksByStatus counts a tenant's tasks in each status, up to upTo.
	CountTasksByStatus(ctx context.Context, tenantID uuid.UUID, upTo int) (map[model.TaskStatus]int, error)
}

const (
	// DefaultStatsWindow is the window of statistics when none is asked for.
	DefaultStatsWindow = time.Hour
	// MaxStatsWindow is the longest window; statistics are kept twice as
	// long, so the oldest minute of a full window is always there.
	MaxStatsWindow = 24 * time.Hour
	// StatusCountLimit caps each count of tasks by status: counting stops
	// there, so that the call costs the same for a tenant with millions of
	// delivered tasks as for one with ten thousand.
	StatusCountLimit = 10_000
)

// ErrStatsWindow refuses a window that is not whole minutes from one
// minute to MaxStatsWindow.
var ErrStatsWindow = errors.New("a window is whole minutes, from 1m to 24h")

// Stats is what a tenant's webhooks did over a window, and where its tasks
// are now.
type Stats struct {
	Window time.Duration
	// Minutes are every minute of the window, oldest first, the minute in
	// progress last; a minute without attempts has zero counts.
	Minutes []model.MinuteStats
	// ByStatus counts the tenant's tasks in each status, up to
	// StatusCountLimit: a count equal to it means at least that many.
	ByStatus         map[model.TaskStatus]int
	StatusCountLimit int
}

// Stats reads a tenant's delivery statistics over the last window (see
// StatsWindowValid), minute by minute. The dispatchers add their counts
// every few seconds, so the last minutes may not count the latest attempts
// yet.
func (s *Service) Stats(ctx context.Context, tenantID uuid.UUID, window time.Duration) (*Stats, error) {
	if !StatsWindowValid(window) {
		return nil, ErrStatsWindow
	}
	end := s.clock.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-window)
	// The store's errors name the tenant and what failed.
	written, err := s.store.TaskStatsBetween(ctx, tenantID, start, end)
	if err != nil {
		return nil, err
	}
	byStatus, err := s.store.CountTasksByStatus(ctx, tenantID, StatusCountLimit)
	if err != nil {
		return nil, err
	}
	out := &Stats{
		Window:           window,
		Minutes:          make([]model.MinuteStats, window/time.Minute),
		ByStatus:         byStatus,
		StatusCountLimit: StatusCountLimit,
	}
	for i := range out.Minutes {
		out.Minutes[i].Start = start.Add(time.Duration(i) * time.Minute)
	}
	for _, m := range written {
		if i := int(m.Start.Sub(start) / time.Minute); i >= 0 && i < len(out.Minutes) {
			out.Minutes[i].Merge(&m)
		}
	}
	return out, nil
}

// StatsWindowValid reports whether window may be asked of Stats: whole
// minutes, from one minute to MaxStatsWindow.
func StatsWindowValid(window time.Duration) bool {
	return window >= time.Minute && window <= MaxStatsWindow && window%time.Minute == 0
}
