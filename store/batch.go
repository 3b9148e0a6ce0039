package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The batch insert passes one array per column and unnests them in SQL: one
// statement, one round trip and one commit for the whole batch, however many
// tasks it holds, and a fixed number of bind parameters (a multi-row VALUES
// list would need 13 per task and a new statement text per batch size).
// Labels travel as JSON text like headers, NULL for a task without them, so
// that a batch without labels stores NULLs and pays for no JSON at all; so do
// the publish, topic and endpoint of a task that is not a publish's.
//
// Rows whose (tenant, idempotency key) already exists are skipped by ON
// CONFLICT DO NOTHING: the unique constraint, not a read-then-write, decides,
// so concurrent batches and single calls with the same key create exactly
// one task. A row whose key another transaction is inserting waits for that
// transaction; rows go in in key order so that two batches sharing keys wait
// for each other in one direction only, never in a deadlock. The tasks
// falling due soon are announced on DueNotifyChannel by the same statement,
// so that every dispatcher learns of them on commit, and the rows inserted
// are added to their tenants' tasks created today (countTasksCreated).
const queryInsertTasks = `-- name: InsertTasks
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::bytea[],
		$7::timestamptz[], $8::integer[], $9::integer[], $10::bigint[], $11::bigint[], $12::text[], $13::bytea[],
		$14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::uuid[], $20::text[], $21::text[],
		$22::text[], $24::timestamptz[], $25::text[], $26::text[])
		AS i(id, tenant_id, url, method, headers, body, run_at, timeout_ms, max_attempts, min_backoff_ms,
			max_backoff_ms, idempotency_key, request_hash, notify, labels, callback, failure_callback, ordering_key,
			publish_id, topic, endpoint_name, flow_key, expires_at, trace_parent, trace_state)
),
inserted AS (
	INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at,
		timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, idempotency_key, request_hash, labels,
		callback, failure_callback, ordering_key, publish_id, topic, endpoint_name, flow_key, expires_at,
		trace_parent, trace_state)
	SELECT id, tenant_id, 'scheduled', url, method, headers::jsonb, body, run_at, run_at,
		timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, idempotency_key, request_hash, labels::jsonb,
		callback, failure_callback, ordering_key, publish_id, topic, endpoint_name, flow_key, expires_at,
		trace_parent, trace_state
	FROM input
	WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys ik
		WHERE ik.tenant_id = input.tenant_id AND ik.kind = 'task' AND ik.key = input.idempotency_key)
	ORDER BY tenant_id, idempotency_key
	ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id, tenant_id, created_at, updated_at, $23::smallint AS shard
), ` + countTasksCreated + `
SELECT ins.id, ins.created_at, ins.updated_at,
	CASE WHEN i.notify IS NOT NULL THEN pg_notify('` + DueNotifyChannel + `', i.notify) END
FROM inserted ins JOIN input i ON i.id = ins.id`

// A separate statement, not a branch of the insert: rows committed by a
// concurrent writer after the insert's snapshot was taken (the very rows the
// insert conflicted with) are invisible to any part of that statement.
const queryGetTasksByIdempotencyKeys = `-- name: GetTasksByIdempotencyKeys
SELECT ` + taskColumns + ` FROM tasks
WHERE (tenant_id, idempotency_key) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))
	AND idempotency_key IS NOT NULL
UNION ALL
SELECT ` + taskColumns + ` FROM (` + rememberedTasks + `
	WHERE kind = 'task' AND (tenant_id, key) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))) r`

// InsertTasks stores new scheduled tasks, like InsertTask (counted
// likewise), in one statement and one round trip; a second one reads the tasks whose idempotency key was
// already taken, when there are any. results[i] tells what became of
// tasks[i]. Within the call, the first task with a given (tenant, key) is the
// one stored; later ones get it as Existing. Tasks due before notifyBefore are
// announced on DueNotifyChannel on commit.
//
// The statement is all or nothing: an error stores none of the tasks.
func (db *DB) InsertTasks(ctx context.Context, tasks []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error) {
	return insertTasks(ctx, db.pool, createShard(), tasks, notifyBefore)
}

