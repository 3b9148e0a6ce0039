package e2e_test

// A hookwheel process on a Redis Cluster and behind Sentinel, each a
// deployment of the test's own, delivering a stream of tasks while a Redis
// master is killed under it.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestRedisClusterMasterKilled: one process on a Redis Cluster of three
// masters delivers 500 tasks falling due over 5 s; 2 s in, a master is
// killed with SIGKILL and its replica takes its slots. Every task arrives and
// is recorded delivered, every delivery is recorded as an attempt, and a
// task arrives twice only when it was in flight at the kill, with the same
// Idempotency-Key.
func TestRedisClusterMasterKilled(t *testing.T) {
	t.Parallel()
	cluster := storetest.PrivateRedisCluster(t)
	runRedisFailover(t, redisFailover{
		name:    "cluster",
		url:     cluster.URL(),
		count:   500,
		spread:  5 * time.Second,
		killAt:  2 * time.Second,
		killing: func() string { return cluster.Masters()[0] },
		kill: func(victim string) string {
			promoted := cluster.KillMaster(victim)
			require.NotContains(t, cluster.Masters(), victim)
			return promoted
		},
	})
}

// TestRedisSentinelMasterKilled is TestRedisClusterMasterKilled behind
// Sentinel: 400 tasks over 4 s, the master killed 1.5 s in and the replica
// promoted by the Sentinels.
func TestRedisSentinelMasterKilled(t *testing.T) {
	t.Parallel()
	sentinel := storetest.PrivateRedisSentinel(t)
	runRedisFailover(t, redisFailover{
		name:    "sentinel",
		url:     sentinel.URL(),
		count:   400,
		spread:  4 * time.Second,
		killAt:  1500 * time.Millisecond,
		killing: sentinel.Master,
		kill:    func(string) string { return sentinel.KillMaster() },
	})
}

// redisFailover is one run of runRedisFailover.
type redisFailover struct {
	name string
	url  string // REDIS_URL
	// count tasks fall due evenly over spread, a whole number of
	// microseconds apart (Postgres keeps microseconds).
	count  int
	spread time.Duration
	// killAt is when, after the first task falls due, the master is killed.
	killAt time.Duration
	// killing names the master to kill; kill kills it and returns once
	// another took its place, returning that one.
	killing func() string
	kill    func(victim string) string
}

// redisFailoverSlack bounds how much later than the failover itself (from
// the kill until the replica serves as master, as the test measured it) a
// task may arrive: the node's client has to find the new master (the
// Cluster client reloads the slots every second; the Sentinel client hears
// of the switch or asks again after an error), and then send what fell due
// meanwhile. The failover's own length is left out of the bound because the
// Redis servers decide it, and a split Sentinel vote or a slow election on
// a loaded 2-core machine can add seconds to it that hookwheel cannot
// shorten. The bound still fails a node that waits for its claims' leases
// or go-redis's default reload interval (a minute each).
const redisFailoverSlack = 6 * time.Second

// requireLogged polls the node's output until it contains want.
func requireLogged(t *testing.T, node *serveNode, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(node.logs.String(), want) {
		require.True(t, time.Now().Before(deadline), "%s: %q not in its output within %s:\n%s", node.name, want, within, node.logs.tail(50))
		<-tick.C
	}
}

