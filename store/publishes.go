package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

const publishColumns = `id, tenant_id, topic, idempotency_key, request_hash, task_count, created_at`

func scanPublish(row pgx.Row) (*model.Publish, error) {
	var p model.Publish
	if err := row.Scan(&p.ID, &p.TenantID, &p.Topic, &p.IdempotencyKey, &p.RequestHash, &p.TaskCount, &p.CreatedAt); err != nil {
		return nil, err
	}
	return &p, nil
}

// As for tasks (queryInsertTasks), the unique index on the idempotency key,
// not a read-then-write, decides which of concurrent publishes with one key
// is stored, and rows go in in key order so that two calls sharing keys wait
// for each other in one direction only.
const queryInsertPublishes = `-- name: InsertPublishes
INSERT INTO publishes (id, tenant_id, topic, idempotency_key, request_hash, task_count)
SELECT id, tenant_id, topic, idempotency_key, request_hash, task_count
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bytea[], $6::integer[])
	AS i(id, tenant_id, topic, idempotency_key, request_hash, task_count)
WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys ik
	WHERE ik.tenant_id = i.tenant_id AND ik.kind = 'publish' AND ik.key = i.idempotency_key)
ORDER BY tenant_id, idempotency_key
ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, created_at`

// A statement of its own, after the insert, for the reason
// queryGetTasksByIdempotencyKeys is one.
const queryGetPublishesByIdempotencyKeys = `-- name: GetPublishesByIdempotencyKeys
SELECT ` + publishColumns + ` FROM publishes
WHERE (tenant_id, idempotency_key) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))
	AND idempotency_key IS NOT NULL
UNION ALL
SELECT ` + publishColumns + ` FROM (SELECT (jsonb_populate_record(NULL::publishes, snapshot)).* FROM idempotency_keys
	WHERE kind = 'publish' AND (tenant_id, key) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))) r`

// A publish's tasks got their UUIDv7 ids one after the other in endpoint
// order, from one process's monotonic generator: id order is endpoint order.
// Their bodies are not read: a publish's answer carries none (a publish may
// store 32 MiB of them), and each task's own read gives its body.
const queryListPublishTasks = `-- name: ListPublishTasks
SELECT ` + taskColumnsWithoutBody + ` FROM tasks WHERE publish_id = ANY($1::uuid[]) ORDER BY id`

// InsertPublishes stores publishes, each with its tasks (p.Tasks, which must
// carry its id), and tasks besides, in one transaction: all of them, or none
// when it fails. pubResults[i] tells what became of pubs[i], taskResults[j]
// of tasks[j], the latter as InsertTasks tells it.
//
// A publish whose idempotency key the tenant already used (by an earlier
// publish, or one before it in pubs) is not stored, nor are its tasks: the
// publish holding the key is returned as Existing, with its tasks as they
// are now. Tasks due before notifyBefore are announced on DueNotifyChannel
// on commit.
func (db *DB) InsertPublishes(ctx context.Context, pubs []*model.Publish, tasks []*model.Task,
	notifyBefore time.Time,
) (pubResults []model.PublishResult, taskResults []model.InsertResult, err error) {
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		pubResults, taskResults, err = insertPublishes(ctx, tx, createShard(), pubs, tasks, notifyBefore)
		return err
	})
	return pubResults, taskResults, err
}

// InsertPublishes is DB.InsertPublishes in the caller's transaction.
func (s TxStore) InsertPublishes(ctx context.Context, pubs []*model.Publish, tasks []*model.Task,
	notifyBefore time.Time,
) ([]model.PublishResult, []model.InsertResult, error) {
	if len(tasks) == 0 {
		return insertPublishes(ctx, s.q, enqueueShard(), pubs, tasks, notifyBefore)
	}
	shard, err := s.shard(ctx, tasks[0].TenantID)
	if err != nil {
		return nil, nil, err
	}
	return insertPublishes(ctx, s.q, shard, pubs, tasks, notifyBefore)
}

