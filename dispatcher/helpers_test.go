package dispatcher

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

// testMetrics registers a fresh set of metrics for one test.
func testMetrics(t testing.TB) *metrics {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

// counterValue reads a counter or gauge.
func counterValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	require.NoError(t, c.Write(&out))
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	}
	t.Fatalf("not a counter or gauge: %v", &out)
	return 0
}

// histogramCount reads how many observations a histogram has, and their sum.
func histogramCount(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var out dto.Metric
	require.NoError(t, h.Write(&out))
	return out.Histogram.GetSampleCount(), out.Histogram.GetSampleSum()
}

func allPartitions() []int16 {
	all := make([]int16, model.Partitions)
	for i := range all {
		all[i] = int16(i)
	}
	return all
}

// taskOf reads a task back.
func taskOf(t *testing.T, db *store.DB, tenantID, id uuid.UUID) *model.Task {
	t.Helper()
	task, err := db.GetTask(context.Background(), tenantID, id)
	require.NoError(t, err)
	return task
}

// receive waits for one value on ch, failing the test after a while.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received in 10s")
		panic("unreachable")
	}
}

// waitTimers waits until the code under test waits on n timers of the fake
// clock, failing the test after a while.
func waitTimers(t *testing.T, fake *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, fake.WaitForTimers(ctx, n), "waiting for %d timers", n)
}
