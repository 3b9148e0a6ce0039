package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// nodeTTL is the heartbeat lease of the nodes in these tests: long enough
// that no lease runs out unless a test makes it.
const nodeTTL = time.Minute

// share is the most partitions a node may hold among live nodes.
func share(live int) int { return (model.Partitions + live - 1) / live }

func heartbeat(t *testing.T, db *store.DB, node uuid.UUID, ttl time.Duration) model.Membership {
	t.Helper()
	m, err := db.Heartbeat(context.Background(), node, "node-"+node.String()[:8], ttl)
	require.NoError(t, err)
	require.True(t, slices.IsSorted(m.Owned), "owned partitions in order: %v", m.Owned)
	require.LessOrEqual(t, len(m.Owned), share(m.LiveNodes), "no node holds more than its share")
	return m
}

// requireDisjoint requires that no partition is in two nodes' sets.
func requireDisjoint(t *testing.T, owned map[uuid.UUID][]int16) {
	t.Helper()
	holder := map[int16]uuid.UUID{}
	for node, ps := range owned {
		for _, p := range ps {
			prev, dup := holder[p]
			require.False(t, dup, "partition %d owned by %s and %s", p, prev, node)
			holder[p] = node
		}
	}
}

// requirePartitioned requires that the nodes' sets are disjoint and cover
// every partition.
func requirePartitioned(t *testing.T, owned map[uuid.UUID][]int16) {
	t.Helper()
	requireDisjoint(t, owned)
	var all []int16
	for _, ps := range owned {
		all = append(all, ps...)
	}
	slices.Sort(all)
	require.Equal(t, allPartitions(), all)
}

