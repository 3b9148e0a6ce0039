package e2e_test

// Chaos tests: several real `hookwheel serve` processes sharing the work,
// killed and restarted; Postgres and Redis restarted under a running node.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store/storetest"
)

const (
	chaosAdminToken = "chaos-admin-token"
	// chaosSenders is each node's number of concurrent sends
	// (HOOKWHEEL_SENDERS, the default): at most that many sends are in
	// flight on a node when it is killed.
	chaosSenders = 128
	// inFlightWindow bounds how long before a kill a send that the kill
	// duplicates may have reached the receiver: the time between the
	// receiver getting a webhook and the sender's node recording the attempt
	// (milliseconds normally; generous for a loaded 2-core machine).
	inFlightWindow = 2 * time.Second
	// killSlack: a request the killed node had fully written may reach the
	// receiver's handler a moment after the kill.
	killSlack = 500 * time.Millisecond
	// maxFailover bounds how late any task may arrive in the kill test. A
	// killed node's tasks move when it is back (it takes its dead
	// predecessor's place as it starts: a second and its start-up), or,
	// when it stays down, once its lease runs out (nodeTTL and a heartbeat:
	// about 3.6 s). A task can go through two failovers in a row when the
	// node that took it over is killed before sending it. The bound leaves
	// room for that on a loaded machine and still fails when tasks wait for
	// their claims' leases to expire (a minute).
	maxFailover = 10 * time.Second
	// nodeTTL is the nodes' lease (HOOKWHEEL_NODE_TTL's default).
	nodeTTL = 3 * time.Second
)

// nodePoolMax caps each test node's Postgres pool. The tests' nodes share one
// Postgres, whose max_connections may be Debian's 100: at a node's default of
// 32, the three-node tests running side by side with the other packages'
// tests would pass it, and connections refused look like lost tasks. Ten is
// more than a node on two cores keeps busy.
const nodePoolMax = 10

// serveEnv is the environment of a test's hookwheel processes.
func serveEnv(databaseURL, redisURL, redisPrefix string) []string {
	return []string{
		"DATABASE_URL=" + withPoolMax(databaseURL, nodePoolMax),
		"REDIS_URL=" + redisURL,
		// Keys of this test's own in the shared Redis.
		"HOOKWHEEL_REDIS_PREFIX=" + redisPrefix,
		"HOOKWHEEL_ADMIN_TOKEN=" + chaosAdminToken,
		// The receiver is on 127.0.0.1.
		"HOOKWHEEL_ALLOW_PRIVATE_TARGETS=true",
		"HOOKWHEEL_SENDERS=" + strconv.Itoa(chaosSenders),
		"HOOKWHEEL_LOG_LEVEL=info",
		"HOOKWHEEL_LOG_FORMAT=text",
		// These tests measure what a node does with many tasks, large
		// bodies and long timeouts, far past a free tier's default limits;
		// TestNodeDefaultLimits checks those. A later entry wins.
		"HOOKWHEEL_DEFAULT_API_RATE=0",
		"HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS=0",
		"HOOKWHEEL_DEFAULT_MAX_SCHEDULES=0",
		"HOOKWHEEL_DEFAULT_MAX_TIMEOUT=0",
		"HOOKWHEEL_DEFAULT_DISPATCH_RATE=0",
		"HOOKWHEEL_DEFAULT_DISPATCH_CONCURRENCY=0",
	}
}

// withPoolMax adds pool_max_conns to a Postgres URL that has none.
func withPoolMax(databaseURL string, n int) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return databaseURL
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", strconv.Itoa(n))
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// cluster is several serve processes on one database and Redis prefix, and
// a tenant of theirs.
type cluster struct {
	nodes  []*serveNode
	bases  []string
	apiKey string
	dbURL  string
}

