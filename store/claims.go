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

// The CTE locks the rows in id order before the update: two nodes claiming
// overlapping batches listed in different orders would otherwise lock rows in
// different orders and deadlock. It selects by id alone, the conditions are
// checked on what it locked (which no one can change until the claim
// commits), and the update finds each row by its ctid. So the only plan is a
// primary-key probe per id. With the conditions on the scanned table instead,
// the cached generic plan Postgres switches to after five executions could
// walk tasks_due through every due task and filter the ids out of them, a
// cost that grew with the backlog (35 ms a claim with 7,000 tasks due). A row
// changed after the statement's snapshot is skipped, like any claim lost to a
// concurrent writer. The CTE's columns and the tenant's are renamed so that
// none shadows a task column: the RETURNING list is claimedColumns, read by
// the one task scanner, plus the signing secrets, the body's size, the
// tenant's max_timeout (its own, else its plan's) and the private ranges granted to it, its plan
// (the usage metrics' label), and the task's trace context (empty for none).
const queryClaimTasks = `-- name: ClaimTasks
WITH due AS (
	SELECT ctid AS due_ctid, status AS due_status, next_attempt_at AS due_at, partition AS due_partition,
		claim_token AS due_claim, ordering_key IS NOT NULL AS due_keyed,
		tenant_id AS due_tenant, flow_key AS due_flow_key, url AS due_url, ` + orderingBlocked + ` AS due_parked
	FROM tasks t
	WHERE id = ANY($1::uuid[])
	ORDER BY id
	FOR UPDATE
)
UPDATE tasks t
SET status = CASE WHEN due.due_keyed AND NOT due.due_parked THEN 'dispatching' ELSE t.status END,
	attempts = CASE WHEN due.due_parked THEN t.attempts ELSE t.attempts + 1 END,
	claim_token = CASE WHEN due.due_parked THEN NULL ELSE $3::uuid END,
	claimed_by = CASE WHEN due.due_parked THEN NULL ELSE $5::uuid END,
	lease_expires_at = CASE WHEN due.due_parked THEN NULL
		ELSE now() + (t.timeout_ms * interval '1 millisecond') + $4::interval END,
	next_attempt_at = CASE WHEN due.due_parked THEN NULL ELSE t.next_attempt_at END,
	updated_at = CASE WHEN due.due_keyed THEN now() ELSE t.updated_at END
FROM due
	LEFT JOIN LATERAL (` + flowLimitOf + `) fl ON true,
	(SELECT id AS signing_tenant, signing_secrets,
		coalesce(nullif((limits->>'max_timeout')::bigint, 0),
			(SELECT (p.limits->>'max_timeout')::bigint FROM plans p WHERE p.name = tenants.plan), 0) AS tenant_max_timeout,
		target_allow_cidrs, plan AS tenant_plan
		FROM tenants) tn
WHERE t.ctid = due.due_ctid AND tn.signing_tenant = due.due_tenant
	AND due.due_status IN ('scheduled', 'retrying') AND due.due_claim IS NULL
	AND due.due_at <= $2 AND due.due_partition = ANY($6) AND due.due_tenant <> ALL($8::uuid[])
	AND (due.due_tenant <> ALL($9::uuid[])
		OR (due.due_tenant::text || ' ' || coalesce(hookwheel_target_key(due.due_url), '')) <> ALL($10::text[]))
	AND due.due_partition <> ALL (` + leasedElsewhere + `)
RETURNING ` + claimedColumns + `, tn.signing_secrets, octet_length(t.body), tn.tenant_max_timeout,
	tn.target_allow_cidrs, due.due_parked,
	coalesce(fl.flow_rate, 0), coalesce(fl.flow_period_ms, 0), coalesce(fl.flow_parallelism, 0), tn.tenant_plan,
	coalesce(t.trace_parent, ''), coalesce(t.trace_state, '')`

// leasedElsewhere lists the partitions another node holds an unexpired lease
// on. Uncorrelated, it is read once per claim: as a NOT EXISTS probe per
// claimed row, the planner chose a scan of the whole partitions table for
// each row (256 rows read per task, a third of the statement's time in
// BenchmarkClaimTasks).
const leasedElsewhere = `ARRAY(SELECT p.id FROM partitions p WHERE p.owner <> $5 AND p.lease_expires_at > now())`

