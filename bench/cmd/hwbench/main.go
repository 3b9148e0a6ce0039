// Command hwbench benchmarks hookwheel end to end — a real `hookwheel serve`
// process over real Postgres and Redis, delivering to a local receiver — and
// compares it with River and Asynq doing the same job.
//
//	hwbench suite       every hookwheel-alone scenario below (make bench)
//	hwbench precision   fire precision: tasks falling due evenly at each -rates
//	hwbench throughput  end-to-end throughput: -throughput-tasks due at one instant
//	hwbench ingest      API ingest: single and batch calls, closed and open loop
//	hwbench backlog     lateness at -backlog-rate with -backlog rows pending far ahead, and RSS
//	hwbench failover    two nodes, SIGKILL one, time until its tasks fire on the other
//	hwbench ordering    -ordering-keys x -ordering-per-key tasks due at once; deliveries per second and the order check
//	hwbench flow        -flow-rate x -flow-seconds tasks of one rate-limited flow key due at once; how closely the rate holds
//	hwbench nodes       N nodes: idle cost per node; a node joins, one leaves, one is killed (make bench-nodes)
//	hwbench peers       hookwheel, River and Asynq: fire precision and throughput (make bench-peers)
//	hwbench cleanup     drop databases and Redis keys left by an interrupted run
//
// Lateness is always arrival at the receiver minus the task's intended due
// time, recorded in HDR histograms. Results go to -results as
// <date>-<scenario>.json, a markdown summary and a PNG plot.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

type options struct {
	hookwheelBin string
	results      string
	databaseURL  string
	redisURL     string
	command      string
	senders      int
	batchSize    int

	rates           string
	duration        time.Duration
	throughputTasks int
	ingestDuration  time.Duration
	backlogSizes    string
	backlogRate     int
	backlogDuration time.Duration
	failoverRate    int
	failoverDur     time.Duration
	failoverKill    time.Duration
	nodeSizes       string
	nodesRate       int
	nodesGap        time.Duration
	nodesIdle       time.Duration

	orderingKeys        int
	orderingPerKey      int
	flowRate            int
	flowSeconds         int
	systems             string
	peerRate            int
	peerDuration        time.Duration
	peerThroughputTasks int
	river               riverOptions
	asynq               asynqOptions
}

