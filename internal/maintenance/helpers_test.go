package maintenance

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// gathered reads the value of the counter or gauge name, with the label
// pair given if any, as reg would have it scraped; 0 when it has none.
func gathered(t *testing.T, reg *prometheus.Registry, name string, label ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(label) == 2 && !hasLabel(m.GetLabel(), label[0], label[1]) {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// result is the outcome of one attempt of a claim.
func result(c *model.ClaimedTask, status model.TaskStatus, code int, next *time.Time) model.AttemptResult {
	body := "ok"
	return model.AttemptResult{
		Attempt: model.Attempt{TaskID: c.ID, Attempt: c.Attempt, StartedAt: time.Now(), Duration: time.Millisecond,
			StatusCode: &code, Outcome: "success", ResponseBody: &body},
		ClaimToken: c.ClaimToken, Status: status, NextAttemptAt: next,
	}
}

// taskOf reads a task back.
func taskOf(t *testing.T, db *store.DB, tenantID, id uuid.UUID) *model.Task {
	t.Helper()
	task, err := db.GetTask(context.Background(), tenantID, id)
	require.NoError(t, err)
	return task
}

// waitTimers waits until the code under test waits on n timers of the fake
// clock, failing the test after a while.
func waitTimers(t *testing.T, fake *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, fake.WaitForTimers(ctx, n), "waiting for %d timers", n)
}