func startCluster(t *testing.T, size int) *cluster {
	t.Helper()
	dbURL := storetest.DatabaseURL(t)
	env := serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t))
	c := &cluster{dbURL: dbURL}
	for i := range size {
		n := newServe(t, "node"+strconv.Itoa(i), env)
		require.NoError(t, n.start())
		c.nodes = append(c.nodes, n)
		c.bases = append(c.bases, n.base)
	}
	for _, n := range c.nodes {
		require.NoError(t, n.waitReady(60*time.Second), n.logs.tail(50))
	}
	c.apiKey = createTenantVia(t, c.bases[0], chaosAdminToken, "chaos")
	return c
}

// termAll stops every node with SIGTERM and requires exit status 0.
func (c *cluster) termAll(t *testing.T) {
	t.Helper()
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Term(30 * time.Second)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "SIGTERM must stop hookwheel with exit status 0")
	}
}

// planTasks plans count tasks falling due evenly over [t0, t0+spread); every
// other one gets an Idempotency-Key at creation, the rest carry their id.
func planTasks(count int, t0 time.Time, spread time.Duration) []plannedTask {
	tasks := make([]plannedTask, count)
	for i := range tasks {
		tasks[i].runAt = t0.Add(time.Duration(i) * spread / time.Duration(count))
		if i%2 == 0 {
			tasks[i].idemKey = "chaos-" + strconv.Itoa(i)
		}
	}
	return tasks
}

// creationLead is how far ahead the first of count tasks must fall due for
// all of them to be created through the nodes' APIs before it does: twice
// the time the creation rate measured now would take (creating 500 tasks in
// a batch call, due in an hour, for a tenant of their own), plus 2 s, and at
// least min.
// Measuring keeps the tests short on a fast machine and still sound on a
// loaded one (go test ./... runs packages side by side).
func creationLead(t *testing.T, bases []string, count int, min time.Duration) time.Duration {
	t.Helper()
	const probes = 500
	apiKey := createTenantVia(t, bases[0], chaosAdminToken, "calibration")
	rcv := newCountingReceiver(t) // never called: the tasks fall due after the test
	probe := planTasks(probes, time.Now().Add(time.Hour).Truncate(time.Millisecond), time.Second)
	started := time.Now()
	createTasksInBatches(t, bases, apiKey, rcv.URL, probe)
	rate := float64(probes) / time.Since(started).Seconds()
	lead := max(min, 2*time.Second+time.Duration(2*float64(count)/rate*float64(time.Second)))
	t.Logf("the nodes create %.0f tasks/s: the first of %d falls due in %s", rate, count, lead.Round(time.Millisecond))
	return lead
}

// createBefore creates the tasks and requires it to be done before t0, the
// first due time.
func createBefore(t *testing.T, t0 time.Time, bases []string, apiKey, url string, tasks []plannedTask) {
	t.Helper()
	started := time.Now()
	createTasksInBatches(t, bases, apiKey, url, tasks)
	took := time.Since(started)
	t.Logf("created %d tasks through %d node(s) in %s (%.0f/s), %s before the first falls due",
		len(tasks), len(bases), took.Round(time.Millisecond), float64(len(tasks))/took.Seconds(), time.Until(t0).Round(time.Millisecond))
	require.True(t, time.Now().Before(t0), "creating %d tasks took %s, past the first due time", len(tasks), took)
}

func firstLateness(first map[string]hit) latencies {
	l := make(latencies, 0, len(first))
	for _, h := range first {
		l = append(l, h.lateness())
	}
	return l
}