// flowLimitOf is the flow limit of a claimed task with a flow key: its
// key's own, else its tenant's default ('*'); no row when neither exists.
// LATERAL with LIMIT makes it one or two primary-key probes per keyed task,
// and the outer-only IS NOT NULL test makes it none for a task without a key.
const flowLimitOf = `SELECT f.rate AS flow_rate, f.period_ms AS flow_period_ms, f.parallelism AS flow_parallelism
		FROM flow_limits f
		WHERE due.due_flow_key IS NOT NULL AND f.tenant_id = due.due_tenant
			AND f.key IN (due.due_flow_key COLLATE "C", '` + model.DefaultFlowKey + `')
		ORDER BY f.key = '` + model.DefaultFlowKey + `'
		LIMIT 1`

// claimedColumns is taskColumns with the body left out (NULL) when it is
// longer than $7 bytes, and the labels, the ordering key and the endpoint's
// name always left out (the flow key stays: the sender's limits use it): they are never sent, and a claim carries only what
// the send needs. The callback URLs stay: the sender decides at the outcome
// whether a callback task is due. So do the publish and topic, which the
// webhook's Hookwheel-Topic and Hookwheel-Publish-Id headers carry, and the
// expiry, which the sender checks as the send starts.
const claimedColumns = `id, tenant_id, status, url, method, headers,
	CASE WHEN octet_length(t.body) <= $7 THEN t.body END, run_at, next_attempt_at,
	timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, attempts, last_status_code, last_error,
	idempotency_key, request_hash, created_at, updated_at, attempt_base, schedule_id, NULL::jsonb,
	callback, failure_callback, callback_of, callback_task_id, NULL::text,
	publish_id, topic, NULL::text, flow_key, expires_at, claim_token`

// ClaimBodyInline is the longest body a claim carries. A longer one is read
// just before it is sent (TaskBody): claims wait in memory for their
// instant, their target or their tenant's share, and bodies of up to 1 MiB
// each held by thousands of claims would make a node's memory follow
// whoever sends the largest bodies to the slowest receivers.
const ClaimBodyInline = 16 << 10

