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
	"errors"
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

func hwOptions(o options) hookwheelOptions {
	return hookwheelOptions{bin: o.hookwheelBin, senders: o.senders, batchSize: o.batchSize}
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

// runHookwheel runs hookwheel-alone scenarios, each on a fresh database and node.
func runHookwheel(ctx context.Context, o options, svc *services, recv *receiver, rep *reporter, cmd string, which []string) error {
	rates, err := parseInts(o.rates)
	if err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	sizes, err := parseInts(o.backlogSizes)
	if err != nil {
		return fmt.Errorf("-backlog: %w", err)
	}
	nodeSizes, err := parseInts(o.nodeSizes)
	if err != nil {
		return fmt.Errorf("-nodes: %w", err)
	}
	var series []plotSeries
	rep.printf("Each scenario runs `hookwheel serve` on a fresh database; webhooks go to a receiver in the harness. ")
	rep.printf("Lateness is the arrival at the receiver minus the task's intended due time (coordinated omission avoided: ")
	rep.printf("tasks are stored ahead and measured against the schedule; a task that never arrives counts as late as the deadline).\n\n")
	for _, sc := range which {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch sc {
		case "precision":
			h, err := startHookwheel(ctx, svc, hwOptions(o), "precision")
			if err != nil {
				return err
			}
			rep.settings["hookwheel"] = h.Settings()
			ints := make([]int, len(rates))
			for i, r := range rates {
				ints[i] = int(r)
			}
			runs, err := precision(ctx, h, recv, ints, o.duration)
			rep.settings["hookwheel"] = h.Settings()
			h.Close()
			if err != nil {
				return err
			}
			for _, r := range runs {
				series = append(series, plotSeries{name: "hookwheel " + r.Label, hist: r.hist})
			}
			if err := rep.writeJSON("fire_precision", runs); err != nil {
				return err
			}
			rep.printf("## Fire precision\n\n")
			rep.latenessTable(fmt.Sprintf("Tasks falling due evenly for %s at each rate", o.duration), runs)
		case "throughput":
			h, err := startHookwheel(ctx, svc, hwOptions(o), "throughput")
			if err != nil {
				return err
			}
			r, err := throughput(ctx, h, recv, o.throughputTasks)
			rep.settings["hookwheel"] = h.Settings()
			h.Close()
			if err != nil {
				return err
			}
			if err := rep.writeJSON("throughput", r); err != nil {
				return err
			}
			rep.printf("## End-to-end throughput\n\n")
			rep.throughputTable([]*lateResult{r})
		case "ordering":
			h, err := startHookwheel(ctx, svc, hwOptions(o), "ordering")
			if err != nil {
				return err
			}
			r, err := ordering(ctx, h, recv, o.orderingKeys, o.orderingPerKey)
			rep.settings["hookwheel"] = h.Settings()
			h.Close()
			if err != nil {
				return err
			}
			if err := rep.writeJSON("ordering", r); err != nil {
				return err
			}
			rep.printf("## Ordering keys\n\n")
			rep.printf("%d keys of %d tasks each, all due at one instant (a key's tasks a microsecond apart, so their order is their due order). ", r.Keys, r.Tasks/max(1, r.Keys))
			rep.printf("A key's task may go only once the one before it is recorded delivered, so a key delivers one task per round trip; the keys go in parallel. ")
			rep.printf("Order violations: a key's task arriving no later than the one before it, or missing: **%d**.\n\n", r.OrderViolations)
			rep.throughputTable([]*lateResult{r})
		case "flow":
			h, err := startHookwheel(ctx, svc, hwOptions(o), "flow")
			if err != nil {
				return err
			}
			r, err := flow(ctx, h, recv, o.flowRate, o.flowSeconds)
			rep.settings["hookwheel"] = h.Settings()
			h.Close()
			// A run too broken to measure is still written: what arrived, and what did not.
			if r != nil {
				if werr := rep.writeJSON("flow", r); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			rep.printf("## Flow keys\n\n")
			rep.printf("%d tasks under one flow key limited to %d per second, all due at one instant: hookwheel must hold them back and send them one every %.3g ms, ", r.Tasks, r.Rate, r.IntervalMs)
			rep.printf("the slots decided in Redis when the tasks are claimed (and again for a send later than its slot's grace), a little wider than the plain interval where that grace could crowd a window. Measured from the arrival times at the receiver, in time order, and again from when hookwheel began each send (`attempts.started_at`), which leaves out the delivery's own delays. ")
			rep.printf("Sends spaced exactly put %d arrivals in every 1-second window; an arrival held up on its way from the slot before can slip in, so the limit holds while no window has more than %d.\n\n", r.Rate, r.Rate+1)
			if !r.WithinOneSlot {
				rep.printf("**The limit was exceeded at the receiver: %d arrivals in the 1-second window starting %.3f s after the first arrival (at most %d allowed).**\n\n", r.MostInSecond, r.MostInSecondAtS, r.Rate+1)
			}
			if r.SendsMostInSecond > r.Rate+1 {
				rep.printf("**The limit was exceeded by hookwheel itself: it began %d sends in the 1-second window starting %.3f s after its first send (at most %d allowed).**\n\n", r.SendsMostInSecond, r.SendsMostInSecondAtS, r.Rate+1)
			}
			rep.flowTable(r)
		case "ingest":
			h, err := startHookwheel(ctx, svc, hwOptions(o), "ingest")
			if err != nil {
				return err
			}
			res, err := ingest(ctx, h, recv, o.ingestDuration, o.batchSize)
			h.Close()
			if err != nil {
				return err
			}
			if err := rep.writeJSON("ingest", res); err != nil {
				return err
			}
			rep.printf("## Ingest (API)\n\n")
			rep.printf("Closed loop: N calls in flight, as fast as answered (latency is each call's own). Open loop: calls started at half the closed-loop rate; latency from the intended start, so queueing counts.\n\n")
			rep.printf("| call | loop | in flight | target req/s | requests/s | tasks/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, p := range res.Phases {
				call := "POST /v1/tasks"
				if p.Mode == "batch" {
					call = fmt.Sprintf("POST /v1/tasks/batch (%d)", p.BatchSize)
				}
				target := "—"
				if p.TargetRate > 0 {
					target = fmt.Sprintf("%.0f", p.TargetRate)
				}
				rep.printf("| %s | %s | %d | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %d |\n", call, p.Loop, p.Concurrency, target,
					p.RequestsPerS, p.TasksPerS, p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms, p.Latency.MaxMs, p.Errors)
			}
			for _, n := range res.Notes {
				rep.printf("\n%s\n", n)
			}
			rep.printf("\n")
		case "backlog":
			res, err := backlog(ctx, svc, hwOptions(o), recv, sizes, o.backlogRate, o.backlogDuration)
			if res != nil {
				if werr := rep.writeJSON("backlog", res); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			for _, r := range res.Runs {
				series = append(series, plotSeries{name: "hookwheel " + r.Label, hist: r.hist})
			}
			rep.printf("## Backlog scale\n\n")
			rep.printf("%d tasks/s falling due for %s, with 0 and then each backlog size pending a month ahead (rows copied in SQL from a task made through the API).\n\n", o.backlogRate, o.backlogDuration)
			rep.printf("| backlog rows | p50 ms | p99 ms | p99.9 ms | max ms | missing | RSS before MiB | RSS max MiB | wheel timers after |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, r := range res.Runs {
				rep.printf("| %d | %.2f | %.2f | %.2f | %.2f | %d | %.0f | %.0f | %.0f |\n", r.BacklogRows, r.Lateness.P50Ms, r.Lateness.P99Ms,
					r.Lateness.P999Ms, r.Lateness.MaxMs, r.Missing, float64(r.RSSBeforeBytes)/(1<<20), float64(r.RSSMaxBytes)/(1<<20), r.WheelTimers)
			}
			for _, s := range res.Seeding {
				rep.printf("\nSeeding %d rows took %.1f s (%.0f rows/s).", s.Rows, s.Seconds, s.RowsPerS)
			}
			rep.printf("\n\n")
		case "failover":
			res, err := failover(ctx, svc, hwOptions(o), recv, o.failoverRate, o.failoverDur, o.failoverKill)
			if err != nil {
				return err
			}
			if err := rep.writeJSON("failover", res); err != nil {
				return err
			}
			rep.printf("## Failover\n\n")
			rep.printf("Two `hookwheel serve` nodes share the partitions; %d tasks/s fall due for %s; node 1 (holding %d partitions) gets SIGKILL %s after the first due time.\n\n",
				res.Rate, o.failoverDur, res.KilledNodePartitions, o.failoverKill)
			rep.printf("- SIGKILL to the first of its tasks fired by the survivor: **%.0f ms**\n", res.FirstFireElsewhereMs)
			rep.printf("- SIGKILL to the last stranded task (%d due in between) delivered: %.0f ms\n", res.Stranded, res.CaughtUpMs)
			rep.printf("- Lateness of the killed node's tasks due after the kill: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", res.KilledNodeTasks.P50Ms, res.KilledNodeTasks.P99Ms, res.KilledNodeTasks.MaxMs)
			rep.printf("- Lateness of the survivor's own tasks meanwhile: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", res.SurvivorTasks.P50Ms, res.SurvivorTasks.P99Ms, res.SurvivorTasks.MaxMs)
			rep.printf("- Lost: %d; delivered twice: %d\n\n", res.Lost, res.Duplicates)
		case "nodes":
			res, err := nodesScenario(ctx, svc, hwOptions(o), recv, nodeSizes, o.nodesRate, o.nodesGap, o.nodesIdle)
			if res.settings != nil {
				rep.settings["hookwheel"] = res.settings
			}
			if len(res.Runs) > 0 {
				if werr := rep.writeJSON("nodes", res); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			section := nodesReport(res, o.nodesGap)
			fmt.Print(section)
			rep.printf("%s", section)
			var panels []timelinePanel
			for _, r := range res.Runs {
				pn := timelinePanel{title: fmt.Sprintf("%d nodes, %d tasks/s: lateness by due time", r.Nodes, res.Rate), points: r.Timeline}
				for _, ev := range r.Events {
					label := map[string]string{"join": "joins", "leave": "SIGTERM", "kill": "SIGKILL"}[ev.Kind]
					pn.marks = append(pn.marks, timelineMark{atS: ev.AtS, label: ev.Node + " " + label})
				}
				panels = append(panels, pn)
			}
			if err := rep.plotTimeline("nodes-timeline", panels); err != nil {
				return err
			}
			rep.printf("![lateness by due time](%s)\n\n", filepath.Base(rep.path("nodes-timeline.png")))
		}
		pause(ctx)
	}
	rep.settingsTable()
	name := "hookwheel"
	if cmd != "suite" {
		name = which[0]
	}
	if len(series) > 0 {
		if err := rep.plotLateness(name+"-lateness", "hookwheel", series); err != nil {
			return err
		}
		rep.printf("![lateness](%s)\n", filepath.Base(rep.path(name+"-lateness.png")))
	}
	return rep.writeMarkdown(name, "hookwheel benchmarks")
}

// runPeers runs hookwheel, River and Asynq one after the other on the same
// Postgres, Redis and receiver, and ends with the comparison lines.
func runPeers(ctx context.Context, o options, svc *services, recv *receiver, rep *reporter) error {
	type peerRuns struct {
		Precision  []*lateResult `json:"fire_precision"`
		Throughput []*lateResult `json:"throughput"`
		Errors     []string      `json:"errors,omitempty"`
	}
	var all peerRuns
	prec := map[string]*lateResult{}
	thr := map[string]*lateResult{}
	var failed []string
	for _, name := range strings.Split(o.systems, ",") {
		name = strings.TrimSpace(name)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var (
			sys system
			err error
		)
		switch name {
		case "hookwheel":
			sys, err = startHookwheel(ctx, svc, hwOptions(o), "peers")
		case "river":
			sys, err = startRiver(ctx, svc, o.river)
		case "asynq":
			sys, err = startAsynq(ctx, svc, o.asynq)
		default:
			return fmt.Errorf("-systems: unknown system %q", name)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			logf("%s: %v", name, err)
			continue
		}
		err = func() error {
			defer sys.Close()
			p, err := runLateness(ctx, sys, recv, lateSpec{
				scenario: "fire_precision", label: fmt.Sprintf("%d/s", o.peerRate),
				tasks: int(float64(o.peerRate) * o.peerDuration.Seconds()), spread: o.peerDuration,
			})
			if err != nil {
				return err
			}
			prec[name] = p
			all.Precision = append(all.Precision, p)
			pause(ctx)
			t, err := throughput(ctx, sys, recv, o.peerThroughputTasks)
			if err != nil {
				return err
			}
			thr[name] = t
			all.Throughput = append(all.Throughput, t)
			rep.settings[name] = sys.Settings()
			return nil
		}()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			logf("%s: %v", name, err)
		}
		pause(ctx)
	}
	all.Errors = failed
	if err := rep.writeJSON("peers", all); err != nil {
		return err
	}

	rep.printf("hookwheel, River and Asynq in turn, on the same Postgres, Redis and receiver (in the harness process). ")
	rep.printf("Each delivers the same Standard-Webhooks-signed POST. Lateness is arrival minus the intended due time; ")
	rep.printf("an early arrival counts as 0 ms late and is counted in *early*.\n\n")
	rep.printf("## Results\n\n")
	rep.latenessTable(fmt.Sprintf("Fire precision: %d tasks/s falling due evenly for %s", o.peerRate, o.peerDuration), all.Precision)
	rep.throughputTable(all.Throughput)

	var lines []string
	hwT, hwP := thr["hookwheel"], prec["hookwheel"]
	for _, peer := range []string{"river", "asynq"} {
		if !strings.Contains(o.systems, peer) {
			continue
		}
		pt, pp := thr[peer], prec[peer]
		if hwT != nil && pt != nil {
			lines = append(lines, fmt.Sprintf("peer=%s metric=throughput hookwheel=%.0f peer_value=%.0f ratio=%.2f",
				peer, hwT.AchievedRate, pt.AchievedRate, hwT.AchievedRate/pt.AchievedRate))
		}
		if hwP != nil && pp != nil {
			lines = append(lines, fmt.Sprintf("peer=%s metric=p99_lateness_ms hookwheel=%.2f peer_value=%.2f ratio=%.2f",
				peer, hwP.Lateness.P99Ms, pp.Lateness.P99Ms, pp.Lateness.P99Ms/hwP.Lateness.P99Ms))
		}
	}
	rep.printf("## Comparison\n\nA ratio above 1 means hookwheel is ahead (throughput: hookwheel/peer; lateness: peer/hookwheel).\n\n```\n%s\n```\n\n", strings.Join(lines, "\n"))
	for _, name := range []string{"river", "asynq"} {
		if p := prec[name]; p != nil && p.Early > 0 {
			rep.printf("%s delivered %d of %d tasks early (up to %.0f ms before their due time); they count as 0 ms late above.\n\n", name, p.Early, p.Tasks, p.EarlyMaxMs)
		}
	}
	rep.settingsTable()
	var series []plotSeries
	for _, name := range []string{"hookwheel", "river", "asynq"} {
		if p := prec[name]; p != nil {
			series = append(series, plotSeries{name: name, hist: p.hist, early: p.Early})
		}
	}
	if err := rep.plotLateness("peers-lateness", fmt.Sprintf("%d tasks/s due", o.peerRate), series); err != nil {
		return err
	}
	rep.printf("![lateness at %d/s](%s)\n", o.peerRate, filepath.Base(rep.path("peers-lateness.png")))
	if err := rep.writeMarkdown("peers", "hookwheel vs River vs Asynq"); err != nil {
		return err
	}

	for _, name := range []string{"river", "asynq"} {
		if p := prec[name]; p != nil && p.Early > 0 {
			fmt.Printf("note: %s delivered %d of %d tasks early (up to %.0f ms before due); early arrivals count as 0 ms lateness\n", name, p.Early, p.Tasks, p.EarlyMaxMs)
		}
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	if len(failed) > 0 {
		return fmt.Errorf("some systems failed: %s", strings.Join(failed, "; "))
	}
	return nil
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