// insertPublishes is InsertPublishes through q, a transaction: the
// publishes' statements and their tasks' must commit together.
func insertPublishes(ctx context.Context, q Querier, shard int16, pubs []*model.Publish, tasks []*model.Task,
	notifyBefore time.Time,
) (pubResults []model.PublishResult, taskResults []model.InsertResult, err error) {
	pubResults = make([]model.PublishResult, len(pubs))
	var (
		// dupOf maps a publish to the earlier publish of this call holding
		// its key.
		dupOf      = map[int]int{}
		firstByKey = map[tenantKey]int{}
		sent       []int
		ids        [][16]byte
		tenantIDs  [][16]byte
		topics     []string
		keys       []*string
		hashes     [][]byte
		counts     []int32
	)
	for i, p := range pubs {
		if p.IdempotencyKey != nil {
			k := tenantKey{p.TenantID, *p.IdempotencyKey}
			if first, dup := firstByKey[k]; dup {
				dupOf[i] = first
				continue
			}
			firstByKey[k] = i
		}
		sent = append(sent, i)
		ids = append(ids, p.ID)
		tenantIDs = append(tenantIDs, p.TenantID)
		topics = append(topics, p.Topic)
		keys = append(keys, p.IdempotencyKey)
		hashes = append(hashes, p.RequestHash)
		counts = append(counts, int32(len(p.Tasks)))
	}
	err = func(tx Querier) error {
		created := make(map[uuid.UUID]time.Time, len(sent))
		if len(sent) > 0 {
			rows, err := tx.Query(ctx, queryInsertPublishes, ids, tenantIDs, topics, keys, hashes, counts)
			if err != nil {
				return fmt.Errorf("insert %d publishes: %w", len(sent), err)
			}
			var (
				id uuid.UUID
				at time.Time
			)
			if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error {
				created[id] = at
				return nil
			}); err != nil {
				return fmt.Errorf("insert %d publishes: %w", len(sent), err)
			}
		}

		// The tasks of the publishes stored go with the other tasks, in
		// one statement.
		all := append(make([]*model.Task, 0, len(tasks)), tasks...)
		var lookupTenants [][16]byte
		var lookupKeys []string
		for _, i := range sent {
			p := pubs[i]
			at, ok := created[p.ID]
			if !ok {
				if p.IdempotencyKey == nil {
					return fmt.Errorf("insert publish %s: skipped without an idempotency key", p.ID)
				}
				lookupTenants = append(lookupTenants, p.TenantID)
				lookupKeys = append(lookupKeys, *p.IdempotencyKey)
				continue
			}
			p.CreatedAt, p.TaskCount = at, len(p.Tasks)
			pubResults[i].Created = true
			all = append(all, p.Tasks...)
		}
		if len(all) > 0 {
			results, err := insertTasks(ctx, tx, shard, all, notifyBefore)
			if err != nil {
				return err
			}
			for _, r := range results[len(tasks):] {
				if !r.Created {
					// A publish's tasks carry no idempotency key: nothing can
					// keep one out.
					return errors.New("insert publish tasks: a task was not stored")
				}
			}
			taskResults = results[:len(tasks)]
		}

		if len(lookupKeys) > 0 {
			rows, err := tx.Query(ctx, queryGetPublishesByIdempotencyKeys, lookupTenants, lookupKeys)
			if err != nil {
				return fmt.Errorf("read %d publishes by idempotency key: %w", len(lookupKeys), err)
			}
			existing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Publish, error) { return scanPublish(r) })
			if err != nil {
				return fmt.Errorf("read %d publishes by idempotency key: %w", len(lookupKeys), err)
			}
			if err := withPublishTasks(ctx, tx, existing); err != nil {
				return err
			}
			byKey := make(map[tenantKey]*model.Publish, len(existing))
			for _, e := range existing {
				byKey[tenantKey{e.TenantID, *e.IdempotencyKey}] = e
			}
			for _, i := range sent {
				p := pubs[i]
				if pubResults[i].Created {
					continue
				}
				e, ok := byKey[tenantKey{p.TenantID, *p.IdempotencyKey}]
				if !ok {
					// The conflicting row went away in between (its tenant was deleted).
					return fmt.Errorf("read publish with idempotency key %q: %w", *p.IdempotencyKey, model.ErrNotFound)
				}
				pubResults[i].Existing = e
			}
		}
		return nil
	}(q)
	if err != nil {
		return nil, nil, fmt.Errorf("store %d publishes and %d tasks: %w", len(pubs), len(tasks), err)
	}
	for i, first := range dupOf {
		if pubResults[first].Created {
			pubResults[i].Existing = pubs[first]
		} else {
			pubResults[i].Existing = pubResults[first].Existing
		}
	}
	if taskResults == nil {
		taskResults = make([]model.InsertResult, len(tasks))
	}
	return pubResults, taskResults, nil
}

// withPublishTasks reads the tasks of pubs into them, as they are now.
func withPublishTasks(ctx context.Context, q Querier, pubs []*model.Publish) error {
	if len(pubs) == 0 {
		return nil
	}
	ids := make([][16]byte, len(pubs))
	byID := make(map[uuid.UUID]*model.Publish, len(pubs))
	for i, p := range pubs {
		ids[i], byID[p.ID] = p.ID, p
		p.Tasks = []*model.Task{}
	}
	rows, err := q.Query(ctx, queryListPublishTasks, ids)
	if err != nil {
		return fmt.Errorf("read the tasks of %d publishes: %w", len(pubs), err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Task, error) { return scanTask(r) })
	if err != nil {
		return fmt.Errorf("read the tasks of %d publishes: %w", len(pubs), err)
	}
	for _, t := range tasks {
		if p := byID[*t.PublishID]; p != nil {
			p.Tasks = append(p.Tasks, t)
		}
	}
	return nil
}

const queryGetPublish = `-- name: GetPublish
SELECT ` + publishColumns + ` FROM publishes WHERE tenant_id = $1 AND id = $2`

// GetPublish reads one of a tenant's publishes with its tasks as they are
// now; another tenant's or an unknown id is ErrNotFound.
func (db *DB) GetPublish(ctx context.Context, tenantID, id uuid.UUID) (*model.Publish, error) {
	p, err := scanPublish(db.pool.QueryRow(ctx, queryGetPublish, tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get publish %s: %w", id, err)
	}
	if err := withPublishTasks(ctx, db.pool, []*model.Publish{p}); err != nil {
		return nil, fmt.Errorf("get publish %s: %w", id, err)
	}
	return p, nil
}

const queryHasPublishKey = `-- name: HasPublishKey
SELECT EXISTS (SELECT 1 FROM publishes WHERE tenant_id = $1 AND idempotency_key = $2)
	OR EXISTS (SELECT 1 FROM idempotency_keys WHERE tenant_id = $1 AND kind = 'publish' AND key = $2)`

// HasPublishKey reports whether the tenant already made a publish with this
// idempotency key.
func (db *DB) HasPublishKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error) {
	return hasPublishKey(ctx, db.pool, tenantID, key)
}

// HasPublishKey is DB.HasPublishKey in the caller's transaction.
func (s TxStore) HasPublishKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error) {
	return hasPublishKey(ctx, s.q, tenantID, key)
}

func hasPublishKey(ctx context.Context, q Querier, tenantID uuid.UUID, key string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, queryHasPublishKey, tenantID, key).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up publish idempotency key: %w", err)
	}
	return ok, nil
}