// tenantKey is an idempotency key with the tenant it belongs to.
type tenantKey struct {
	tenant uuid.UUID
	key    string
}

// insertTasks is InsertTasks through q: the pool, or a caller's transaction
// (TxStore, or InsertPublishes's own).
// Its tasks count in shard of their tenants' usage.
func insertTasks(ctx context.Context, q Querier, shard int16, tasks []*model.Task, notifyBefore time.Time) (_ []model.InsertResult, err error) {
	ctx, span := startInsertSpan(ctx, "InsertTasks", len(tasks))
	defer func() { endInsertSpan(span, err) }()
	var (
		results = make([]model.InsertResult, len(tasks))
		// dupOf maps a task to the earlier task of this call holding its key.
		dupOf      = map[int]int{}
		firstByKey = map[tenantKey]int{}
		sent       = make([]int, 0, len(tasks))
		n          = len(tasks)
		// Ids go as [16]byte: pgx encodes a uuid.UUID through its
		// driver.Valuer, as text, at several times the cost.
		ids       = make([][16]byte, 0, n)
		tenantIDs = make([][16]byte, 0, n)
		urls      = make([]string, 0, n)
		methods   = make([]string, 0, n)
		headers   = make([]string, 0, n)
		bodies    = make([][]byte, 0, n)
		runAts    = make([]time.Time, 0, n)
		timeouts  = make([]int32, 0, n)
		maxAtt    = make([]int32, 0, n)
		minBack   = make([]int64, 0, n)
		maxBack   = make([]int64, 0, n)
		keys      = make([]*string, 0, n)
		hashes    = make([][]byte, 0, n)
		notify    = make([]*string, 0, n)
		labels    = make([]*string, 0, n)
		callbacks = make([]*string, 0, n)
		failures  = make([]*string, 0, n)
		orderKeys = make([]*string, 0, n)
		flowKeys  = make([]*string, 0, n)
		publishes = make([]*[16]byte, 0, n)
		topics    = make([]*string, 0, n)
		endpoints = make([]*string, 0, n)
		expiries  = make([]*time.Time, 0, n)
		parents   = make([]*string, 0, n)
		states    = make([]*string, 0, n)
	)
	for i, t := range tasks {
		if t.IdempotencyKey != nil {
			k := tenantKey{t.TenantID, *t.IdempotencyKey}
			if first, dup := firstByKey[k]; dup {
				dupOf[i] = first
				continue
			}
			firstByKey[k] = i
		}
		if t.Body == nil {
			t.Body = []byte{} // a nil slice would be NULL
		}
		if t.Headers == nil {
			t.Headers = map[string]string{}
		}
		h, err := json.Marshal(t.Headers)
		if err != nil {
			return nil, fmt.Errorf("encode headers of task %s: %w", t.ID, err)
		}
		var labelsJSON *string
		if len(t.Labels) > 0 {
			l, err := json.Marshal(t.Labels)
			if err != nil {
				return nil, fmt.Errorf("encode labels of task %s: %w", t.ID, err)
			}
			text := string(l)
			labelsJSON = &text
		}
		var payload *string
		if t.RunAt.Before(notifyBefore) {
			p := t.ID.String() + " " + strconv.FormatInt(t.RunAt.UnixMicro(), 10)
			payload = &p
		}
		sent = append(sent, i)
		ids = append(ids, t.ID)
		tenantIDs = append(tenantIDs, t.TenantID)
		urls = append(urls, t.URL)
		methods = append(methods, t.Method)
		headers = append(headers, string(h))
		bodies = append(bodies, t.Body)
		runAts = append(runAts, t.RunAt)
		timeouts = append(timeouts, int32(t.Timeout.Milliseconds()))
		maxAtt = append(maxAtt, int32(t.MaxAttempts))
		minBack = append(minBack, t.MinBackoff.Milliseconds())
		maxBack = append(maxBack, t.MaxBackoff.Milliseconds())
		keys = append(keys, t.IdempotencyKey)
		hashes = append(hashes, t.RequestHash)
		notify = append(notify, payload)
		labels = append(labels, labelsJSON)
		callbacks = append(callbacks, t.Callback)
		failures = append(failures, t.FailureCallback)
		orderKeys = append(orderKeys, t.OrderingKey)
		flowKeys = append(flowKeys, t.FlowKey)
		var publishID *[16]byte
		if t.PublishID != nil {
			id := [16]byte(*t.PublishID)
			publishID = &id
		}
		publishes = append(publishes, publishID)
		topics = append(topics, t.Topic)
		endpoints = append(endpoints, t.EndpointName)
		expiries = append(expiries, t.ExpiresAt)
		parents = append(parents, nullIfEmpty(t.TraceParent))
		states = append(states, nullIfEmpty(t.TraceState))
	}
	if len(sent) == 0 {
		return results, nil
	}

	type stamps struct{ created, updated time.Time }
	created := make(map[uuid.UUID]stamps, len(sent))
	rows, err := q.Query(ctx, queryInsertTasks, ids, tenantIDs, urls, methods, headers, bodies, runAts,
		timeouts, maxAtt, minBack, maxBack, keys, hashes, notify, labels, callbacks, failures, orderKeys,
		publishes, topics, endpoints, flowKeys, shard, expiries, parents, states)
	if err != nil {
		return nil, fmt.Errorf("insert %d tasks: %w", len(sent), err)
	}
	var (
		id      uuid.UUID
		s       stamps
		ignored *string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &s.created, &s.updated, &ignored}, func() error {
		created[id] = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d tasks: %w", len(sent), err)
	}

	var lookupTenants [][16]byte
	var lookupKeys []string
	for _, i := range sent {
		t := tasks[i]
		st, ok := created[t.ID]
		if ok {
			next := t.RunAt
			t.Status, t.NextAttemptAt, t.CreatedAt, t.UpdatedAt = model.StatusScheduled, &next, st.created, st.updated
			results[i].Created = true
			continue
		}
		if t.IdempotencyKey == nil {
			// Only the idempotency key constraint is allowed to skip a row.
			return nil, fmt.Errorf("insert task %s: skipped without an idempotency key", t.ID)
		}
		lookupTenants = append(lookupTenants, t.TenantID)
		lookupKeys = append(lookupKeys, *t.IdempotencyKey)
	}
	if len(lookupKeys) > 0 {
		rows, err := q.Query(ctx, queryGetTasksByIdempotencyKeys, lookupTenants, lookupKeys)
		if err != nil {
			return nil, fmt.Errorf("read %d tasks by idempotency key: %w", len(lookupKeys), err)
		}
		existing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Task, error) { return scanTask(r) })
		if err != nil {
			return nil, fmt.Errorf("read %d tasks by idempotency key: %w", len(lookupKeys), err)
		}
		byKey := make(map[tenantKey]*model.Task, len(existing))
		for _, e := range existing {
			byKey[tenantKey{e.TenantID, *e.IdempotencyKey}] = e
		}
		for _, i := range sent {
			t := tasks[i]
			if results[i].Created {
				continue
			}
			e, ok := byKey[tenantKey{t.TenantID, *t.IdempotencyKey}]
			if !ok {
				// The conflicting row went away in between (its tenant was deleted).
				return nil, fmt.Errorf("read task with idempotency key %q: %w", *t.IdempotencyKey, model.ErrNotFound)
			}
			results[i].Existing = e
		}
	}

	for i, first := range dupOf {
		if results[first].Created {
			results[i].Existing = tasks[first]
		} else {
			results[i].Existing = results[first].Existing
		}
	}
	return results, nil
}