func runRedisFailover(t *testing.T, f redisFailover) {
	t.Helper()
	const drain = 60 * time.Second
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, f.name, serveEnv(dbURL, f.url, "hookwheel:"))
	// The process's output reaches node.logs through a copying goroutine,
	// which may lag behind /readyz answering.
	requireLogged(t, node, "redis="+f.name, 10*time.Second)
	pid, _ := node.Running()
	apiKey := createTenantVia(t, node.base, chaosAdminToken, "redis-"+f.name)
	rcv := newCountingReceiver(t)

	t0 := time.Now().Add(creationLead(t, []string{node.base}, f.count, 6*time.Second)).Truncate(time.Millisecond)
	end := t0.Add(f.spread)
	tasks := planTasks(f.count, t0, f.spread)
	createBefore(t, t0, []string{node.base}, apiKey, rcv.URL+"/"+f.name, tasks)

	<-time.After(time.Until(t0.Add(f.killAt))) // pacing: the kill comes at a fixed point of the window
	victim := f.killing()
	arrived, _ := rcv.counts()
	killed := time.Now()
	promoted := f.kill(victim)
	failover := time.Since(killed)
	t.Logf("redis %s: master %s killed at t0%+.3fs (%d tasks had arrived); %s took its place %s later",
		f.name, victim, killed.Sub(t0).Seconds(), arrived, promoted, failover.Round(time.Millisecond))

	deadline := end.Add(drain)
	if err := rcv.waitDistinct(f.count, deadline); err != nil {
		logMissing(t, dbURL, tasks, rcv.snapshot())
		require.NoError(t, err)
	}
	t.Logf("every task arrived %s after the last fell due", time.Since(tasks[len(tasks)-1].runAt).Round(time.Millisecond))
	require.NoError(t, waitTasksInStatus(node.base, apiKey, "delivered", f.count, deadline))
	extra := rcv.settle(time.Second)

	hits := rcv.snapshot()
	first, duplicated := checkHits(t, tasks, hits)
	duplicates := len(hits) - len(first)
	var around latencies
	for _, task := range tasks {
		if h, ok := first[task.id]; ok && !task.runAt.Before(killed.Add(-500*time.Millisecond)) && task.runAt.Before(killed.Add(5*time.Second)) {
			around = append(around, h.lateness())
		}
	}
	all := firstLateness(first).sorted()
	t.Logf("redis %s: lateness of all %d tasks: %s; of those due from 0.5 s before the kill to 5 s after: %s",
		f.name, f.count, all, around)
	t.Logf("redis %s: %d duplicate deliveries of %d tasks; %d deliveries after all were recorded delivered",
		f.name, duplicates, len(duplicated), extra)

	// Every delivery the receiver saw is an attempt in Postgres: Redis going
	// away loses nothing that Postgres records.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var recorded int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&recorded))
	require.Equal(t, len(hits), recorded, "every delivery is recorded as an attempt")

	// A duplicate is a send that was in flight when the master died: its
	// first delivery reached the receiver shortly before the kill, and
	// another came after it, with the same Idempotency-Key.
	byID := map[string][]hit{}
	for _, h := range hits {
		byID[h.id] = append(byID[h.id], h)
	}
	for _, id := range duplicated {
		ds := byID[id]
		slices.SortFunc(ds, func(a, b hit) int { return a.arrived.Compare(b.arrived) })
		require.False(t, ds[0].arrived.Before(killed.Add(-inFlightWindow)) || ds[0].arrived.After(killed.Add(killSlack)),
			"task %s arrived %d times, the first at t0%+.3fs, not within %s before the kill", id, len(ds), ds[0].arrived.Sub(t0).Seconds(), inFlightWindow)
		for _, d := range ds[1:] {
			require.Equal(t, ds[0].idemKey, d.idemKey, "every delivery of task %s carries the same Idempotency-Key", id)
		}
	}
	require.LessOrEqual(t, duplicates, chaosSenders, "more duplicates than sends in flight at the kill")
	require.LessOrEqual(t, all[len(all)-1], failover+redisFailoverSlack,
		"a Redis failover must not hold sends back for much longer than Redis took to fail over (%s)", failover.Round(time.Millisecond))

	status, body, err := apiCall(ctx, http.MethodGet, node.base+"/readyz", "", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "ready after the failover: %s", body)
	now, running := node.Running()
	require.True(t, running && now == pid, "the same process went on by itself")
	require.NoError(t, node.Term(30*time.Second), "SIGTERM must stop hookwheel with exit status 0")
}
