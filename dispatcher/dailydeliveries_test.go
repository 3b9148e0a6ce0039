package dispatcher

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestDeliveriesPerDayHolds runs a whole dispatcher: a tenant whose plan
// allows two deliveries a day has two delivered and the rest of its due
// tasks held, unattempted, due at the next UTC midnight, while another
// tenant's flow; usage_days and the usage metrics (by plan) count what was
// recorded.
func TestDeliveriesPerDayHolds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := storetest.DB(t)
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[strings.TrimPrefix(r.URL.Path, "/")]++
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(receiver.Close)
	audit := model.AuditEntry{Actor: model.ActorCLI, Action: "x"}
	_, err := db.PutPlan(ctx, &model.Plan{Name: "metered", Limits: model.Limits{DeliveriesPerDay: 2}}, audit)
	require.NoError(t, err)
	capped, free := storetest.CreateTenant(t, db, model.Limits{}), storetest.CreateTenant(t, db, model.Limits{})
	plan := "metered"
	_, err = db.SetTenantPlan(ctx, capped, &plan, audit)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	d, err := New(Config{
		DB: db, Logger: quietLogger(), Registerer: reg,
		Guard:         netguard.New(netguard.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}),
		StatsInterval: time.Hour,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	now := time.Now()
	var cappedTasks, freeTasks []*model.Task
	for range 5 {
		cappedTasks = append(cappedTasks, storetest.InsertTask(t, db, capped, receiver.URL+"/capped", now))
	}
	for range 3 {
		freeTasks = append(freeTasks, storetest.InsertTask(t, db, free, receiver.URL+"/free", now))
	}
	for _, task := range append(append([]*model.Task{}, cappedTasks...), freeTasks...) {
		d.Schedule(task.ID, task.RunAt)
	}

	day, _, err := db.DeliveriesToday(ctx, []uuid.UUID{capped})
	require.NoError(t, err)
	midnight := day.AddDate(0, 0, 1)
	for {
		delivered, heldTasks := 0, 0
		for _, task := range cappedTasks {
			got := taskOf(t, db, capped, task.ID)
			switch {
			case got.Status == model.StatusDelivered:
				delivered++
			case got.NextAttemptAt != nil && got.NextAttemptAt.Equal(midnight) && got.Status == model.StatusScheduled:
				require.Zero(t, got.Attempts, "held, not attempted")
				heldTasks++
			}
		}
		freeDone := 0
		for _, task := range freeTasks {
			if taskOf(t, db, free, task.ID).Status == model.StatusDelivered {
				freeDone++
			}
		}
		if delivered == 2 && heldTasks == 3 && freeDone == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("capped: %d delivered, %d held; free: %d delivered", delivered, heldTasks, freeDone)
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	require.Equal(t, map[string]int{"capped": 2, "free": 3}, got, "the held tasks were never sent")
	mu.Unlock()

	usage, err := db.TenantUsage(ctx, capped, day, day)
	require.NoError(t, err)
	require.Len(t, usage, 1)
	require.Equal(t, model.UsageCounts{TasksCreated: 5, Deliveries: 2, Attempts: 2, BytesSent: 2 * 7, BytesReceived: 2 * 2},
		usage[0].UsageCounts)
	require.Equal(t, 2.0, gatheredValue(t, reg, "hookwheel_usage_deliveries_total", "metered"))
	require.Equal(t, 3.0, gatheredValue(t, reg, "hookwheel_usage_deliveries_total", "none"))
	require.Equal(t, 6.0, gatheredValue(t, reg, "hookwheel_usage_bytes_received_total", "none"))
	require.Equal(t, 3.0, gatheredValue(t, reg, "hookwheel_deferrals_total", "deliveries_per_day"))
}
