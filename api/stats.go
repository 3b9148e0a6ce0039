package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// GetStats answers what the calling tenant's webhooks did over the last
// window, minute by minute, and how many of its tasks are in each status.
func (s *Server) GetStats(c echo.Context, params openapi.GetStatsParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	window, err := statsWindow(params.Window)
	if err != nil {
		return err
	}
	st, err := s.tasks.Stats(c.Request().Context(), tenant.ID, window)
	switch {
	case errors.Is(err, tasks.ErrStatsWindow):
		return windowProblem()
	case err != nil:
		return err
	}
	out := openapi.TaskStats{
		Window:           formatWindow(st.Window),
		Minutes:          make([]openapi.MinuteStats, len(st.Minutes)),
		StatusCountLimit: st.StatusCountLimit,
	}
	for i := range st.Minutes {
		m := &st.Minutes[i]
		out.Minutes[i] = openapi.MinuteStats{
			Start:         m.Start.UTC(),
			Attempts:      int(m.Attempts()),
			Delivered:     int(m.Delivered),
			Retried:       int(m.Retried),
			Dead:          int(m.Dead),
			LatenessP50Ms: latenessMs(&m.Lateness, 0.50),
			LatenessP99Ms: latenessMs(&m.Lateness, 0.99),
		}
	}
	by := &out.TasksByStatus
	by.Scheduled = st.ByStatus[model.StatusScheduled]
	by.Dispatching = st.ByStatus[model.StatusDispatching]
	by.Retrying = st.ByStatus[model.StatusRetrying]
	by.Delivered = st.ByStatus[model.StatusDelivered]
	by.Dead = st.ByStatus[model.StatusDead]
	by.Canceled = st.ByStatus[model.StatusCanceled]
	by.Expired = st.ByStatus[model.StatusExpired]
	return c.JSON(http.StatusOK, out)
}

// statsWindow reads the window parameter: a Go duration of whole minutes,
// one hour when absent.
func statsWindow(raw *string) (time.Duration, error) {
	if raw == nil {
		return tasks.DefaultStatsWindow, nil
	}
	d, err := time.ParseDuration(*raw)
	if err != nil || !tasks.StatsWindowValid(d) {
		return 0, windowProblem()
	}
	return d, nil
}

func windowProblem() error {
	var fe fieldErrors
	fe.add("window", "must be a duration of whole minutes from 1m to %s, such as 1h or 90m", formatWindow(tasks.MaxStatsWindow))
	return fe.problem()
}

// formatWindow writes a window as it is asked for: 1h, 90m is 1h30m, 5m.
func formatWindow(d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// latenessMs is a quantile of h in milliseconds, to the microsecond; nil
// without attempts.
func latenessMs(h *model.LatenessHistogram, q float64) *float32 {
	d, ok := h.Quantile(q)
	if !ok {
		return nil
	}
	ms := float32(math.Round(float64(d)/float64(time.Microsecond)) / 1000)
	return &ms
}
