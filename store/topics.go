package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

const topicColumns = `tenant_id, name, description, endpoints, created_at, updated_at`

func scanTopic(row pgx.Row, extra ...any) (*model.Topic, error) {
	var t model.Topic
	err := row.Scan(append([]any{&t.TenantID, &t.Name, &t.Description, &t.Endpoints, &t.CreatedAt, &t.UpdatedAt}, extra...)...)
	if err != nil {
		return nil, err
	}
	if t.Endpoints == nil {
		t.Endpoints = []model.TopicEndpoint{}
	}
	return &t, nil
}

// A topic that exists is replaced whatever the quota; a new one is inserted
// only while the tenant has fewer than $5 topics. The count, like the
// schedules' quota, checks and does not reserve: concurrent creations may
// together overshoot it by what they add. xmax is 0 on a row version the
// statement inserted, and the updating transaction's id on one ON CONFLICT
// replaced: the usual way to tell the two apart in one statement.
const queryPutTopic = `-- name: PutTopic
INSERT INTO topics (tenant_id, name, description, endpoints)
SELECT $1, $2, $3, $4
WHERE EXISTS (SELECT 1 FROM topics WHERE tenant_id = $1 AND name = $2)
	OR (SELECT count(*) FROM (SELECT 1 FROM topics WHERE tenant_id = $1 LIMIT $5) n) < $5
ON CONFLICT (tenant_id, name) DO UPDATE
	SET description = excluded.description, endpoints = excluded.endpoints, updated_at = now()
RETURNING ` + topicColumns + `, xmax = 0`

// PutTopic creates the tenant's topic t.Name, or replaces its description
// and endpoints, and fills in t's times. created says which. A new topic
// past the tenant's maxTopics fails with model.ErrTopicQuota. audit, when
// not nil, gives the entry recording the change, which is written in the
// same transaction.
func (db *DB) PutTopic(ctx context.Context, t *model.Topic, maxTopics int, audit func(created bool) *model.AuditEntry) (created bool, err error) {
	if t.Endpoints == nil {
		t.Endpoints = []model.TopicEndpoint{}
	}
	var stored *model.Topic
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		stored, err = scanTopic(tx.QueryRow(ctx, queryPutTopic, t.TenantID, t.Name, t.Description, t.Endpoints, maxTopics), &created)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, audit, created)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, model.ErrTopicQuota
	}
	if err != nil {
		return false, fmt.Errorf("put topic %q: %w", t.Name, err)
	}
	*t = *stored
	return created, nil
}

const queryGetTopic = `-- name: GetTopic
SELECT ` + topicColumns + ` FROM topics WHERE tenant_id = $1 AND name = $2`

// GetTopic reads one of a tenant's topics; ErrNotFound when it has none of
// that name.
func (db *DB) GetTopic(ctx context.Context, tenantID uuid.UUID, name string) (*model.Topic, error) {
	t, err := scanTopic(db.pool.QueryRow(ctx, queryGetTopic, tenantID, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get topic %q: %w", name, err)
	}
	return t, nil
}

const queryGetTopics = `-- name: GetTopics
SELECT ` + topicColumns + ` FROM topics WHERE tenant_id = $1 AND name = ANY($2::text[])`

// GetTopics reads those of names that the tenant has, by name.
func (db *DB) GetTopics(ctx context.Context, tenantID uuid.UUID, names []string) (map[string]*model.Topic, error) {
	rows, err := db.pool.Query(ctx, queryGetTopics, tenantID, names)
	if err != nil {
		return nil, fmt.Errorf("get %d topics: %w", len(names), err)
	}
	topics, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Topic, error) { return scanTopic(r) })
	if err != nil {
		return nil, fmt.Errorf("get %d topics: %w", len(names), err)
	}
	byName := make(map[string]*model.Topic, len(topics))
	for _, t := range topics {
		byName[t.Name] = t
	}
	return byName, nil
}

const queryListTopics = `-- name: ListTopics
SELECT ` + topicColumns + ` FROM topics
WHERE tenant_id = $1 AND ($2::text IS NULL OR name > $2)
ORDER BY name
LIMIT $3`

// ListTopics returns up to f.Limit of the tenant's topics in name order,
// byte by byte (the column's collation), walking the primary key.
func (db *DB) ListTopics(ctx context.Context, tenantID uuid.UUID, f model.TopicFilter) ([]*model.Topic, error) {
	rows, err := db.pool.Query(ctx, queryListTopics, tenantID, f.After, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	topics, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Topic, error) { return scanTopic(r) })
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	return topics, nil
}

const queryDeleteTopic = `-- name: DeleteTopic
DELETE FROM topics WHERE tenant_id = $1 AND name = $2
RETURNING ` + topicColumns

// DeleteTopic deletes one of a tenant's topics and returns it as it was;
// ErrNotFound when it has none of that name. The tasks published to it are
// left as they are. audit, when given, is recorded in the same transaction.
func (db *DB) DeleteTopic(ctx context.Context, tenantID uuid.UUID, name string, audit *model.AuditEntry) (*model.Topic, error) {
	var t *model.Topic
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) (err error) {
		if t, err = scanTopic(tx.QueryRow(ctx, queryDeleteTopic, tenantID, name)); err != nil {
			return err
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("delete topic %q: %w", name, err)
	}
	return t, nil
}