// ClaimTasks moves the given tasks from waiting to dispatching for node in one
// statement, provided they still wait, are due at now and belong to one of
// the given partitions, and no other node holds an unexpired lease on their
// partition: a node whose view of its partitions is stale (it was paused,
// or its heartbeat was late) claims nothing another node has taken over.
// (The dispatcher claims nothing at all once it cannot prove its own lease
// by its clock, so a lease that lapsed with no one taking it over is not
// claimed under either.) The check of status and claim token is
// the compare-and-set that lets only one node own an attempt: a task already
// claimed, canceled or rescheduled later is silently left out of the result.
//
// A task is dispatching while it holds a claim token (claimed). A task
// without an ordering key keeps its stored status, due time and updated_at
// through the claim, so that the claim changes no indexed column and
// Postgres writes it without index entries (migration 00026): a waiting
// status with a token reads as dispatching (scanTaskWith, and every
// statement that tells waiting from dispatching asks for claim_token IS
// NULL). A keyed task's claim also sets status 'dispatching', which its
// ordering key's index (tasks_ordering_key_started) must see.
// The lease covers the attempt's timeout plus leaseMargin; a claim that
// outlives it is handed back by RecoverClaims.
//
// The claim commits without waiting for its WAL to reach disk
// (synchronous_commit off, for this transaction only): it is a lease, not an
// outcome, and waiting for the flush would add a disk sync to the lateness of
// every webhook. Other sessions see the claim at once, so the
// compare-and-set holds between nodes; only a crash of Postgres itself in the
// few milliseconds before the flush can forget a claim, and then the task is
// sent again with the same webhook-id, as after any crash mid-send. Outcomes
// (RecordAttempts) are committed synchronously.
//
// The tasks of the tenants held (suspended or being deleted), and those
// of a tenant to a target it paused, are left out like tasks claimed
// elsewhere: not claimed, no attempt counted. The caller keeps the set in
// memory; a filter on the tenant id the statement reads anyway costs
// nothing, where a join to the tenants' status would add to the hottest
// statement, and a task's target is computed only for the few tenants with
// a paused target: the claim leaves out a task of one of the tenants with
// a paused target (passed beside the list of paused targets, as
// model.HeldTargetKey writes them) whose tenant and target are in the
// list. No index holds the target; a URL it cannot read is no target.
func (db *DB) ClaimTasks(ctx context.Context, node uuid.UUID, partitions []int16, ids []uuid.UUID, now time.Time, leaseMargin time.Duration,
	held *model.Held,
) (claimed []*model.ClaimedTask, err error) {
	tenants, targetTenants, targets := heldArgs(held)
	token := uuid.New()
	// One round trip: the transaction, its setting, the ordering keys' locks
	// and the claim travel in a single pipeline.
	batch := &pgx.Batch{}
	batch.Queue(`BEGIN`)
	batch.Queue(`SET LOCAL synchronous_commit TO off`)
	batch.Queue(queryLockOrderingKeys, ids)
	batch.Queue(queryClaimTasks, ids, now, token, leaseMargin, node, partitions, ClaimBodyInline, tenants, targetTenants, targets)
	batch.Queue(`COMMIT`)
	var parked []uuid.UUID
	results := db.pool.SendBatch(ctx, batch)
	err = func() error {
		defer results.Close()
		for range 3 {
			if _, err := results.Exec(); err != nil {
				return err
			}
		}
		rows, err := results.Query()
		if err != nil {
			return err
		}
		all, err := pgx.CollectRows(rows, scanClaimedTask(token))
		if err != nil {
			return err
		}
		for _, c := range all {
			if c.parked {
				parked = append(parked, c.ID)
				continue
			}
			claimed = append(claimed, c.ClaimedTask)
		}
		_, err = results.Exec()
		return err
	}()
	if err != nil {
		return nil, fmt.Errorf("claim %d tasks: %w", len(ids), err)
	}
	if len(parked) > 0 {
		// The recheck the protocol needs (ordering.go). Should it fail, the
		// tasks it would have freed stay parked until their partition's next
		// owner releases orphans; the claims are made and stand.
		if _, err := db.releaseParked(ctx, parked); err != nil {
			db.logger.Warn("rechecking parked tasks failed; they wait for their partition's next owner", "err", err)
		}
	}
	return claimed, nil
}

// heldArgs are held's arguments for a statement: never nil, which
// Postgres would read as NULL and every comparison with it as unknown.
func heldArgs(held *model.Held) (tenants, targetTenants []uuid.UUID, targets []string) {
	tenants, targetTenants, targets = []uuid.UUID{}, []uuid.UUID{}, []string{}
	if held == nil {
		return tenants, targetTenants, targets
	}
	if held.Tenants != nil {
		tenants = held.Tenants
	}
	if held.TargetTenants != nil {
		targetTenants, targets = held.TargetTenants, held.Targets
	}
	return tenants, targetTenants, targets
}

// heldNothing reports whether held holds no tenant and no target.
func heldNothing(held *model.Held) bool {
	return held == nil || (len(held.Tenants) == 0 && len(held.TargetTenants) == 0)
}

// claimRow is a row of ClaimTasks: a claim, or a task parked behind its
// ordering key.
type claimRow struct {
	*model.ClaimedTask
	parked bool
}

func scanClaimedTask(token uuid.UUID) pgx.RowToFunc[claimRow] {
	var (
		headers jsonMemo[map[string]string]
		secrets jsonMemo[[]model.SigningSecret]
	)
	return func(r pgx.CollectableRow) (claimRow, error) {
		var c model.ClaimedTask
		var maxTimeoutNs int64
		var (
			parked                 bool
			flowPeriodMs           int64
			flowRate, flowParallel int32
			plan                   *string
		)
		err := scanTaskWith(r, &c.Task, headers.into(&c.Headers), secrets.into(&c.SigningSecrets),
			&c.BodySize, &maxTimeoutNs, &c.TargetAllowCIDRs, &parked, &flowRate, &flowPeriodMs, &flowParallel, &plan,
			&c.TraceParent, &c.TraceState)
		if plan != nil {
			c.TenantPlan = *plan
		}
		if c.FlowKey != nil && (flowRate > 0 || flowParallel > 0) {
			c.Flow = model.FlowLimit{TenantID: c.TenantID, Key: *c.FlowKey, Rate: int(flowRate),
				Period: time.Duration(flowPeriodMs) * time.Millisecond, Parallelism: int(flowParallel)}
		}
		c.TenantMaxTimeout = time.Duration(maxTimeoutNs)
		c.Attempt = c.Attempts
		c.ClaimToken = token
		return claimRow{ClaimedTask: &c, parked: parked}, err
	}
}

