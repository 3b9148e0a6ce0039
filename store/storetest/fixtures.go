package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// SigningSecrets is the one signing secret of the tenants CreateTenant makes.
func SigningSecrets() []model.SigningSecret {
	return []model.SigningSecret{{ID: "ss_test", Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
}

// CreateTenant stores a tenant with one API key and the given limits of its
// own (none when limits is the zero value), and returns its id.
func CreateTenant(t testing.TB, db *store.DB, limits model.Limits) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	tenant := &model.Tenant{ID: uuid.Must(uuid.NewV7()), Name: "t-" + uuid.NewString()[:8], SigningSecrets: SigningSecrets()}
	require.NoError(t, db.CreateTenant(ctx, tenant,
		&model.APIKey{ID: uuid.NewString()[:8], SecretHash: []byte("h"), Scopes: []model.Scope{model.ScopeAll}},
		model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.created"}))
	if !limits.Unset() {
		_, err := db.SetTenantLimits(ctx, tenant.ID, limits, model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.limits_changed"})
		require.NoError(t, err)
	}
	return tenant.ID
}

// InsertTask stores a task of the tenant to url, due at runAt, with a 5 s
// timeout and 3 attempts.
func InsertTask(t testing.TB, db *store.DB, tenantID uuid.UUID, url string, runAt time.Time) *model.Task {
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

// ClaimNow claims the tasks in Postgres as a dispatcher's claimer would, for
// a minute, so that parts which start from claims (sending, recording) can
// be tested without one.
func ClaimNow(t testing.TB, db *store.DB, ids ...uuid.UUID) []*model.ClaimedTask {
	t.Helper()
	every := make([]int16, model.Partitions)
	for i := range every {
		every[i] = int16(i)
	}
	claims, err := db.ClaimTasks(context.Background(), uuid.New(), every, ids, time.Now().Add(time.Minute), 30*time.Second, nil)
	require.NoError(t, err)
	require.Len(t, claims, len(ids))
	for _, c := range claims {
		c.ClaimedAt = time.Now()
	}
	return claims
}