const usage = `usage: hwbench <command> [flags]

commands:
  suite       every hookwheel-alone scenario (what make bench runs)
  precision   fire precision at each of -rates for -duration
  throughput  -throughput-tasks tasks due at one instant; deliveries per second
  ingest      POST /v1/tasks and /v1/tasks/batch: requests and tasks per second, latency
  backlog     lateness at -backlog-rate with each -backlog size pending a month ahead; RSS
  failover    two nodes; SIGKILL one; time until its tasks fire on the other
  ordering    -ordering-keys keys x -ordering-per-key tasks due at once; deliveries per second and the order check
  flow        -flow-rate x -flow-seconds tasks of one flow key limited to -flow-rate/s, due at once; how closely the rate holds
  nodes       each of -nodes nodes: idle cost per node; a node joins, one leaves, one is killed (make bench-nodes)
  peers       hookwheel vs River vs Asynq (what make bench-peers runs)
  cleanup     drop hwbench_* databases and Redis keys left by an interrupted run

Run "hwbench <command> -h" for the flags.
`

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var o options
	fs.StringVar(&o.hookwheelBin, "hookwheel", "", "hookwheel binary (default: build ../cmd/hookwheel into bench/bin)")
	fs.StringVar(&o.results, "results", "", "results directory (default: bench/results of the checkout)")
	fs.StringVar(&o.databaseURL, "database-url", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "Postgres; fresh databases are created on it and dropped")
	fs.StringVar(&o.redisURL, "redis-url", envOr("REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis; keys go under unique prefixes, deleted at the end")
	fs.StringVar(&o.command, "command", "", "the command to record in the results (default: this command line)")
	fs.IntVar(&o.senders, "senders", 0, "HOOKWHEEL_SENDERS for the hookwheel nodes (0: hookwheel's default)")
	fs.IntVar(&o.batchSize, "batch-size", 1000, "tasks per POST /v1/tasks/batch call")

	fs.StringVar(&o.rates, "rates", "1000,5000,10000", "precision: tasks falling due per second, comma-separated")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "precision: how long tasks fall due at each rate")
	fs.IntVar(&o.throughputTasks, "throughput-tasks", 50_000, "throughput: tasks due at one instant (60 s sustained needs about 60 x the rate)")
	fs.DurationVar(&o.ingestDuration, "ingest-duration", 5*time.Second, "ingest: length of each of the four phases")
	fs.StringVar(&o.backlogSizes, "backlog", "100000", "backlog: pending rows a month ahead, comma-separated, ascending (the issue's: 1000000,10000000)")
	fs.IntVar(&o.backlogRate, "backlog-rate", 5000, "backlog: tasks falling due per second meanwhile")
	fs.DurationVar(&o.backlogDuration, "backlog-duration", 5*time.Second, "backlog: how long they fall due at each size")
	fs.IntVar(&o.failoverRate, "failover-rate", 500, "failover: tasks falling due per second")
	fs.DurationVar(&o.failoverDur, "failover-duration", 12*time.Second, "failover: how long they fall due")
	fs.DurationVar(&o.failoverKill, "failover-kill-after", 4*time.Second, "failover: SIGKILL a node this long after the first due time")
	fs.IntVar(&o.orderingKeys, "ordering-keys", 10_000, "ordering: number of ordering keys")
	fs.IntVar(&o.orderingPerKey, "ordering-per-key", 10, "ordering: tasks per key")
	fs.IntVar(&o.flowRate, "flow-rate", 100, "flow: the flow key's limit, sends per second")
	fs.IntVar(&o.flowSeconds, "flow-seconds", 30, "flow: seconds of tasks at that rate (flow-rate x flow-seconds tasks, due at once)")
	fs.StringVar(&o.nodeSizes, "nodes", "5,10", "nodes: cluster sizes, comma-separated (at least 2)")
	fs.IntVar(&o.nodesRate, "nodes-rate", 500, "nodes: tasks falling due per second")
	fs.DurationVar(&o.nodesGap, "nodes-event-gap", 8*time.Second, "nodes: time from the first due time to the join, between the join, leave and kill, and after the kill")
	fs.DurationVar(&o.nodesIdle, "nodes-idle", 20*time.Second, "nodes: how long the idle nodes' Postgres cost is measured")

	fs.StringVar(&o.systems, "systems", "hookwheel,river,asynq", "peers: systems to run, in order")
	fs.IntVar(&o.peerRate, "peer-rate", 1000, "peers: fire precision rate, tasks per second")
	fs.DurationVar(&o.peerDuration, "peer-duration", 20*time.Second, "peers: fire precision duration")
	fs.IntVar(&o.peerThroughputTasks, "peer-throughput-tasks", 100_000, "peers: throughput tasks due at one instant")
	fs.IntVar(&o.river.workers, "river-workers", 100, "River MaxWorkers")
	fs.DurationVar(&o.river.fetchCooldown, "river-fetch-cooldown", 5*time.Millisecond, "River FetchCooldown")
	fs.DurationVar(&o.river.fetchPollInterval, "river-fetch-poll-interval", 10*time.Millisecond, "River FetchPollInterval")
	var riverConns int
	fs.IntVar(&riverConns, "river-pool-conns", 20, "River's pgxpool MaxConns")
	fs.IntVar(&o.asynq.concurrency, "asynq-concurrency", 100, "Asynq Concurrency")
	fs.DurationVar(&o.asynq.taskCheckInterval, "asynq-task-check-interval", 10*time.Millisecond, "Asynq TaskCheckInterval")
	fs.DurationVar(&o.asynq.delayedTaskCheckInterval, "asynq-delayed-task-check-interval", 100*time.Millisecond, "Asynq DelayedTaskCheckInterval")
	_ = fs.Parse(os.Args[2:])
	o.river.poolConns = int32(riverConns)
	o.command = strings.TrimSpace(o.command)
	if o.command == "" {
		o.command = "hwbench " + strings.Join(os.Args[1:], " ")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cmd, o); err != nil {
		logf("error: %v", err)
		os.Exit(1)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func run(ctx context.Context, cmd string, o options) error {
	scenarios := map[string][]string{
		"suite":      {"precision", "throughput", "ordering", "flow", "ingest", "backlog", "failover"},
		"precision":  {"precision"},
		"throughput": {"throughput"},
		"ingest":     {"ingest"},
		"backlog":    {"backlog"},
		"failover":   {"failover"},
		"nodes":      {"nodes"},
		"ordering":   {"ordering"},
		"flow":       {"flow"},
	}
	if cmd == "cleanup" {
		return cleanupLeftovers(ctx, o)
	}
	which, ok := scenarios[cmd]
	if !ok && cmd != "peers" {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	if o.results == "" {
		root, err := findRepoRoot()
		if err != nil {
			return err
		}
		o.results = filepath.Join(root, "bench", "results")
	}
	if o.hookwheelBin == "" {
		bin, err := buildHookwheel(ctx, "")
		if err != nil {
			return err
		}
		o.hookwheelBin = bin
	}
	if abs, err := filepath.Abs(o.hookwheelBin); err == nil {
		o.hookwheelBin = abs
	}
	svc, err := newServices(o.databaseURL, o.redisURL)
	if err != nil {
		return err
	}
	defer svc.cleanup()
	recv, err := newReceiver()
	if err != nil {
		return err
	}
	defer recv.close()
	rep, err := newReporter(o.results, o.command, describeMachine(ctx, svc))
	if err != nil {
		return err
	}
	logf("machine: %s", rep.machine)
	defer func() {
		for _, p := range rep.written {
			logf("wrote %s", p)
		}
	}()
	if cmd == "peers" {
		return runPeers(ctx, o, svc, recv, rep)
	}
	return runHookwheel(ctx, o, svc, recv, rep, cmd, which)
}

func parseInts(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("want positive integers, got %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// cleanupLeftovers drops databases and Redis keys of interrupted runs.
func cleanupLeftovers(ctx context.Context, o options) error {
	conn, err := pgx.Connect(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'hwbench\_%'`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err != nil {
			logf("drop %s: %v", n, err)
		} else {
			logf("dropped database %s", n)
		}
	}
	svc := &services{databaseURL: o.databaseURL, redisURL: o.redisURL}
	if rdb, err := svc.redis(); err == nil {
		if qs, err := rdb.SMembers(ctx, "asynq:queues").Result(); err == nil {
			for _, q := range qs {
				if strings.HasPrefix(q, "hwbench_") {
					rdb.SRem(ctx, "asynq:queues", q)
				}
			}
		}
		rdb.Close()
	}
	svc.deleteRedisPrefix(ctx, "hwbench:")
	svc.deleteRedisPrefix(ctx, "asynq:{hwbench_")
	logf("deleted Redis keys hwbench:* and asynq:{hwbench_*")
	return nil
}