// staleClaim selects the claimed tasks of partitions $2 whose owner is
// gone: the lease ran out, or the claiming node stopped heartbeating. A
// claim without a node (written by an older hookwheel) waits for its lease.
// StaleClaims and RecoverClaims must agree on it, so it is written once.
//
// Keyed claims are found through tasks_dispatching; the others are among
// the waiting tasks due by now()+claimReach, read through tasks_due. A claim
// is made at most ClaimAhead+ClaimGroup before its task is due by the
// claiming node's clock (the dispatcher keeps those under MaxClaimAhead), so
// claimReach only leaves room for clocks that disagree; a claim further
// ahead than that is still found, once its task comes within reach. So the
// scan costs what is due or in flight, not what waits further ahead.
const staleClaim = `claim_token IS NOT NULL AND partition = ANY($2)
	AND (status = 'dispatching'
		OR (status IN ('scheduled', 'retrying') AND next_attempt_at <= now() + interval '` + claimReach + `'))
	AND (lease_expires_at < now()
		OR (claimed_by IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = tasks.claimed_by AND n.expires_at > now())))`

// MaxClaimAhead bounds how long before its due time a task may be claimed;
// claimReach is the stale-claim scan's reach past now(), MaxClaimAhead with
// room for clocks that disagree.
const (
	MaxClaimAhead = 10 * time.Second
	claimReach    = "1 minute"
)

const queryRecoverClaims = `-- name: RecoverClaims
WITH stale AS (
	SELECT id, claim_token, attempts FROM tasks
	WHERE ` + staleClaim + `
	ORDER BY lease_expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET status = CASE WHEN t.attempts > t.attempt_base + 1 THEN 'retrying' ELSE 'scheduled' END,
	attempts = t.attempts - 1, next_attempt_at = now(), claim_token = NULL, claimed_by = NULL,
	lease_expires_at = NULL, updated_at = now()
FROM stale
WHERE t.id = stale.id
RETURNING t.id, t.next_attempt_at, stale.attempts, stale.claim_token`

const queryStaleClaims = `-- name: StaleClaims
SELECT id, next_attempt_at, attempts, claim_token FROM tasks
WHERE ` + staleClaim + `
ORDER BY lease_expires_at
LIMIT $1`

// StaleClaims lists, without changing them, the claims RecoverClaims would
// hand back now: their fire-once claims in Redis must be freed first, so
// that a recovery cut short between the two cannot leave a task whose every
// new claim meets its dead owner's key.
func (db *DB) StaleClaims(ctx context.Context, partitions []int16, limit int) ([]model.RecoveredClaim, error) {
	rows, err := db.pool.Query(ctx, queryStaleClaims, limit, partitions)
	if err != nil {
		return nil, fmt.Errorf("list stale claims: %w", err)
	}
	stale, err := pgx.CollectRows(rows, scanRecoveredClaim)
	if err != nil {
		return nil, fmt.Errorf("list stale claims: %w", err)
	}
	return stale, nil
}

func scanRecoveredClaim(r pgx.CollectableRow) (model.RecoveredClaim, error) {
	var c model.RecoveredClaim
	err := r.Scan(&c.ID, &c.At, &c.Attempt, &c.Token)
	return c, err
}

