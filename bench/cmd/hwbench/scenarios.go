package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"
)

func hwOptions(o options) hookwheelOptions {
	return hookwheelOptions{bin: o.hookwheelBin, senders: o.senders, batchSize: o.batchSize}
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

// precision: tasks falling due evenly at each rate for dur.
func precision(ctx context.Context, sys system, recv *receiver, rates []int, dur time.Duration) ([]*lateResult, error) {
	var out []*lateResult
	for _, r := range rates {
		res, err := runLateness(ctx, sys, recv, lateSpec{
			scenario: "fire_precision", label: fmt.Sprintf("%d/s", r),
			tasks: int(float64(r) * dur.Seconds()), spread: dur,
		})
		if err != nil {
			return out, err
		}
		out = append(out, res)
		pause(ctx)
	}
	return out, nil
}

// throughput: n tasks all due at one instant; deliveries per second, and
// what each task cost the database over its whole life.
func throughput(ctx context.Context, sys system, recv *receiver, n int) (*lateResult, error) {
	return runLateness(ctx, sys, recv, lateSpec{scenario: "throughput", label: fmt.Sprintf("%d due at once", n), tasks: n, life: true})
}

// waitRecorded waits until the system has recorded done every task the
// receiver got (30 s at most), then reads the whole life's cost since from,
// and the part of it until stored, when the last task was stored.
// A system that keeps no tasks in Postgres (Asynq) has none.
func waitRecorded(ctx context.Context, svc *services, sys system, res *lateResult, from, stored lifeSnap) *lifeCost {
	c, ok := sys.(completer)
	if !ok {
		return nil
	}
	rs := res.rs
	rs.mu.Lock()
	delivered, last := rs.received, rs.last
	rs.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.completed(ctx)
		if err == nil && got-from.completed >= int64(delivered) {
			res.AttemptsRecordedLagMs = math.Max(0, float64(time.Since(last).Microseconds())/1000)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d tasks recorded done 30 s after the last delivery", got-from.completed, delivered))
			break
		}
		time.Sleep(20 * time.Millisecond) // polling Postgres until a deadline
	}
	life := svc.lifeCostBetween(ctx, from, svc.snapLife(ctx, sys), res.Tasks)
	if !stored.at.IsZero() {
		life.Storing = svc.lifeCostBetween(ctx, from, stored, res.Tasks)
		life.Storing.Completed = 0
	}
	res.AttemptsRecorded = life.Completed
	res.WALBytesPerTask = life.WALBytesPerTask
	return life
}

// ordering stores keys x perKey tasks due at one instant, perKey per
// ordering key, and measures deliveries per second and whether each key's
// tasks arrived one after the other in their order.
func ordering(ctx context.Context, sys system, recv *receiver, keys, perKey int) (*lateResult, error) {
	res, err := runLateness(ctx, sys, recv, lateSpec{scenario: "ordering",
		label: fmt.Sprintf("%d keys x %d tasks due at once", keys, perKey), tasks: keys * perKey, keys: keys})
	if err != nil {
		return nil, err
	}
	res.Keys = keys
	res.rs.mu.Lock()
	defer res.rs.mu.Unlock()
	for k := range keys {
		for i := k + keys; i < len(res.rs.arrivals); i += keys {
			prev, cur := res.rs.arrivals[i-keys], res.rs.arrivals[i]
			if prev == 0 || cur == 0 || cur <= prev {
				res.OrderViolations++
			}
		}
	}
	return res, nil
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
}
