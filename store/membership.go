package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// MembershipNotifyChannel is the Postgres NOTIFY channel on which the
// membership statements announce, on commit, the changes after which other
// nodes should heartbeat at once: a node joined, released partitions or
// left. The payload is "<node id> <event>".
const MembershipNotifyChannel = "hookwheel_membership"

func parseMembershipNotification(payload string) (model.MembershipChange, error) {
	idText, event, ok := strings.Cut(payload, " ")
	if !ok {
		return model.MembershipChange{}, errors.New("want \"<node id> <event>\"")
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return model.MembershipChange{}, fmt.Errorf("parse node id: %w", err)
	}
	switch e := model.MembershipEvent(event); e {
	case model.MembershipJoined, model.MembershipReleased, model.MembershipLeft:
		return model.MembershipChange{Node: id, Event: e}, nil
	default:
		return model.MembershipChange{}, fmt.Errorf("unknown event %q", event)
	}
}

const (
	// A node that was not live before this heartbeat (new, or back after
	// its registration expired) changes every node's share: it says so on
	// MembershipNotifyChannel. prev reads the row as it was before the
	// upsert, since every part of one statement sees the same snapshot.
	queryHeartbeat = `-- name: Heartbeat
WITH prev AS (
	SELECT expires_at FROM nodes WHERE id = $1
), registered AS (
	INSERT INTO nodes (id, name, expires_at, backend_pid) VALUES ($1, $2, now() + $3::interval, $4)
	ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), expires_at = now() + $3::interval, backend_pid = $4
	RETURNING id
)
SELECT pg_notify('` + MembershipNotifyChannel + `', $1::text || ' ` + string(model.MembershipJoined) + `')
FROM registered
WHERE NOT EXISTS (SELECT 1 FROM prev WHERE expires_at > now())`

	queryLiveNodes = `-- name: LiveNodes
SELECT id FROM nodes WHERE expires_at > now() ORDER BY id`

	queryRenewPartitions = `-- name: RenewPartitions
UPDATE partitions SET lease_expires_at = now() + $2::interval WHERE owner = $1 RETURNING id`

	// Partitions set free are announced on MembershipNotifyChannel, for the
	// nodes below their share to take them now; nothing released, nothing
	// announced, so that heartbeats run early only while something moves.
	queryReleasePartitions = `-- name: ReleasePartitions
WITH released AS (
	UPDATE partitions SET owner = NULL, lease_expires_at = NULL WHERE owner = $1 AND id = ANY($2)
	RETURNING id
)
SELECT pg_notify('` + MembershipNotifyChannel + `', $1::text || ' ` + string(model.MembershipReleased) + `')
WHERE EXISTS (SELECT 1 FROM released)`

	queryAcquirePartitions = `-- name: AcquirePartitions
UPDATE partitions SET owner = $1, lease_expires_at = now() + $2::interval
WHERE id IN (
	SELECT id FROM partitions
	WHERE owner IS NULL OR lease_expires_at < now()
	ORDER BY id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
)
RETURNING id`

	queryForgetDeadNodes = `-- name: ForgetDeadNodes
DELETE FROM nodes WHERE expires_at < now() - interval '1 hour'`
)

// Heartbeat renews a node's registration and its partition leases for ttl,
// and moves partitions so that each live node holds its share: a node above
// its share gives the excess up, a node below it takes free or expired
// partitions. Row locks decide between nodes (SKIP LOCKED: a partition
// another node is taking is simply not taken here); an expired lease is up
// for grabs, which is how the partitions of a dead node move to survivors.
//
// The heartbeat that registers a node not live before and one that releases
// partitions announce it on MembershipNotifyChannel on commit, so that the
// other nodes move partitions at once rather than at their next heartbeat.
// Acquiring announces nothing: it frees nothing and changes no share.
//
// It goes through a connection of its own, never queued behind the pool's
// statements.
func (db *DB) Heartbeat(ctx context.Context, nodeID uuid.UUID, name string, ttl time.Duration) (model.Membership, error) {
	var m model.Membership
	// A node frozen (SIGSTOP, a long pause) between two statements of this
	// transaction would hold its partitions' row locks, which the other
	// nodes' takeover passes over, for as long as it stays frozen: the
	// session is ended instead once it idles in the transaction for a
	// third of ttl, and the locks with it.
	begin := pgx.TxOptions{BeginQuery: fmt.Sprintf("BEGIN; SET LOCAL idle_in_transaction_session_timeout = %d",
		max(ttl/3, time.Millisecond).Milliseconds())}
	err := pgx.BeginTxFunc(ctx, db.membership, begin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, queryHeartbeat, nodeID, name, ttl, db.heartbeatBackend(tx)); err != nil {
			return fmt.Errorf("register node: %w", err)
		}
		rows, err := tx.Query(ctx, queryLiveNodes)
		if err != nil {
			return fmt.Errorf("list live nodes: %w", err)
		}
		live, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("list live nodes: %w", err)
		}
		m.LiveNodes, m.Live = len(live), live
		rows, err = tx.Query(ctx, queryRenewPartitions, nodeID, ttl)
		if err != nil {
			return fmt.Errorf("renew partitions: %w", err)
		}
		owned, err := pgx.CollectRows(rows, pgx.RowTo[int16])
		if err != nil {
			return fmt.Errorf("renew partitions: %w", err)
		}
		share := model.FairShare(live, nodeID)
		switch {
		case len(owned) > share:
			excess := owned[share:]
			if _, err := tx.Exec(ctx, queryReleasePartitions, nodeID, excess); err != nil {
				return fmt.Errorf("release %d partitions: %w", len(excess), err)
			}
			owned = owned[:share]
		case len(owned) < share:
			rows, err := tx.Query(ctx, queryAcquirePartitions, nodeID, ttl, share-len(owned))
			if err != nil {
				return fmt.Errorf("acquire partitions: %w", err)
			}
			gained, err := pgx.CollectRows(rows, pgx.RowTo[int16])
			if err != nil {
				return fmt.Errorf("acquire partitions: %w", err)
			}
			owned = append(owned, gained...)
		}
		m.Owned = owned
		return nil
	})
	if err != nil {
		return model.Membership{}, fmt.Errorf("heartbeat of node %s: %w", nodeID, err)
	}
	slices.Sort(m.Owned)
	return m, nil
}

