package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// testMaxConns caps each test's pool: tests run in parallel against one
// Postgres whose max_connections other packages' tests share too.
const testMaxConns = 12

// openDB gives the test its own freshly migrated database and returns the
// store on it and a pool for raw SQL (the same pool).
func openDB(t testing.TB) (*store.DB, *pgxpool.Pool) {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: storetest.DatabaseURL(t), MaxConns: testMaxConns})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db, db.Pool()
}

// emptyDatabaseURL creates a database with no schema at all (storetest's are
// already migrated), dropped when the test ends. Its name follows storetest's
// pattern so that storetest sweeps it up if this test binary dies.
func emptyDatabaseURL(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, storetest.AdminDatabaseURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := fmt.Sprintf("hwtest_%d_%s", time.Now().Unix(), randomHex(t, 6))
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, storetest.AdminDatabaseURL())
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(storetest.AdminDatabaseURL())
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// createTenant stores a tenant with a random signing secret and one API key.
func createTenant(t testing.TB, db *store.DB) *model.Tenant {
	t.Helper()
	tenant, _ := createTenantWithKey(t, db)
	return tenant
}

// createTenantWithKey is createTenant, also returning the key's public id.
func createTenantWithKey(t testing.TB, db *store.DB) (*model.Tenant, string) {
	t.Helper()
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	tenant := &model.Tenant{
		ID:   uuid.Must(uuid.NewV7()),
		Name: "tenant-" + randomHex(t, 4),
		SigningSecrets: []model.SigningSecret{{ID: "ss_" + randomHex(t, 6),
			Value: "whsec_" + base64.StdEncoding.EncodeToString(secret), CreatedAt: time.Now()}},
	}
	key := &model.APIKey{ID: randomHex(t, 8), SecretHash: []byte("hash-" + randomHex(t, 8)), Scopes: []model.Scope{model.ScopeAll}}
	require.NoError(t, db.CreateTenant(context.Background(), tenant, key, model.AuditEntry{Actor: model.ActorCLI, Action: "tenant.created"}))
	return tenant, key.ID
}

// dbNow is Postgres's clock, which the claim and lease queries compare with.
func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now))
	return now
}

// µs truncates to the precision Postgres stores.
func µs(at time.Time) time.Time { return at.Truncate(time.Microsecond) }

// newTask is a complete, unsaved task of the tenant falling due at runAt.
func newTask(tenantID uuid.UUID, runAt time.Time) *model.Task {
	return &model.Task{
		ID:          uuid.Must(uuid.NewV7()),
		TenantID:    tenantID,
		URL:         "https://receiver.example/hooks/order",
		Method:      "POST",
		Headers:     map[string]string{"Content-Type": "application/json", "X-Order": "42"},
		Body:        []byte(`{"order": 42}`),
		RunAt:       µs(runAt),
		Timeout:     10 * time.Second,
		MaxAttempts: 10,
		MinBackoff:  time.Second,
		MaxBackoff:  time.Hour,
	}
}

// insertTask stores a new task due at runAt and requires that it was created.
func insertTask(t *testing.T, db *store.DB, tenantID uuid.UUID, runAt time.Time) *model.Task {
	t.Helper()
	task := newTask(tenantID, runAt)
	existing, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	require.Nil(t, existing)
	return task
}

// insertDueTask stores a task that fell due a minute ago (by Postgres's clock).
func insertDueTask(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID) *model.Task {
	t.Helper()
	return insertTask(t, db, tenantID, dbNow(t, pool).Add(-time.Minute))
}