// TestThreeNodesNoKills: three processes share 5,000 tasks falling due over
// 10 s; every task arrives exactly once. It runs beside the package's other
// tests, whose load can slow the creations past the first due times: those
// tasks are then stored already due, which changes nothing of what it
// checks, so it only says so.
func TestThreeNodesNoKills(t *testing.T) {
	t.Parallel()
	const (
		count  = 5000
		spread = 10 * time.Second
	)
	c := startCluster(t, 3)
	rcv := newCountingReceiver(t)

	t0 := time.Now().Add(creationLead(t, c.bases, count, 8*time.Second)).Truncate(time.Millisecond)
	end := t0.Add(spread)
	tasks := planTasks(count, t0, spread)
	started := time.Now()
	createTasksInBatches(t, c.bases, c.apiKey, rcv.URL+"/nokills", tasks)
	t.Logf("created %d tasks through %d nodes in %s, %s before the first falls due",
		count, len(c.bases), time.Since(started).Round(time.Millisecond), time.Until(t0).Round(time.Millisecond))

	deadline := end.Add(30 * time.Second)
	if late := time.Now().Add(30 * time.Second); late.After(deadline) {
		deadline = late
	}
	require.NoError(t, rcv.waitDistinct(count, deadline))
	t.Logf("every task arrived %s after the last fell due", time.Since(tasks[len(tasks)-1].runAt).Round(time.Millisecond))
	require.NoError(t, waitTasksInStatus(c.bases[1], c.apiKey, "delivered", count, time.Now().Add(30*time.Second)))
	extra := rcv.settle(time.Second)

	hits := rcv.snapshot()
	first, duplicated := checkHits(t, tasks, hits)
	t.Logf("lateness of %d tasks over 3 nodes: %s; %d deliveries, %d after all were recorded delivered",
		count, firstLateness(first), len(hits), extra)
	require.Empty(t, duplicated, "without kills no task may arrive twice")
	require.Len(t, hits, count, "without kills every task arrives exactly once")
	c.termAll(t)
}

// chaosKill is one SIGKILL of a node, and when the node was ready again.
type chaosKill struct {
	node      int
	at        time.Time
	restarted time.Time
}

// chaosLoad is a three-node cluster and count tasks to a counting receiver,
// planned to fall due evenly over [t0, end) and all created before t0.
type chaosLoad struct {
	c       *cluster
	rcv     *countingReceiver
	tasks   []plannedTask
	t0, end time.Time
}

// startChaosLoad starts the cluster and creates the tasks, to the path of
// the receiver, the first falling due at least minLead from now (more if
// creating them takes longer, see creationLead).
func startChaosLoad(t *testing.T, count int, spread, minLead time.Duration, path string) *chaosLoad {
	t.Helper()
	c := startCluster(t, 3)
	rcv := newCountingReceiver(t)
	t0 := time.Now().Add(creationLead(t, c.bases, count, minLead)).Truncate(time.Millisecond)
	tasks := planTasks(count, t0, spread)
	createBefore(t, t0, c.bases, c.apiKey, rcv.URL+path, tasks)
	return &chaosLoad{c: c, rcv: rcv, tasks: tasks, t0: t0, end: t0.Add(spread)}
}

// killPace paces a killer: its first kill at t0 + first (when first is
// zero, a pause after t0), and each next one a pause after the one before,
// the pause drawn from [every, every+jitter).
type killPace struct {
	first, every, jitter time.Duration
}