// heartbeatBackend is the server process of the heartbeat's connection, for
// SucceedDeadNamesakes to tell whether it still runs; nil behind a
// transaction pooler, where the process the client sees is the pooler's.
func (db *DB) heartbeatBackend(tx pgx.Tx) any {
	if db.pooled {
		return nil
	}
	return int32(tx.Conn().PgConn().PID())
}

// A namesake is dead when the server process of its heartbeat connection is
// gone: Postgres ends a backend as soon as its client's socket closes, which
// the kernel does when the client process dies, however it died. A frozen
// process keeps its socket, and so its lease. The leases are ended the way
// LeaveNode ends them, and announced the same way, so that the other nodes
// take their share of the partitions at once.
const querySucceedDeadNamesakes = `-- name: SucceedDeadNamesakes
WITH dead AS (
	UPDATE nodes n SET expires_at = now()
	WHERE n.name = $2 AND n.id <> $1 AND n.expires_at > now() AND n.backend_pid IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = n.backend_pid)
	RETURNING n.id
), released AS (
	UPDATE partitions p SET owner = NULL, lease_expires_at = NULL
	FROM dead WHERE p.owner = dead.id
	RETURNING p.id
)
SELECT dead.id FROM dead
CROSS JOIN LATERAL (SELECT pg_notify('` + MembershipNotifyChannel + `', dead.id::text || ' ` + string(model.MembershipLeft) + `')) AS announced`

// SucceedDeadNamesakes ends at once the registration and partition leases
// of the live nodes registered under name whose heartbeat connection is
// gone, and returns their ids; their claims are then a dead node's, for
// RecoverClaims to hand back. It is for a node restarted in place: a name
// that only one process at a time can hold (the host's name and the address
// it listens on) lets it prove that its predecessor died, rather than wait
// out the predecessor's lease. Nodes registered through a transaction
// pooler are never succeeded this way.
func (db *DB) SucceedDeadNamesakes(ctx context.Context, nodeID uuid.UUID, name string) ([]uuid.UUID, error) {
	rows, err := db.membership.Query(ctx, querySucceedDeadNamesakes, nodeID, name)
	if err != nil {
		return nil, fmt.Errorf("succeed dead nodes named %q: %w", name, err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("succeed dead nodes named %q: %w", name, err)
	}
	return dead, nil
}

const queryLeaveNode = `-- name: LeaveNode
WITH released AS (
	UPDATE partitions SET owner = NULL, lease_expires_at = NULL WHERE owner = $1
	RETURNING id
), gone AS (
	DELETE FROM nodes WHERE id = $1
	RETURNING id
)
SELECT pg_notify('` + MembershipNotifyChannel + `', $1::text || ' ` + string(model.MembershipLeft) + `')
WHERE EXISTS (SELECT 1 FROM released) OR EXISTS (SELECT 1 FROM gone)`

// LeaveNode unregisters a node that stops cleanly and frees its partitions
// at once, so survivors need not wait for the leases to run out, and
// announces it on MembershipNotifyChannel so that they take the partitions
// now rather than at their next heartbeat. Leaving again announces nothing.
func (db *DB) LeaveNode(ctx context.Context, nodeID uuid.UUID) error {
	if _, err := db.membership.Exec(ctx, queryLeaveNode, nodeID); err != nil {
		return fmt.Errorf("leave node %s: %w", nodeID, err)
	}
	if _, err := db.pool.Exec(ctx, queryForgetDeadNodes); err != nil {
		return fmt.Errorf("forget dead nodes: %w", err)
	}
	return nil
}

// A lease counts while it has not expired and its owner is a live node; the
// two expire together (one heartbeat renews both), so the join only guards
// against a partition row outliving its node's.
const queryListNodes = `-- name: ListNodes
SELECT n.id, n.name, n.started_at, n.heartbeat_at, n.expires_at,
	coalesce(array_agg(p.id ORDER BY p.id) FILTER (WHERE p.id IS NOT NULL), '{}')
FROM nodes n
LEFT JOIN partitions p ON p.owner = n.id AND p.lease_expires_at > now()
WHERE n.expires_at > now()
GROUP BY n.id
ORDER BY n.started_at, n.id`

// ListNodes returns the live dispatcher nodes, oldest first, each with the
// partitions it holds a live lease on, ascending.
func (db *DB) ListNodes(ctx context.Context) ([]model.Node, error) {
	rows, err := db.pool.Query(ctx, queryListNodes)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Node, error) {
		var n model.Node
		err := r.Scan(&n.ID, &n.Name, &n.StartedAt, &n.HeartbeatAt, &n.ExpiresAt, &n.Partitions)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}