// insertTaskIn stores a new task due at runAt in the given partition (the
// last byte of its id; the rest stays a UUIDv7).
func insertTaskIn(t *testing.T, db *store.DB, tenantID uuid.UUID, runAt time.Time, partition int16) *model.Task {
	t.Helper()
	task := newTask(tenantID, runAt)
	task.ID[15] = byte(partition)
	require.Equal(t, partition, model.PartitionOf(task.ID))
	_, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

// taskRow is the part of a task row the API does not return, read in SQL.
type taskRow struct {
	Status         string
	Attempts       int
	NextAttemptAt  *time.Time
	ClaimToken     *uuid.UUID
	ClaimedBy      *uuid.UUID
	LeaseExpiresAt *time.Time
	UpdatedAt      time.Time
}

// statusAsRead is a task row's status as the store reads it: a claimed task
// is dispatching whatever status it keeps (ClaimTasks).
const statusAsRead = `CASE WHEN claim_token IS NULL THEN status ELSE 'dispatching' END`

func readTaskRow(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) taskRow {
	t.Helper()
	var r taskRow
	err := pool.QueryRow(context.Background(),
		`SELECT `+statusAsRead+`, attempts, next_attempt_at, claim_token, claimed_by, lease_expires_at, updated_at FROM tasks WHERE id = $1`, id).
		Scan(&r.Status, &r.Attempts, &r.NextAttemptAt, &r.ClaimToken, &r.ClaimedBy, &r.LeaseExpiresAt, &r.UpdatedAt)
	require.NoError(t, err)
	return r
}

func countRows(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func exec(t testing.TB, pool *pgxpool.Pool, query string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), query, args...)
	require.NoError(t, err)
}

// allPartitions is every partition, for calls that do not care which.
func allPartitions() []int16 { return store.EveryPartition() }

// testNode is the dispatcher node that claimOne claims for. claimOne keeps it
// registered and live for an hour, so RecoverClaims leaves its claims alone
// until their leases run out.
var testNode = uuid.MustParse("0192d7a0-0000-7000-8000-00000000beef")

// registerNode makes node live in the nodes table for ttl from now, the way
// a heartbeat does, but without touching partitions.
func registerNode(t testing.TB, pool *pgxpool.Pool, node uuid.UUID, ttl time.Duration) {
	t.Helper()
	exec(t, pool, `INSERT INTO nodes (id, name, expires_at) VALUES ($1, 'test-node', now() + $2::interval)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), expires_at = excluded.expires_at`, node, ttl)
}

// claimOne claims one due task for testNode and requires that the claim succeeded.
func claimOne(t *testing.T, db *store.DB, pool *pgxpool.Pool, id uuid.UUID) *model.ClaimedTask {
	t.Helper()
	registerNode(t, pool, testNode, time.Hour)
	claims, err := db.ClaimTasks(context.Background(), testNode, allPartitions(), []uuid.UUID{id}, dbNow(t, pool), 30*time.Second, nil)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, id, claims[0].ID)
	return claims[0]
}

func taskIDs(tasks []*model.Task) []uuid.UUID {
	ids := make([]uuid.UUID, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

func claimIDs(claims []*model.ClaimedTask) []uuid.UUID {
	ids := make([]uuid.UUID, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	return ids
}

// sortDue orders due tasks as Postgres does: by time, then by the id's bytes.
func sortDue(due []model.DueTask) {
	sort.Slice(due, func(i, j int) bool {
		if !due[i].At.Equal(due[j].At) {
			return due[i].At.Before(due[j].At)
		}
		return bytes.Compare(due[i].ID[:], due[j].ID[:]) < 0
	})
}

// requireSameDue compares due lists exactly, times to the microsecond.
func requireSameDue(t *testing.T, want, got []model.DueTask) {
	t.Helper()
	norm := func(ds []model.DueTask) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = fmt.Sprintf("%s@%d", d.ID, d.At.UnixMicro())
		}
		return out
	}
	require.Equal(t, norm(want), norm(got))
}

func ptr[T any](v T) *T { return &v }

func secretIDs(secrets []model.SigningSecret) []string {
	ids := make([]string, len(secrets))
	for i, s := range secrets {
		ids[i] = s.ID
	}
	return ids
}
