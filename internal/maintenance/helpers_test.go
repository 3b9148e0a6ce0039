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

// createTenant stores a tenant without limits of its own.
func createTenant(t *testing.T, db *store.DB) uuid.UUID {
	t.Helper()
	tenant := &model.Tenant{ID: uuid.Must(uuid.NewV7()), Name: "t-" + uuid.NewString()[:8],
		SigningSecrets: []model.SigningSecret{{ID: "ss_test", Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}
	require.NoError(t, db.CreateTenant(context.Background(), tenant,
		&model.APIKey{ID: uuid.NewString()[:8], SecretHash: []byte("h"), Scopes: []model.Scope{model.ScopeAll}},
		model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.created"}))
	return tenant.ID
}

// insertTask stores a task of the tenant to url, due at runAt.
func insertTask(t *testing.T, db *store.DB, tenantID uuid.UUID, url string, runAt time.Time) *model.Task {
	t.Helper()
	task := &model.Task{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenantID, URL: url, Method: "POST",
		Body: []byte(`{"n":1}`), RunAt: runAt.Truncate(time.Microsecond), Timeout: 5 * time.Second,
		MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute,
	}
	_, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

// claimNow claims the tasks in Postgres as the dispatcher's claimer would,
// so that their attempts can be recorded.
func claimNow(t *testing.T, db *store.DB, ids ...uuid.UUID) []*model.ClaimedTask {
	t.Helper()
	all := make([]int16, model.Partitions)
	for i := range all {
		all[i] = int16(i)
	}
	claims, err := db.ClaimTasks(context.Background(), uuid.New(), all, ids, time.Now().Add(time.Minute), 30*time.Second, nil)
	require.NoError(t, err)
	require.Len(t, claims, len(ids))
	for _, c := range claims {
		c.ClaimedAt = time.Now()
	}
	return claims
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
