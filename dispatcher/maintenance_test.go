package dispatcher

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestStagesRunMaintenance runs a whole dispatcher, alone in its database,
// to see the parts of internal/maintenance wired in: the attempt the sender
// made is counted and written when the dispatcher stops (the statistics stop
// after the senders, and their interval is far longer than the test), the
// purger deletes the delivered task once this node holds partition 0, and
// both report through the node's registerer.
func TestStagesRunMaintenance(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := storetest.DB(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	reg := prometheus.NewRegistry()
	d, err := New(Config{
		DB: db, Logger: quietLogger(), Registerer: reg,
		Guard:         netguard.New(netguard.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}),
		StatsInterval: time.Hour, Retention: time.Millisecond, RetentionInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	tenant := storetest.CreateTenant(t, db, model.Limits{})
	sent := time.Now()
	task := storetest.InsertTask(t, db, tenant, receiver.URL+"/hook", sent)
	d.Schedule(task.ID, task.RunAt)

	// Delivered, then purged: the task is gone.
	for {
		_, err := db.GetTask(ctx, tenant, task.ID)
		if err != nil {
			require.ErrorIs(t, err, model.ErrNotFound)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the delivered task was not purged in time")
		case <-time.After(10 * time.Millisecond):
		}
	}
	purged := gatheredValue(t, reg, "hookwheel_retention_purged_total", "tasks")
	require.Equal(t, 1.0, purged, "counted through the node's registerer")
	require.True(t, gatheredHas(t, reg, "hookwheel_retention_oldest_finished_age_seconds"))

	minute := sent.Truncate(time.Minute)
	stats := func() int64 {
		got, err := db.TaskStatsBetween(ctx, tenant, minute, minute.Add(2*time.Minute))
		require.NoError(t, err)
		var n int64
		for _, m := range got {
			n += m.Delivered
		}
		return n
	}
	require.Zero(t, stats(), "not written before the interval or the stop")
	stop()
	<-done
	require.EqualValues(t, 1, stats(), "written as the dispatcher stopped")
}

// gatheredValue reads the counter name with label value label as reg would
// have it scraped.
func gatheredValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{%s} not gathered", name, label)
	return 0
}

// gatheredHas says whether reg gathers a series named name.
func gatheredHas(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return true
		}
	}
	return false
}
