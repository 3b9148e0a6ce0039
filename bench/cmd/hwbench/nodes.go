package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// partitions is how many partitions hookwheel splits tasks into (a task's is
// the last byte of its id).
const partitions = 256

type nodesResult struct {
	Rate        int         `json:"rate_per_s"`
	EventGapS   float64     `json:"event_gap_s"`
	IdleWindowS float64     `json:"idle_window_s"`
	Runs        []*nodesRun `json:"runs"`

	settings map[string]string // hookwheel's, for the results
}

// nodesRun is one cluster size: what its idle nodes cost Postgres, then a
// steady load during which a node joins, one leaves and one is killed.
type nodesRun struct {
	Nodes int `json:"nodes"`
	// StartSettledMs: from the start of the last node until the partitions
	// were split evenly among all of them.
	StartSettledMs float64   `json:"start_settled_ms"`
	Idle           *idleCost `json:"idle"`
	// Events: join, leave, kill, in that order.
	Events []*nodeEvent `json:"events"`
	// Lost are tasks that never arrived; Duplicates, repeats of a task
	// already delivered, over the whole run.
	Lost       int `json:"lost"`
	Duplicates int `json:"duplicates"`
	// DuplicatesDueS: the due time of each repeat, after the first.
	DuplicatesDueS []float64 `json:"duplicates_due_s,omitempty"`
	// PeakConnections is the most Postgres connections to the run's
	// database seen during the load (sampled every second, all nodes).
	PeakConnections int              `json:"peak_postgres_connections"`
	Ownership       []ownershipPoint `json:"ownership"`
	Timeline        []timelinePoint  `json:"lateness_timeline"`
	Run             *lateResult      `json:"run"`
	Notes           []string         `json:"notes,omitempty"`
}

// nodeEvent is one change of membership and how the partitions moved after
// it. Times are from the event (the process start, SIGTERM or SIGKILL) in
// milliseconds; -1 means it was not seen.
type nodeEvent struct {
	Kind        string  `json:"kind"` // join, leave (SIGTERM) or kill (SIGKILL)
	Node        string  `json:"node"`
	AtS         float64 `json:"at_s"` // after the first due time
	NodesBefore int     `json:"nodes_before"`
	NodesAfter  int     `json:"nodes_after"`
	// Partitions: join, the node's share once taken; leave and kill, what
	// the node held.
	Partitions int `json:"partitions"`
	// ReadyMs: join, until the node's /readyz answered.
	ReadyMs float64 `json:"ready_ms,omitempty"`
	// OwnedMs: join, until the node held at least an even share; leave and
	// kill, until every partition it held was leased by another node.
	OwnedMs float64 `json:"owned_ms"`
	// FirstFireMs: join, until the node started its first send; leave and
	// kill, until the first of its partitions' tasks due after the event
	// arrived from another node.
	FirstFireMs float64 `json:"first_fire_ms"`
	// CaughtUpMs (leave, kill): until the last of its partitions' tasks
	// stranded by the event (due before FirstFireMs) arrived.
	CaughtUpMs float64 `json:"caught_up_ms,omitempty"`
	Stranded   int     `json:"stranded_tasks,omitempty"`
	// SettledMs: until every partition was leased and each node held an
	// even share (give or take one).
	SettledMs float64 `json:"settled_ms"`
	// ExitedMs (leave): until the process exited.
	ExitedMs float64 `json:"exited_ms,omitempty"`
	// The hand-over window is the tasks due from the event until the last
	// of the times above (at least 1 s); Before is the tasks due in the
	// seconds before the event.
	WindowS  float64         `json:"window_s"`
	Before   latencySummary  `json:"lateness_before"`
	During   latencySummary  `json:"lateness_during"`
	ItsTasks *latencySummary `json:"its_tasks_lateness,omitempty"` // leave, kill: its partitions' tasks in the window
	// Duplicates: repeats of the tasks due from 1 s before the event to the
	// end of the window (a send in flight at SIGKILL is of a task due just
	// before it). Missing: tasks due in the window that never arrived.
	Duplicates int      `json:"duplicates"`
	Missing    int      `json:"missing"`
	Notes      []string `json:"notes,omitempty"`
}