// balanced tells whether the nodes' sets are disjoint, cover every partition
// and are each no larger than a share among live nodes.
func balanced(owned map[uuid.UUID][]int16, live int) bool {
	seen := map[int16]bool{}
	for _, ps := range owned {
		if len(ps) > share(live) {
			return false
		}
		for _, p := range ps {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == model.Partitions
}

// settle heartbeats the nodes in turn, round after round, until a round
// leaves every node with what it had after the previous one, and that is a
// balanced split among them all. It returns each node's last membership and
// how many rounds it took, the unchanged last one included; it fails the test
// after maxRounds.
func settle(t *testing.T, db *store.DB, nodes []uuid.UUID, maxRounds int) (map[uuid.UUID]model.Membership, int) {
	t.Helper()
	var prev map[uuid.UUID][]int16
	for round := 1; round <= maxRounds; round++ {
		ms := map[uuid.UUID]model.Membership{}
		owned := map[uuid.UUID][]int16{}
		for _, node := range nodes {
			ms[node] = heartbeat(t, db, node, nodeTTL)
			owned[node] = ms[node].Owned
		}
		requireDisjoint(t, owned)
		steady := true
		for _, node := range nodes {
			steady = steady && ms[node].LiveNodes == len(nodes) && prev != nil && slices.Equal(prev[node], owned[node])
		}
		if steady && balanced(owned, len(nodes)) {
			return ms, round
		}
		prev = owned
	}
	require.FailNow(t, "heartbeats did not settle", "%d nodes, %d rounds", len(nodes), maxRounds)
	return nil, 0
}

func ownedSets(ms map[uuid.UUID]model.Membership) map[uuid.UUID][]int16 {
	owned := map[uuid.UUID][]int16{}
	for node, m := range ms {
		owned[node] = m.Owned
	}
	return owned
}

// ownersInSQL reads who holds each partition with a lease still running;
// uuid.Nil collects the partitions nobody holds.
func ownersInSQL(t *testing.T, pool *pgxpool.Pool) map[uuid.UUID][]int16 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT CASE WHEN lease_expires_at > now() THEN owner END, id FROM partitions ORDER BY id`)
	require.NoError(t, err)
	owners := map[uuid.UUID][]int16{}
	var (
		owner *uuid.UUID
		id    int16
	)
	_, err = pgx.ForEachRow(rows, []any{&owner, &id}, func() error {
		key := uuid.Nil
		if owner != nil {
			key = *owner
		}
		owners[key] = append(owners[key], id)
		return nil
	})
	require.NoError(t, err)
	return owners
}

// requireSQLAgrees requires that the partitions table gives each node exactly
// the partitions its last heartbeat reported, and nobody anything else.
func requireSQLAgrees(t *testing.T, pool *pgxpool.Pool, ms map[uuid.UUID]model.Membership) {
	t.Helper()
	want := map[uuid.UUID][]int16{}
	for node, m := range ms {
		if len(m.Owned) > 0 {
			want[node] = m.Owned
		}
	}
	require.Equal(t, want, ownersInSQL(t, pool))
}

func sizes(ms map[uuid.UUID]model.Membership, nodes []uuid.UUID) []int {
	out := make([]int, len(nodes))
	for i, node := range nodes {
		out[i] = len(ms[node].Owned)
	}
	return out
}

func TestHeartbeatSingleNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	node := uuid.New()

	first := heartbeat(t, db, node, nodeTTL)
	require.Equal(t, 1, first.LiveNodes)
	require.Equal(t, allPartitions(), first.Owned)
	requireSQLAgrees(t, pool, map[uuid.UUID]model.Membership{node: first})

	var name string
	var started, beat, expires time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT name, started_at, heartbeat_at, expires_at FROM nodes WHERE id = $1`, node).
		Scan(&name, &started, &beat, &expires))
	require.Equal(t, "node-"+node.String()[:8], name)
	require.Equal(t, nodeTTL, expires.Sub(beat))
	var leaseBefore time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(lease_expires_at) FROM partitions`).Scan(&leaseBefore))
	require.Equal(t, expires, leaseBefore, "leases run as long as the node's registration")

	second := heartbeat(t, db, node, nodeTTL)
	require.Equal(t, first, second)
	var started2, beat2, expires2 time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT started_at, heartbeat_at, expires_at FROM nodes WHERE id = $1`, node).
		Scan(&started2, &beat2, &expires2))
	require.Equal(t, started, started2)
	require.True(t, beat2.After(beat), "heartbeat_at renewed")
	require.True(t, expires2.After(expires), "registration renewed")
	require.Equal(t, model.Partitions, countRows(t, pool,
		`SELECT count(*) FROM partitions WHERE owner = $1 AND lease_expires_at = $2`, node, expires2), "every lease renewed")
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM nodes`))
}

// TestHeartbeatSharesAsNodesJoin: nodes join one at a time; after a few
// rounds of heartbeats the partitions are split among them, each partition
// held by exactly one node, none above ceil(256/n).
func TestHeartbeatSharesAsNodesJoin(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)

	tests := []struct {
		nodes      int
		wantMax    int // ceil(256/n)
		wantMin    int // what the others leave: 256 - (n-1)*ceil(256/n)
		wantRounds int // including the round that confirms nothing moves
	}{
		{1, 256, 256, 2},
		{2, 128, 128, 3},
		{3, 86, 84, 3},
		{4, 64, 64, 3},
		{5, 52, 48, 3},
	}
	var nodes []uuid.UUID
	for _, tt := range tests {
		// Sequential: each case adds a node to the last one's cluster.
		t.Run(fmt.Sprintf("%d nodes", tt.nodes), func(t *testing.T) {
			nodes = append(nodes, uuid.New())
			ms, rounds := settle(t, db, nodes, 5)
			t.Logf("%d nodes settled in %d rounds: %v", tt.nodes, rounds, sizes(ms, nodes))
			require.LessOrEqual(t, rounds, tt.wantRounds)
			requirePartitioned(t, ownedSets(ms))
			requireSQLAgrees(t, pool, ms)
			for _, node := range nodes {
				require.Equal(t, tt.nodes, ms[node].LiveNodes)
				require.LessOrEqual(t, len(ms[node].Owned), tt.wantMax)
				require.GreaterOrEqual(t, len(ms[node].Owned), tt.wantMin)
			}
		})
	}
}

// TestHeartbeatTakesOverFromDeadNode: the partitions of a node that stops
// heartbeating go to the survivors once its leases run out, and a node that
// comes back takes none of theirs.
func TestHeartbeatTakesOverFromDeadNode(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		kill func(t *testing.T, db *store.DB, pool *pgxpool.Pool, node uuid.UUID)
	}{
		{"registration and leases expired in SQL", func(t *testing.T, _ *store.DB, pool *pgxpool.Pool, node uuid.UUID) {
			exec(t, pool, `UPDATE nodes SET expires_at = now() - interval '1 second' WHERE id = $1`, node)
			exec(t, pool, `UPDATE partitions SET lease_expires_at = now() - interval '1 second' WHERE owner = $1`, node)
		}},
		{"last heartbeat with a 50ms ttl", func(t *testing.T, db *store.DB, _ *pgxpool.Pool, node uuid.UUID) {
			m := heartbeat(t, db, node, 50*time.Millisecond)
			require.NotEmpty(t, m.Owned, "it still owns its partitions until the ttl runs out")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, pool := openDB(t)
			a, b, dead := uuid.New(), uuid.New(), uuid.New()
			ms, _ := settle(t, db, []uuid.UUID{a, b, dead}, 5)
			deadOwned := ms[dead].Owned
			require.NotEmpty(t, deadOwned)

			tt.kill(t, db, pool, dead)

			// The survivors heartbeat until they have split everything
			// between them; with leases expired in SQL that is their first
			// round.
			survivors := map[uuid.UUID]model.Membership{}
			rounds := 0
			deadline := time.Now().Add(10 * time.Second)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				rounds++
				for _, node := range []uuid.UUID{a, b} {
					survivors[node] = heartbeat(t, db, node, nodeTTL)
				}
				if survivors[a].LiveNodes == 2 && survivors[b].LiveNodes == 2 &&
					len(survivors[a].Owned) == 128 && len(survivors[b].Owned) == 128 {
					break
				}
				require.True(t, time.Now().Before(deadline), "survivors never took over: %d and %d partitions",
					len(survivors[a].Owned), len(survivors[b].Owned))
				<-tick.C
			}
			t.Logf("taken over in %d rounds", rounds)
			requirePartitioned(t, ownedSets(survivors))
			requireSQLAgrees(t, pool, survivors)
			require.Zero(t, countRows(t, pool, `SELECT count(*) FROM partitions WHERE owner = $1`, dead))
			for _, p := range deadOwned {
				require.True(t, slices.Contains(survivors[a].Owned, p) || slices.Contains(survivors[b].Owned, p),
					"the dead node's partition %d was taken", p)
			}

			// The dead node comes back: it owns nothing the others hold, and
			// a few rounds later it has its share again.
			back := heartbeat(t, db, dead, nodeTTL)
			require.Equal(t, 3, back.LiveNodes)
			require.Empty(t, back.Owned, "nothing is free: the survivors' leases run")
			ms, rounds = settle(t, db, []uuid.UUID{a, b, dead}, 5)
			require.LessOrEqual(t, rounds, 3)
			requirePartitioned(t, ownedSets(ms))
			requireSQLAgrees(t, pool, ms)
			require.NotEmpty(t, ms[dead].Owned)
		})
	}
}

// TestLeaveNode: a node that leaves frees its partitions at once, without
// waiting for its leases to run out.
func TestLeaveNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	leaving, staying := uuid.New(), uuid.New()
	ms, _ := settle(t, db, []uuid.UUID{leaving, staying}, 5)
	require.Len(t, ms[leaving].Owned, 128)

	// Rows of nodes dead for over an hour are forgotten on the way; more
	// recent deaths stay on record.
	longDead, recentlyDead := uuid.New(), uuid.New()
	exec(t, pool, `INSERT INTO nodes (id, name, expires_at) VALUES ($1, 'long dead', now() - interval '2 hours'),
		($2, 'recently dead', now() - interval '10 minutes')`, longDead, recentlyDead)

	require.NoError(t, db.LeaveNode(ctx, leaving))
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM nodes WHERE id = $1`, leaving))
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM nodes WHERE id = $1`, longDead))
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM nodes WHERE id = $1`, recentlyDead))
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM partitions WHERE owner = $1`, leaving))
	require.Equal(t, 128, countRows(t, pool, `SELECT count(*) FROM partitions WHERE owner IS NULL AND lease_expires_at IS NULL`))

	m := heartbeat(t, db, staying, nodeTTL)
	require.Equal(t, 1, m.LiveNodes)
	require.Equal(t, allPartitions(), m.Owned, "one heartbeat takes everything the leaver freed")
	requireSQLAgrees(t, pool, map[uuid.UUID]model.Membership{staying: m})

	// Leaving twice, or as a node never seen, is harmless.
	require.NoError(t, db.LeaveNode(ctx, leaving))
	require.NoError(t, db.LeaveNode(ctx, uuid.New()))
	require.Equal(t, m, heartbeat(t, db, staying, nodeTTL))
}

// TestHeartbeatConcurrent: nodes heartbeating at the same moment never get
// one partition each, and settle on a split.
func TestHeartbeatConcurrent(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	nodes := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	beat := func(node uuid.UUID) (model.Membership, error) {
		m, err := db.Heartbeat(context.Background(), node, "node-"+node.String()[:8], nodeTTL)
		if err == nil && len(m.Owned) > share(m.LiveNodes) {
			err = fmt.Errorf("%d partitions among %d live nodes", len(m.Owned), m.LiveNodes)
		}
		return m, err
	}

	// In rounds: every node heartbeats from its own goroutine, all released
	// at once. With every lease running, what the heartbeats of one round
	// report never overlaps: a partition changes hands only once its holder
	// has committed giving it up, or, free, to one taker only.
	round := func() map[uuid.UUID]model.Membership {
		results := make([]model.Membership, len(nodes))
		errs := make([]error, len(nodes))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, node := range nodes {
			wg.Go(func() {
				<-start
				results[i], errs[i] = beat(node)
			})
		}
		close(start)
		wg.Wait()
		ms := map[uuid.UUID]model.Membership{}
		for i, node := range nodes {
			require.NoError(t, errs[i])
			ms[node] = results[i]
		}
		requireDisjoint(t, ownedSets(ms))
		return ms
	}
	settleConcurrently := func(maxRounds int) (map[uuid.UUID]model.Membership, int) {
		var prev map[uuid.UUID][]int16
		for rounds := 1; rounds <= maxRounds; rounds++ {
			ms := round()
			owned := ownedSets(ms)
			steady := prev != nil
			for _, node := range nodes {
				steady = steady && ms[node].LiveNodes == len(nodes) && slices.Equal(prev[node], owned[node])
			}
			if steady && balanced(owned, len(nodes)) {
				return ms, rounds
			}
			prev = owned
		}
		require.FailNow(t, "concurrent heartbeats did not settle", "%d rounds", maxRounds)
		return nil, 0
	}

	// The three join at the same moment.
	ms, rounds := settleConcurrently(5)
	t.Logf("joined and settled in %d concurrent rounds: %v", rounds, sizes(ms, nodes))
	requirePartitioned(t, ownedSets(ms))
	requireSQLAgrees(t, pool, ms)

	// Free-running, no rounds: the three heartbeat as fast as they can while
	// a fourth joins, heartbeats and leaves, so that partitions are released
	// and taken all the while. Nothing fails (no deadlock between their row
	// locks) and nobody ever holds more than its share.
	extra := uuid.New()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes)+1)
	for i, node := range append(slices.Clone(nodes), extra) {
		wg.Go(func() {
			for range 30 {
				if _, errs[i] = beat(node); errs[i] != nil {
					return
				}
			}
			if node == extra {
				errs[i] = db.LeaveNode(context.Background(), extra)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	ms, rounds = settleConcurrently(5)
	t.Logf("settled again in %d concurrent rounds: %v", rounds, sizes(ms, nodes))
	requirePartitioned(t, ownedSets(ms))
	requireSQLAgrees(t, pool, ms)
}

// membershipListener collects the announcements of MembershipNotifyChannel
// on db, and of DueNotifyChannel on the same connection.
type membershipListener struct {
	changes chan model.MembershipChange
	due     chan model.DueTask
	pool    *pgxpool.Pool
}

// listenMembership listens on both channels until the test ends.
func listenMembership(t *testing.T, db *store.DB, pool *pgxpool.Pool) *membershipListener {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	l := &membershipListener{changes: make(chan model.MembershipChange, 256), due: make(chan model.DueTask, 256), pool: pool}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Listen(ctx, func() { close(ready) }, model.Listeners{
			Due:        func(d model.DueTask) { l.due <- d },
			Membership: func(c model.MembershipChange) { l.changes <- c },
		})
	}()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done, "a canceled listener returns nil")
	})
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "Listen returned before listening", "%v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Listen never became ready")
	}
	return l
}

// drain returns every membership change announced so far, in order.
// Postgres delivers notifications in commit order, so a marker announced
// after the statements under test arrives after all they announced.
func (l *membershipListener) drain(t *testing.T) []model.MembershipChange {
	t.Helper()
	marker := uuid.New()
	exec(t, l.pool, `SELECT pg_notify($1, $2::text || ' left')`, store.MembershipNotifyChannel, marker)
	var out []model.MembershipChange
	for {
		select {
		case c := <-l.changes:
			if c.Node == marker {
				return out
			}
			out = append(out, c)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the marker notification never came")
		}
	}
}

// TestMembershipNotifications: a heartbeat or a leave announces a change on
// MembershipNotifyChannel exactly when other nodes have something to do
// about it: a node that was not live registered, partitions were released,
// a node left. Renewing, acquiring, or leaving again announce nothing, so
// the heartbeats they cause on other nodes die out.
func TestMembershipNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	l := listenMembership(t, db, pool)
	a, b := uuid.New(), uuid.New()
	change := func(node uuid.UUID, e model.MembershipEvent) []model.MembershipChange {
		return []model.MembershipChange{{Node: node, Event: e}}
	}

	require.Len(t, heartbeat(t, db, a, nodeTTL).Owned, model.Partitions)
	require.Equal(t, change(a, model.MembershipJoined), l.drain(t), "a new node")
	heartbeat(t, db, a, nodeTTL)
	require.Empty(t, l.drain(t), "a renewal")

	require.Empty(t, heartbeat(t, db, b, nodeTTL).Owned)
	require.Equal(t, change(b, model.MembershipJoined), l.drain(t), "a second node, which finds nothing free")
	heartbeat(t, db, b, nodeTTL)
	require.Empty(t, l.drain(t), "below its share, but nothing to take")

	require.Len(t, heartbeat(t, db, a, nodeTTL).Owned, 128)
	require.Equal(t, change(a, model.MembershipReleased), l.drain(t), "the excess of the first node")
	heartbeat(t, db, a, nodeTTL)
	require.Empty(t, l.drain(t), "at its share")

	require.Len(t, heartbeat(t, db, b, nodeTTL).Owned, 128)
	require.Empty(t, l.drain(t), "acquiring frees nothing")

	// A node whose registration ran out is dead to the others; its next
	// heartbeat brings it back, which changes their shares again.
	exec(t, pool, `UPDATE nodes SET expires_at = now() - interval '1 second' WHERE id = $1`, b)
	heartbeat(t, db, b, nodeTTL)
	require.Equal(t, change(b, model.MembershipJoined), l.drain(t), "back to life")

	require.NoError(t, db.LeaveNode(ctx, b))
	require.Equal(t, change(b, model.MembershipLeft), l.drain(t))
	require.NoError(t, db.LeaveNode(ctx, b))
	require.NoError(t, db.LeaveNode(ctx, uuid.New()))
	require.Empty(t, l.drain(t), "leaving again, or as a node never seen")

	// A node that left with its row already gone still frees its partitions
	// and says so.
	require.Len(t, heartbeat(t, db, a, nodeTTL).Owned, model.Partitions)
	require.Empty(t, l.drain(t))
	exec(t, pool, `DELETE FROM nodes WHERE id = $1`, a)
	require.NoError(t, db.LeaveNode(ctx, a))
	require.Equal(t, change(a, model.MembershipLeft), l.drain(t))
	require.Equal(t, model.Partitions, countRows(t, pool, `SELECT count(*) FROM partitions WHERE owner IS NULL`))
}

// TestMembershipNotificationsOnCommit: a change is announced when the
// heartbeat commits and not before, so a node that hears it and heartbeats
// sees it: the release is visible to the heartbeat it causes.
func TestMembershipNotificationsOnCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	a, b := uuid.New(), uuid.New()
	heartbeat(t, db, a, nodeTTL)
	heartbeat(t, db, b, nodeTTL)
	l := listenMembership(t, db, pool)

	// b waits for a's release, then heartbeats once: it takes all that a
	// released.
	heartbeat(t, db, a, nodeTTL)
	select {
	case c := <-l.changes:
		require.Equal(t, model.MembershipChange{Node: a, Event: model.MembershipReleased}, c)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no release announced")
	}
	m, err := db.Heartbeat(ctx, b, "b", nodeTTL)
	require.NoError(t, err)
	require.Len(t, m.Owned, 128)
}

// TestListenBothChannels: one Listen hears both channels and tells each
// announcement to its own function; malformed payloads are skipped.
func TestListenBothChannels(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	l := listenMembership(t, db, pool)
	task, node := uuid.New(), uuid.New()
	exec(t, pool, `SELECT pg_notify($1, 'not a change')`, store.MembershipNotifyChannel)
	exec(t, pool, `SELECT pg_notify($1, $2::text || ' exploded')`, store.MembershipNotifyChannel, node)
	exec(t, pool, `SELECT pg_notify($1, 'not a task')`, store.DueNotifyChannel)
	exec(t, pool, `SELECT pg_notify($1, $2::text || ' 1893553445123456')`, store.DueNotifyChannel, task)
	exec(t, pool, `SELECT pg_notify($1, $2::text || ' joined')`, store.MembershipNotifyChannel, node)

	require.Equal(t, []model.MembershipChange{{Node: node, Event: model.MembershipJoined}}, l.drain(t))
	select {
	case d := <-l.due:
		require.Equal(t, task, d.ID)
		require.Equal(t, int64(1893553445123456), d.At.UnixMicro())
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the due task never came")
	}
	require.Empty(t, l.due)
}