// RecoverClaims returns to the queue the dispatching tasks of the given
// partitions whose owner is gone: its node stopped heartbeating (it died), or
// the attempt outlived its lease (it hung). The attempt number is given back,
// so the re-send carries the same attempt number and the same webhook-id and
// Idempotency-Key: a receiver that saw the first send can drop the second.
func (db *DB) RecoverClaims(ctx context.Context, partitions []int16, limit int) ([]model.RecoveredClaim, error) {
	rows, err := db.pool.Query(ctx, queryRecoverClaims, limit, partitions)
	if err != nil {
		return nil, fmt.Errorf("recover claims: %w", err)
	}
	recovered, err := pgx.CollectRows(rows, scanRecoveredClaim)
	if err != nil {
		return nil, fmt.Errorf("recover claims: %w", err)
	}
	return recovered, nil
}

// A task handed back in a partition its claimer no longer holds (it moved
// in a rebalance, or to a node that took over from this one while it was
// paused) is in no wheel: the partition's owner loaded it while it was
// claimed and passed over it, and its claimer does not arm what it does not
// own. So it is announced on DueNotifyChannel, for the owner to arm; found
// otherwise only by the owner's sweep, it was 5 to 10 s late. The claimer
// is read as it was (d.holder): the update clears it.
const queryDeferClaims = `-- name: DeferClaims
WITH deferred AS (
	UPDATE tasks t SET status = CASE WHEN t.attempts > t.attempt_base + 1 THEN 'retrying' ELSE 'scheduled' END,
		attempts = t.attempts - 1, next_attempt_at = greatest(t.next_attempt_at, d.not_before),
		claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
	FROM (SELECT d.id, d.token, d.not_before, o.claimed_by AS holder
		FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS d(id, token, not_before)
		JOIN tasks o ON o.id = d.id
		ORDER BY o.id
		FOR NO KEY UPDATE OF o) d
	WHERE t.id = d.id AND t.claim_token = d.token
	RETURNING t.id, t.partition, t.next_attempt_at, d.holder
)
SELECT pg_notify('` + DueNotifyChannel + `',
	deferred.id::text || ' ' || (extract(epoch FROM deferred.next_attempt_at) * 1000000)::bigint::text)
FROM deferred
WHERE NOT EXISTS (SELECT 1 FROM partitions p
	WHERE p.id = deferred.partition AND p.owner = deferred.holder AND p.lease_expires_at > now())`

// DeferClaims hands claimed tasks back unsent, as if never claimed, each to
// wait until its own NotBefore (or its due time, if later; a zero NotBefore
// keeps it due as it was): for claims a node shutting down will not send, or
// that it must not send yet. One statement for them all: a rate limit
// defers hundreds of tasks at once, each to a slot of its own, and a commit
// apiece would take longer than the first slots are away. No attempt is
// spent; claims no longer held under their token are left alone. A task
// handed back in a partition its claimer no longer holds is announced, for
// its owner to arm.
//
// Like the claim, it commits without waiting for the WAL flush: it gives a
// lease back and promises no one anything, and a deferral Postgres forgets
// in a crash leaves the claim to lapse and be recovered, the task due as
// before. Waiting for the flush made each deferral of a busy target's
// claims, one at a time, a disk sync.
func (db *DB) DeferClaims(ctx context.Context, claims []model.DeferredClaim) error {
	ids := make([]uuid.UUID, len(claims))
	tokens := make([]uuid.UUID, len(claims))
	notBefore := make([]time.Time, len(claims))
	for i, c := range claims {
		ids[i], tokens[i], notBefore[i] = c.ID, c.Token, c.NotBefore
	}
	batch := &pgx.Batch{}
	batch.Queue(`BEGIN`)
	batch.Queue(`SET LOCAL synchronous_commit TO off`)
	batch.Queue(queryDeferClaims, ids, tokens, notBefore)
	batch.Queue(`COMMIT`)
	if err := db.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("defer %d claims: %w", len(claims), err)
	}
	return nil
}

const queryClaimedBody = `-- name: ClaimedBody
SELECT body FROM tasks WHERE id = $1 AND claim_token = $2`

// ClaimedBody reads the body a claim left out (see ClaimBodyInline). It
// fails with model.ErrNotFound when the claim is no longer held under token.
func (db *DB) ClaimedBody(ctx context.Context, id, token uuid.UUID) ([]byte, error) {
	var body []byte
	err := db.pool.QueryRow(ctx, queryClaimedBody, id, token).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read body of task %s: %w", id, model.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read body of task %s: %w", id, err)
	}
	return body, nil
}