// killUntilEnd runs the killer from t0 to the end of the window: each time,
// it SIGKILLs a random node and restarts it (same address and environment)
// after 1 s or, every other kill, after its lease has run out (the
// survivors take over first). The seed is logged, to replay a run.
func (l *chaosLoad) killUntilEnd(t *testing.T, pace killPace) []chaosKill {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("killer seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	pause := func() time.Duration { return pace.every + time.Duration(rng.Int64N(int64(pace.jitter))) }
	next := l.t0.Add(pace.first)
	if pace.first == 0 {
		next = l.t0.Add(pause())
	}
	var kills []chaosKill
	for next.Before(l.end) {
		<-time.After(time.Until(next)) // pacing, not waiting for a condition
		i := rng.IntN(len(l.c.nodes))
		n := l.c.nodes[i]
		at, err := n.Kill()
		require.NoError(t, err, "killer")
		down := time.Second
		if len(kills)%2 == 1 {
			down = nodeTTL + time.Second
		}
		kills = append(kills, chaosKill{node: i, at: at})
		<-time.After(down) // the node stays down
		require.NoError(t, n.Restart(), "killer: restart %s\n%s", n.name, n.logs.tail(50))
		kills[len(kills)-1].restarted = time.Now()
		next = at.Add(pause())
	}
	return kills
}

// waitDelivered waits until every task has reached the receiver and is
// recorded delivered, by deadline; for tasks that never arrived it logs
// what Postgres says of them.
func (l *chaosLoad) waitDelivered(t *testing.T, deadline time.Time) {
	t.Helper()
	if err := l.rcv.waitDistinct(len(l.tasks), deadline); err != nil {
		logMissing(t, l.c.dbURL, l.tasks, l.rcv.snapshot())
		require.NoError(t, err)
	}
	t.Logf("every task arrived %s after the last fell due", time.Since(l.tasks[len(l.tasks)-1].runAt).Round(time.Millisecond))
	require.NoError(t, waitTasksInStatus(l.c.bases[0], l.c.apiKey, "delivered", len(l.tasks), deadline))
}

// TestThreeNodesKilled: three processes share 20,000 tasks falling due over
// 30 s while one of them is killed with SIGKILL every 3 to 5 s and restarted,
// in turn a second later (it takes its own place back as it starts) and
// after its lease has run out (the survivors take over first). Every task
// arrives; a task arrives twice only when it was in flight on the killed
// node, and then with the same webhook-id and Idempotency-Key.
//
// Not parallel: three busy processes, Postgres and the receiver already
// fill a 2-core machine, and the lateness it logs means more on a quiet one.
func TestThreeNodesKilled(t *testing.T) {
	const (
		count  = 20000
		spread = 30 * time.Second
		// After the last task falls due, the time allowed for every task to
		// arrive and be recorded delivered.
		drain = 90 * time.Second
	)
	l := startChaosLoad(t, count, spread, 15*time.Second, "/killed")
	c, rcv, tasks, t0 := l.c, l.rcv, l.tasks, l.t0

	kills := l.killUntilEnd(t, killPace{every: 3 * time.Second, jitter: 2 * time.Second})
	require.False(t, t.Failed(), "a node failed during the kills")
	require.NotEmpty(t, kills)

	l.waitDelivered(t, l.end.Add(drain))
	extra := rcv.settle(time.Second)

	hits := rcv.snapshot()
	first, duplicated := checkHits(t, tasks, hits)
	byID := map[string][]hit{}
	for _, h := range hits {
		byID[h.id] = append(byID[h.id], h)
	}
	duplicates := len(hits) - len(first)

	// Failover: how late the tasks falling due around each kill arrived.
	for n, k := range kills {
		var around latencies
		over1s := 0
		for _, task := range tasks {
			if task.runAt.Before(k.at.Add(-500*time.Millisecond)) || task.runAt.After(k.at.Add(5*time.Second)) {
				continue
			}
			if h, ok := first[task.id]; ok {
				around = append(around, h.lateness())
				if h.lateness() > time.Second {
					over1s++
				}
			}
		}
		t.Logf("failover: kill %d of node%d at t0%+.3fs, ready again after %s: tasks due from 0.5 s before to 5 s after: lateness %s; %d over 1 s",
			n+1, k.node, k.at.Sub(t0).Seconds(), k.restarted.Sub(k.at).Round(time.Millisecond), around, over1s)
	}
	all := firstLateness(first).sorted()
	t.Logf("failover: lateness of the first delivery of all %d tasks: %s", count, all)
	t.Logf("failover: %d kills, %d duplicate deliveries of %d tasks (bound %d = kills x %d senders); %d deliveries after all were recorded delivered",
		len(kills), duplicates, len(duplicated), len(kills)*chaosSenders, chaosSenders, extra)

	// A duplicate is a send that was in flight on a node when it was killed:
	// its first delivery reached the receiver shortly before that kill, and
	// another came after it.
	var oldest time.Duration
	for _, id := range duplicated {
		ds := byID[id]
		slices.SortFunc(ds, func(a, b hit) int { return a.arrived.Compare(b.arrived) })
		var matched *chaosKill
		for i := range kills {
			k := &kills[i]
			if !ds[0].arrived.Before(k.at.Add(-inFlightWindow)) && !ds[0].arrived.After(k.at.Add(killSlack)) && ds[len(ds)-1].arrived.After(k.at) {
				matched = k
				break
			}
		}
		var attempts []string
		for _, d := range ds {
			attempts = append(attempts, fmt.Sprintf("attempt %d at t0%+.3fs key %q", d.attempt, d.arrived.Sub(t0).Seconds(), d.idemKey))
		}
		if matched == nil {
			t.Errorf("task %s arrived %d times, the first not within %s before a kill: %v", id, len(ds), inFlightWindow, attempts)
			continue
		}
		oldest = max(oldest, matched.at.Sub(ds[0].arrived))
		for _, d := range ds[1:] {
			require.Equal(t, ds[0].idemKey, d.idemKey, "every delivery of task %s carries the same Idempotency-Key", id)
		}
	}
	if len(duplicated) > 0 {
		t.Logf("failover: duplicated sends reached the receiver at most %s before their kill", oldest.Round(time.Millisecond))
	}
	require.LessOrEqual(t, duplicates, len(kills)*chaosSenders, "more duplicates than sends in flight at the kills")
	require.LessOrEqual(t, all[len(all)-1], maxFailover, "a killed node's tasks must move to the survivors quickly")
	c.termAll(t)
}

// TestPostgresAndRedisRestart: one process, 2,000 tasks falling due over
// 10 s; Postgres is restarted in the middle and later Redis flushed and
// restarted. Every task arrives, few twice, and the process recovers by
// itself: it is ready again and keeps taking and firing tasks.
func TestPostgresAndRedisRestart(t *testing.T) {
	t.Parallel()
	const (
		count  = 2000
		spread = 10 * time.Second
		lead   = 5 * time.Second
		drain  = 60 * time.Second
		// A send whose attempt could not be recorded while Postgres was
		// down is sent again: at most the sends in flight on the node.
		maxDuplicates = chaosSenders
	)
	pg := storetest.PrivatePostgres(t)
	rd := storetest.PrivateRedis(t)
	node := startServe(t, "node", serveEnv(pg.URL(), rd.URL(), "hookwheel:"))
	pid, _ := node.Running()
	apiKey := createTenantVia(t, node.base, chaosAdminToken, "restarts")
	rcv := newCountingReceiver(t)

	t0 := time.Now().Add(creationLead(t, []string{node.base}, count, lead)).Truncate(time.Millisecond)
	end := t0.Add(spread)
	tasks := planTasks(count, t0, spread)
	createBefore(t, t0, []string{node.base}, apiKey, rcv.URL+"/restarts", tasks)

	// Pacing: the outages come at fixed points of the window.
	<-time.After(time.Until(t0.Add(2 * time.Second)))
	delivered, _ := rcv.counts()
	pgDown := time.Now()
	pg.Stop()
	<-time.After(1500 * time.Millisecond)
	pg.Start()
	pgUp := time.Now()
	t.Logf("Postgres down from t0%+.3fs to t0%+.3fs (%d tasks had arrived)", pgDown.Sub(t0).Seconds(), pgUp.Sub(t0).Seconds(), delivered)

	<-time.After(time.Until(t0.Add(6 * time.Second)))
	delivered, _ = rcv.counts()
	redisDown := time.Now()
	rd.Flush()
	rd.Stop()
	<-time.After(time.Second)
	rd.Start()
	redisUp := time.Now()
	t.Logf("Redis flushed and down from t0%+.3fs to t0%+.3fs (%d tasks had arrived)", redisDown.Sub(t0).Seconds(), redisUp.Sub(t0).Seconds(), delivered)

	deadline := end.Add(drain)
	require.NoError(t, rcv.waitDistinct(count, deadline))
	t.Logf("every task arrived %s after the last fell due", time.Since(tasks[len(tasks)-1].runAt).Round(time.Millisecond))
	require.NoError(t, waitTasksInStatus(node.base, apiKey, "delivered", count, deadline))

	// Still taking and firing new tasks, through the API and the dispatcher.
	more := planTasks(100, time.Now().Add(2*time.Second).Truncate(time.Millisecond), 500*time.Millisecond)
	for i := range more {
		more[i].idemKey = ""
	}
	createBefore(t, more[0].runAt, []string{node.base}, apiKey, rcv.URL+"/restarts", more)
	require.NoError(t, rcv.waitDistinct(count+len(more), time.Now().Add(30*time.Second)))
	require.NoError(t, waitTasksInStatus(node.base, apiKey, "delivered", count+len(more), time.Now().Add(30*time.Second)))
	extra := rcv.settle(time.Second)

	all := append(slices.Clone(tasks), more...)
	hits := rcv.snapshot()
	first, duplicated := checkHits(t, all, hits)
	duplicates := len(hits) - len(first)
	var during latencies
	for _, task := range tasks {
		if h, ok := first[task.id]; ok && (!task.runAt.Before(pgDown) && task.runAt.Before(pgUp) || !task.runAt.Before(redisDown) && task.runAt.Before(redisUp)) {
			during = append(during, h.lateness())
		}
	}
	t.Logf("restarts: lateness of all %d tasks: %s; of those due during an outage: %s", len(all), firstLateness(first), during)
	t.Logf("restarts: %d duplicate deliveries of %d tasks (bound %d); %d deliveries after all were recorded delivered",
		duplicates, len(duplicated), maxDuplicates, extra)
	for _, id := range duplicated {
		var keys []string
		for _, h := range hits {
			if h.id == id {
				keys = append(keys, h.idemKey)
			}
		}
		require.Len(t, slices.Compact(keys), 1, "every delivery of task %s carries the same Idempotency-Key", id)
	}
	require.LessOrEqual(t, duplicates, maxDuplicates)

	status, body, err := apiCall(context.Background(), http.MethodGet, node.base+"/readyz", "", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "ready again after the restarts: %s", body)
	now, running := node.Running()
	require.True(t, running && now == pid, "the same process recovered by itself")
	require.NoError(t, node.Term(30*time.Second), "SIGTERM must stop hookwheel with exit status 0")
}

// logMissing shows, for the tasks that never arrived, what Postgres says of
// them: the state the next person needs to find out why.
// logDeferrals logs what each node counted of claims given back and of its
// breakers, to tell why tasks are late or missing.
func logDeferrals(t *testing.T, bases []string) {
	t.Helper()
	for i, base := range bases {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Logf("node%d: metrics: %v", i, err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Logf("node%d: metrics: %v", i, err)
			continue
		}
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, "hookwheel_deferrals_total") || strings.HasPrefix(line, "hookwheel_breakers") ||
				strings.HasPrefix(line, "hookwheel_recovered") {
				t.Logf("node%d: %s", i, strings.TrimSpace(line))
			}
		}
	}
}