// idleCost is what N nodes with nothing to do cost: their heartbeats and
// lease renewals (every 300 ms by default), and the loader's and the other
// parts' polls.
type idleCost struct {
	WindowS float64    `json:"window_s"`
	PerNode []idleNode `json:"per_node"`
	// PostgresCPUMsPerS: CPU of the node's Postgres backends, per second of
	// the window (mean and max over the nodes).
	PostgresCPUMsPerS    float64 `json:"postgres_cpu_ms_per_s_per_node"`
	PostgresCPUMsPerSMax float64 `json:"postgres_cpu_ms_per_s_max_node"`
	HookwheelCPUMsPerS   float64 `json:"hookwheel_cpu_ms_per_s_per_node"`
	// Transactions are the run database's commits and rollbacks (a
	// heartbeat is one transaction of four statements; a lone query, one),
	// from pg_stat_database, which backends update about once a second.
	TransactionsPerS        float64 `json:"transactions_per_s"`
	TransactionsPerSPerNode float64 `json:"transactions_per_s_per_node"`
	ConnectionsPerNode      float64 `json:"postgres_connections_per_node"`
}

type idleNode struct {
	Name               string  `json:"name"`
	Connections        int     `json:"postgres_connections"`
	PostgresCPUMsPerS  float64 `json:"postgres_cpu_ms_per_s"`
	HookwheelCPUMsPerS float64 `json:"hookwheel_cpu_ms_per_s"`
}

// ownershipPoint is how many partitions each node held from TMs (after the
// first due time) on; one is kept each time the counts change.
type ownershipPoint struct {
	TMs     float64        `json:"t_ms"`
	Owned   map[string]int `json:"owned"`
	Unowned int            `json:"unowned"`
}

// timelinePoint is the lateness of the tasks due in one slice of the run.
type timelinePoint struct {
	DueS  float64 `json:"due_s"` // start of the slice, after the first due time
	Tasks int     `json:"tasks"`
	P50Ms float64 `json:"p50_ms"`
	MaxMs float64 `json:"max_ms"`
}

// nodesScenario runs, for each cluster size, n nodes on a fresh database:
// node 1 serves the API and dispatches; the others dispatch only.
func nodesScenario(ctx context.Context, svc *services, hwOpts hookwheelOptions, recv *receiver, sizes []int64, rate int, gap, idle time.Duration) (*nodesResult, error) {
	res := &nodesResult{Rate: rate, EventGapS: gap.Seconds(), IdleWindowS: idle.Seconds()}
	for _, n := range sizes {
		if n < 2 {
			return res, fmt.Errorf("-nodes: want at least 2 nodes, got %d", n)
		}
		r, err := nodesRunOne(ctx, svc, hwOpts, recv, res, int(n))
		if r != nil {
			res.Runs = append(res.Runs, r)
		}
		if err != nil {
			return res, err
		}
		pause(ctx)
	}
	return res, nil
}