func logMissing(t *testing.T, dbURL string, tasks []plannedTask, hits []hit) {
	t.Helper()
	seen := map[string]bool{}
	for _, h := range hits {
		seen[h.id] = true
	}
	var missing []string
	for _, task := range tasks {
		if !seen[task.id] {
			missing = append(missing, task.id)
		}
	}
	if len(missing) > 20 {
		missing = missing[:20]
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Logf("missing tasks %v (database unreachable: %v)", missing, err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT t.id::text, t.status, t.attempts, t.partition, t.next_attempt_at, t.lease_expires_at,
		t.claimed_by::text, p.owner::text, (SELECT count(*) FROM attempts a WHERE a.task_id = t.id), now()
		FROM tasks t JOIN partitions p ON p.id = t.partition WHERE t.id = ANY($1::uuid[])`, missing)
	if err != nil {
		t.Logf("missing tasks %v (query failed: %v)", missing, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, status                string
			attempts, partition, logs int
			next, lease               *time.Time
			claimedBy, owner          *string
			now                       time.Time
		)
		if err := rows.Scan(&id, &status, &attempts, &partition, &next, &lease, &claimedBy, &owner, &logs, &now); err != nil {
			t.Logf("scan: %v", err)
			return
		}
		t.Logf("missing %s: status=%s attempts=%d recorded=%d partition=%d owner=%v next_attempt_at=%v lease=%v claimed_by=%v now=%v",
			id, status, attempts, logs, partition, deref(owner), next, lease, deref(claimedBy), now)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