func nodesRunOne(ctx context.Context, svc *services, hwOpts hookwheelOptions, recv *receiver, all *nodesResult, n int) (*nodesRun, error) {
	rate, gap := all.Rate, time.Duration(all.EventGapS*float64(time.Second))
	h, err := startHookwheel(ctx, svc, hwOpts, fmt.Sprintf("nodes%d", n))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if all.settings == nil {
		all.settings = h.Settings()
		all.settings["process"] = "node 1 `hookwheel serve` (API and dispatcher; the harness submits through it), the others `hookwheel serve --dispatcher-only`, built from ../cmd/hookwheel"
		all.settings["membership"] = "defaults: leases of 1.5 s renewed by a heartbeat every 300 ms"
	}
	res := &nodesRun{Nodes: n}
	w := &ownershipWatch{pool: h.pool}
	names := map[uuid.UUID]string{}
	ids := make([]uuid.UUID, 0, n+1) // by node index
	learn := func(node *hookwheelNode) error {
		id, err := newNodeID(ctx, h.pool, names)
		if err != nil {
			return fmt.Errorf("%s: %w", node.name, err)
		}
		names[id] = node.name
		ids = append(ids, id)
		return nil
	}
	if err := learn(h.nodes[0]); err != nil {
		return res, err
	}
	for len(h.nodes) < n {
		node, err := h.AddNode(ctx, "--dispatcher-only")
		if err != nil {
			return res, err
		}
		if err := learn(node); err != nil {
			return res, err
		}
	}
	logf("nodes %d: all started; waiting for the partitions to be split evenly", n)
	lastStart := time.Now()
	for {
		s, err := w.sample(ctx)
		if err == nil && settled(s, n) {
			break
		}
		if time.Since(lastStart) > 30*time.Second {
			return res, fmt.Errorf("nodes %d: the partitions were not split evenly within 30 s of the last start (%v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.StartSettledMs = ms(time.Since(lastStart))

	if res.Idle, err = measureIdle(ctx, svc, h, time.Duration(all.IdleWindowS*float64(time.Second))); err != nil {
		return res, err
	}
	logf("nodes %d idle: Postgres CPU %.2f ms/s per node (max %.2f), hookwheel CPU %.2f ms/s per node, %.1f transactions/s per node, %.1f connections per node",
		n, res.Idle.PostgresCPUMsPerS, res.Idle.PostgresCPUMsPerSMax, res.Idle.HookwheelCPUMsPerS, res.Idle.TransactionsPerSPerNode, res.Idle.ConnectionsPerNode)
	pause(ctx)

	// Three events a gap apart, and a gap after the last to see it through.
	var (
		taskIDs   []uuid.UUID
		events    = make([]*nodeEvent, 3)
		at        = make([]time.Time, 3)
		parts     = make([]map[int16]bool, 3)
		firstDue  time.Time
		eventsErr error
		done      = make(chan struct{})
		exited    = make(chan time.Duration, 1) // the leaving node's SIGTERM to exit
	)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchDone := make(chan struct{})
	during := func(first time.Time) {
		defer close(done)
		firstDue = first
		go func() { defer close(watchDone); w.run(watchCtx) }()
		fail := func(err error) { eventsErr = err; logf("nodes %d: %v", n, err) }

		// A node joins.
		sleepUntil(ctx, first.Add(gap))
		at[0] = time.Now()
		node, err := h.AddNode(ctx, "--dispatcher-only")
		if err != nil {
			fail(fmt.Errorf("join: %w", err))
			return
		}
		ready := time.Since(at[0])
		// Its first send: the fire lateness histogram counts every send as
		// it starts.
		firstFire := -1.0
		for time.Since(at[0]) < gap && ctx.Err() == nil {
			if scrapeSum(node.base, "hookwheel_fire_lateness_seconds_count") > 0 {
				firstFire = ms(time.Since(at[0]))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := learn(node); err != nil {
			fail(fmt.Errorf("join: %w", err))
			return
		}
		events[0] = &nodeEvent{Kind: "join", Node: node.name, NodesBefore: n, NodesAfter: n + 1, ReadyMs: ms(ready), FirstFireMs: firstFire}
		logf("nodes %d: %s joined; ready after %.0f ms, first send after %.0f ms", n, node.name, ms(ready), firstFire)

		// A node leaves cleanly, and then one is killed. Node 1 serves the
		// API the harness submits through, so it stays.
		for i, kind := range []string{"leave", "kill"} {
			sleepUntil(ctx, first.Add(time.Duration(i+2)*gap))
			victim := h.nodes[i+1]
			held, err := ownedBy(ctx, h.pool, ids[i+1])
			if err != nil {
				fail(fmt.Errorf("%s: %w", kind, err))
				return
			}
			parts[i+1] = held
			ev := &nodeEvent{Kind: kind, Node: victim.name, NodesBefore: n + 1 - i, NodesAfter: n - i, Partitions: len(held)}
			events[i+1] = ev
			at[i+1] = time.Now()
			if kind == "leave" {
				victim.terminate()
				go func() {
					<-victim.exited
					exited <- time.Since(at[1])
				}()
				logf("nodes %d: SIGTERM to %s (%d partitions)", n, victim.name, len(held))
			} else {
				victim.kill()
				logf("nodes %d: SIGKILL to %s (%d partitions)", n, victim.name, len(held))
			}
		}
	}
	keeper := &idKeeper{hookwheelSystem: h, ids: &taskIDs}
	r, err := runLateness(ctx, keeper, recv, lateSpec{
		scenario: "nodes", label: fmt.Sprintf("%d nodes, %d/s", n, rate),
		tasks: int(float64(rate) * (4 * gap).Seconds()), spread: 4 * gap, during: during,
		drain: 60 * time.Second,
	})
	if err != nil {
		return res, err
	}
	end := time.Now()
	<-done
	stopWatch()
	<-watchDone
	if eventsErr != nil {
		return res, eventsErr
	}
	// The leaving node has had all of the run's drain to exit.
	select {
	case d := <-exited:
		events[1].ExitedMs = ms(d)
	case <-time.After(20 * time.Second):
		events[1].Notes = append(events[1].Notes, "the process had not exited 20 s after the run")
	}
	res.Run = r
	res.Lost = r.Missing
	res.Duplicates = r.Duplicates
	res.PeakConnections = w.peakConns

	a := &nodesAnalysis{w: w, rs: r.rs, taskIDs: taskIDs, first: firstDue, end: end, gap: gap, names: names}
	for i, ev := range events {
		a.event(ev, at[i], ids, i, parts[i])
		res.Events = append(res.Events, ev)
	}
	r.rs.mu.Lock()
	for _, seq := range r.rs.dupSeqs {
		res.DuplicatesDueS = append(res.DuplicatesDueS, math.Round(float64(r.rs.dues[seq]-firstDue.UnixNano())/1e6)/1000)
	}
	r.rs.mu.Unlock()
	res.Ownership = a.ownership()
	res.Timeline = a.timeline(100 * time.Millisecond)
	if res.Lost > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d tasks never arrived", res.Lost))
	}
	for _, ev := range res.Events {
		caught := ""
		if ev.Kind != "join" {
			caught = fmt.Sprintf(", %d stranded tasks caught up at %.0f ms", ev.Stranded, ev.CaughtUpMs)
		}
		logf("nodes %d %s %s: owned at %.0f ms, first fire at %.0f ms%s, settled at %.0f ms; lateness in %.1f s: p99 %.1f ms, max %.1f ms (before: p99 %.1f ms); %d duplicates, %d missing",
			n, ev.Kind, ev.Node, ev.OwnedMs, ev.FirstFireMs, caught, ev.SettledMs, ev.WindowS,
			ev.During.P99Ms, ev.During.MaxMs, ev.Before.P99Ms, ev.Duplicates, ev.Missing)
	}
	return res, nil
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// newNodeID waits for a node not in known to register and returns its id.
func newNodeID(ctx context.Context, pool *pgxpool.Pool, known map[uuid.UUID]string) (uuid.UUID, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := pool.Query(ctx, "SELECT id FROM nodes WHERE expires_at > now()")
		if err != nil {
			return uuid.Nil, err
		}
		live, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return uuid.Nil, err
		}
		var fresh []uuid.UUID
		for _, id := range live {
			if _, ok := known[id]; !ok {
				fresh = append(fresh, id)
			}
		}
		switch {
		case len(fresh) == 1:
			return fresh[0], nil
		case len(fresh) > 1:
			return uuid.Nil, fmt.Errorf("%d unknown nodes registered at once", len(fresh))
		case time.Now().After(deadline):
			return uuid.Nil, fmt.Errorf("no heartbeat within 30 s of the start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownedBy is the partitions a node holds a live lease on.
func ownedBy(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) (map[int16]bool, error) {
	rows, err := pool.Query(ctx, "SELECT id FROM partitions WHERE owner = $1 AND lease_expires_at > now()", id)
	if err != nil {
		return nil, err
	}
	ps, err := pgx.CollectRows(rows, pgx.RowTo[int16])
	if err != nil {
		return nil, err
	}
	out := map[int16]bool{}
	for _, p := range ps {
		out[p] = true
	}
	return out, nil
}

// ---- idle cost ----

// measureIdle reads, over window, the CPU that each node's Postgres
// backends (told apart by application_name) and each node process spend,
// and the run database's transactions. The harness sends nothing to that
// database meanwhile; it asks pg_stat_activity and pg_stat_database from
// the maintenance database.
func measureIdle(ctx context.Context, svc *services, h *hookwheelSystem, window time.Duration) (*idleCost, error) {
	conn, err := pgx.Connect(ctx, svc.databaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	db := h.databaseName()
	type snap struct {
		at       time.Time
		xacts    int64
		backends map[string]map[int]float64 // application_name -> pid -> CPU s
		nodes    map[string]float64         // node -> CPU s
	}
	take := func() (snap, error) {
		s := snap{backends: map[string]map[int]float64{}, nodes: map[string]float64{}}
		if err := conn.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", db).Scan(&s.xacts); err != nil {
			return s, err
		}
		rows, err := conn.Query(ctx, "SELECT pid, application_name FROM pg_stat_activity WHERE datname = $1", db)
		if err != nil {
			return s, err
		}
		var (
			pid  int32
			name string
		)
		if _, err := pgx.ForEachRow(rows, []any{&pid, &name}, func() error {
			if s.backends[name] == nil {
				s.backends[name] = map[int]float64{}
			}
			s.backends[name][int(pid)] = procCPU(int(pid))
			return nil
		}); err != nil {
			return s, err
		}
		for _, n := range h.nodes {
			s.nodes[n.name] = procCPU(n.pid())
		}
		s.at = time.Now()
		return s, nil
	}
	logf("idle: %d nodes, measuring for %s", len(h.nodes), window)
	a, err := take()
	if err != nil {
		return nil, err
	}
	sleepUntil(ctx, a.at.Add(window))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	b, err := take()
	if err != nil {
		return nil, err
	}
	secs := b.at.Sub(a.at).Seconds()
	perS := func(cpuS float64) float64 { return math.Round(cpuS*1000/secs*1000) / 1000 }
	res := &idleCost{WindowS: math.Round(secs*10) / 10}
	var pg, hw, conns float64
	for _, n := range h.nodes {
		var spent float64
		// Backends seen only at the end count from zero; those gone by the
		// end are lost (the pools keep their connections).
		for pid, v := range b.backends[n.name] {
			spent += v - a.backends[n.name][pid]
		}
		in := idleNode{Name: n.name, Connections: len(b.backends[n.name]), PostgresCPUMsPerS: perS(spent),
			HookwheelCPUMsPerS: perS(b.nodes[n.name] - a.nodes[n.name])}
		res.PerNode = append(res.PerNode, in)
		pg += in.PostgresCPUMsPerS
		hw += in.HookwheelCPUMsPerS
		conns += float64(in.Connections)
		res.PostgresCPUMsPerSMax = max(res.PostgresCPUMsPerSMax, in.PostgresCPUMsPerS)
	}
	k := float64(len(h.nodes))
	round := func(x float64) float64 { return math.Round(x*100) / 100 }
	res.PostgresCPUMsPerS = round(pg / k)
	res.HookwheelCPUMsPerS = round(hw / k)
	res.ConnectionsPerNode = round(conns / k)
	res.TransactionsPerS = round(float64(b.xacts-a.xacts) / secs)
	res.TransactionsPerSPerNode = round(res.TransactionsPerS / k)
	return res, nil
}
