package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

type nodesAnalysis struct {
	w       *ownershipWatch
	rs      *runState
	taskIDs []uuid.UUID
	first   time.Time
	end     time.Time // when the run was closed: missing tasks count as late as this
	gap     time.Duration
	names   map[uuid.UUID]string
}

// after is the time from t to the first sample after t for which ok holds,
// in ms, or -1.
func (a *nodesAnalysis) after(t time.Time, ok func(ownershipSample) bool) float64 {
	for _, s := range a.w.samples {
		if s.at.After(t) && ok(s) {
			return ms(s.at.Sub(t))
		}
	}
	return -1
}

// event fills in ev, which happened at t to node ids[idx] (which held held,
// for leave and kill).
func (a *nodesAnalysis) event(ev *nodeEvent, t time.Time, ids []uuid.UUID, idx int, held map[int16]bool) {
	ev.AtS = math.Round(t.Sub(a.first).Seconds()*1000) / 1000
	ev.SettledMs = a.after(t, func(s ownershipSample) bool { return settled(s, ev.NodesAfter) })
	if ev.Kind == "join" {
		joined := ids[len(ids)-1]
		share := partitions / ev.NodesAfter
		ev.OwnedMs = a.after(t, func(s ownershipSample) bool {
			c, _ := counts(s)
			if c[joined] >= share {
				ev.Partitions = c[joined]
				return true
			}
			return false
		})
	} else {
		gone := ids[idx]
		ev.OwnedMs = a.after(t, func(s ownershipSample) bool {
			for p := range held {
				if o := s.owner[p]; o == uuid.Nil || o == gone {
					return false
				}
			}
			return true
		})
	}

	a.rs.mu.Lock()
	defer a.rs.mu.Unlock()
	te := t.UnixNano()
	if held != nil {
		// Its tasks due after the event: the first to arrive from another
		// node, and the last of those stranded until then.
		first := int64(math.MaxInt64)
		for i, id := range a.taskIDs {
			if held[int16(id[15])] && a.rs.dues[i] >= te && a.rs.arrivals[i] > 0 {
				first = min(first, a.rs.arrivals[i])
			}
		}
		if first == math.MaxInt64 {
			ev.FirstFireMs = -1
			ev.Notes = append(ev.Notes, "none of its partitions' tasks due after the event arrived")
		} else {
			ev.FirstFireMs = ms(time.Duration(first - te))
			var caught int64
			for i, id := range a.taskIDs {
				if held[int16(id[15])] && a.rs.dues[i] >= te && a.rs.dues[i] < first {
					ev.Stranded++
					caught = max(caught, a.rs.arrivals[i])
				}
			}
			if caught > 0 {
				ev.CaughtUpMs = ms(time.Duration(caught - te))
			}
		}
	}
	window := max(time.Second, time.Duration(max(ev.OwnedMs, ev.FirstFireMs, ev.CaughtUpMs, ev.SettledMs)*float64(time.Millisecond)))
	window = min(window, a.gap)
	ev.WindowS = math.Round(window.Seconds()*1000) / 1000
	lookBack := min(3*time.Second, a.gap/2)
	before, during, its := newHist(), newHist(), newHist()
	dups := map[int]int{}
	for _, seq := range a.rs.dupSeqs {
		dups[seq]++
	}
	for i, due := range a.rs.dues {
		if due >= te-int64(time.Second) && due < te+int64(window) {
			ev.Duplicates += dups[i]
		}
		late := lateness(a.rs.arrivals[i], due, a.end)
		switch {
		case due >= te-int64(lookBack) && due < te:
			_ = before.RecordValue(late)
		case due >= te && due < te+int64(window):
			_ = during.RecordValue(late)
			if held[int16(a.taskIDs[i][15])] {
				_ = its.RecordValue(late)
			}
			if a.rs.arrivals[i] == 0 {
				ev.Missing++
			}
		}
	}
	ev.Before, ev.During = summarize(before), summarize(during)
	if held != nil {
		s := summarize(its)
		ev.ItsTasks = &s
	}
	if ev.OwnedMs < 0 {
		ev.Notes = append(ev.Notes, "the partitions had not moved when the watch ended")
	}
}

// lateness in µs as the receiver records it: early counts as on time, and a
// task that never arrived as late as the end of the run.
func lateness(arrival, due int64, end time.Time) int64 {
	if arrival == 0 {
		arrival = end.UnixNano()
	}
	return max(1, (arrival-due)/1000)
}

// ownership keeps the samples at which some node's count changed.
func (a *nodesAnalysis) ownership() []ownershipPoint {
	var out []ownershipPoint
	var last map[uuid.UUID]int
	lastUnowned := -1
	for _, s := range a.w.samples {
		c, unowned := counts(s)
		if unowned == lastUnowned && mapsEqual(c, last) {
			continue
		}
		last, lastUnowned = c, unowned
		p := ownershipPoint{TMs: ms(s.at.Sub(a.first)), Owned: map[string]int{}, Unowned: unowned}
		for id, k := range c {
			name := a.names[id]
			if name == "" {
				name = id.String()
			}
			p.Owned[name] = k
		}
		out = append(out, p)
	}
	return out
}

func mapsEqual(a, b map[uuid.UUID]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// timeline is the median and worst lateness of the tasks due in each slice
// of the run.
func (a *nodesAnalysis) timeline(slice time.Duration) []timelinePoint {
	a.rs.mu.Lock()
	defer a.rs.mu.Unlock()
	first := a.first.UnixNano()
	byslice := map[int][]float64{}
	for i, due := range a.rs.dues {
		k := int((due - first) / int64(slice))
		byslice[k] = append(byslice[k], float64(lateness(a.rs.arrivals[i], due, a.end))/1000)
	}
	keys := make([]int, 0, len(byslice))
	for k := range byslice {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]timelinePoint, 0, len(keys))
	for _, k := range keys {
		v := byslice[k]
		slices.Sort(v)
		out = append(out, timelinePoint{DueS: float64(k) * slice.Seconds(), Tasks: len(v), P50Ms: v[len(v)/2], MaxMs: v[len(v)-1]})
	}
	return out
}

// nodesReport writes the scenario's Markdown section, which hwbench also
// prints to stdout.
func nodesReport(res *nodesResult, gap time.Duration) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Nodes\n\n")
	p("N nodes share the %d partitions (node 1 `hookwheel serve`, the others `hookwheel serve --dispatcher-only`; default lease of 1.5 s, heartbeat every 300 ms). ", partitions)
	p("Idle first: what each node's heartbeats and polls cost Postgres. Then %d tasks/s fall due for %s, spread over all partitions, ", res.Rate, 4*gap)
	p("and %s after the first due time a node joins, %s after it node 2 gets SIGTERM, %s after that node 3 gets SIGKILL. ", gap, gap, gap)
	p("Partition ownership is read from the `partitions` table every 50 ms.\n\n")
	p("### Hand-over\n\n")
	p("| nodes | event | partitions | owned ms | first fire ms | stranded | caught up ms | settled ms | window s | before p50 / p99 / max ms | window p50 / p99 / max ms | its tasks p99 / max ms | missing | dup |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|\n")
	cell := func(v float64) string {
		if v < 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, r := range res.Runs {
		for _, ev := range r.Events {
			kind := map[string]string{"join": "join", "leave": "leave (SIGTERM)", "kill": "kill (SIGKILL)"}[ev.Kind]
			its, stranded, caught := "—", "—", "—"
			if ev.ItsTasks != nil {
				its = fmt.Sprintf("%.1f / %.1f", ev.ItsTasks.P99Ms, ev.ItsTasks.MaxMs)
				stranded, caught = fmt.Sprint(ev.Stranded), cell(ev.CaughtUpMs)
			}
			p("| %d → %d | %s %s | %d | %s | %s | %s | %s | %s | %.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %s | %d | %d |\n",
				ev.NodesBefore, ev.NodesAfter, kind, ev.Node, ev.Partitions,
				cell(ev.OwnedMs), cell(ev.FirstFireMs), stranded, caught, cell(ev.SettledMs), ev.WindowS,
				ev.Before.P50Ms, ev.Before.P99Ms, ev.Before.MaxMs, ev.During.P50Ms, ev.During.P99Ms, ev.During.MaxMs, its, ev.Missing, ev.Duplicates)
		}
	}
	p("\nTimes are from the event: the new process's start (join), SIGTERM (leave), SIGKILL (kill). ")
	p("*owned*: join, until the node holds an even share; leave and kill, until every partition the node held is leased by another. ")
	p("*first fire*: join, until the node starts its first send; leave and kill, until the first of its partitions' tasks due after the event arrives from another node. ")
	p("*stranded*: its tasks due between the event and that first arrival; *caught up*: until the last of them arrived. ")
	p("*settled*: until every partition is leased and each node holds an even share, give or take one. ")
	p("The *window* is the tasks due from the event until the last of those times (at least 1 s), against the tasks due in the %s before it; ", min(3*time.Second, gap/2))
	p("*its tasks* are those of the departing node's partitions in the window. ")
	p("*missing*: tasks due in the window that never arrived; *dup*: repeats of tasks due from 1 s before the event to the end of the window (a send in flight at SIGKILL is of a task due just before it).\n\n")
	for _, r := range res.Runs {
		p("- %d nodes: %d tasks, lost %d, delivered twice %d; lateness over the whole run p50 %.2f ms, p99 %.2f ms, max %.1f ms; partitions split evenly %.0f ms after the last start; at most %d Postgres connections during the load\n",
			r.Nodes, r.Run.Tasks, r.Lost, r.Duplicates, r.Run.Lateness.P50Ms, r.Run.Lateness.P99Ms, r.Run.Lateness.MaxMs, r.StartSettledMs, r.PeakConnections)
		for _, ev := range r.Events {
			for _, note := range ev.Notes {
				p("  - %s %s: %s\n", ev.Kind, ev.Node, note)
			}
			if ev.Kind == "leave" && ev.ExitedMs > 0 {
				p("  - %s exited %.0f ms after SIGTERM\n", ev.Node, ev.ExitedMs)
			}
			if ev.Kind == "join" {
				p("  - %s answered /readyz %.0f ms after its start\n", ev.Node, ev.ReadyMs)
			}
		}
		for _, note := range r.Notes {
			p("  - %s\n", note)
		}
	}
	p("\n### Idle cost per node\n\n")
	p("N idle nodes (no task due), over the window. Postgres CPU is the utime+stime of each node's backends (its application_name in pg_stat_activity), from /proc; ")
	p("transactions are the run database's commits and rollbacks (pg_stat_database, which each backend updates about once a second) divided by N. ")
	p("/proc counts CPU in ticks of 10 ms: over %.0f s, one tick is %.2f ms/s.\n\n", res.IdleWindowS, 10/res.IdleWindowS)
	p("| nodes | window s | Postgres CPU ms/s per node (mean / max) | hookwheel CPU ms/s per node | transactions/s (all / per node) | Postgres connections per node |\n")
	p("|---:|---:|---|---:|---|---:|\n")
	for _, r := range res.Runs {
		if c := r.Idle; c != nil {
			p("| %d | %.0f | %.2f / %.2f | %.2f | %.1f / %.1f | %.1f |\n", r.Nodes, c.WindowS, c.PostgresCPUMsPerS, c.PostgresCPUMsPerSMax,
				c.HookwheelCPUMsPerS, c.TransactionsPerS, c.TransactionsPerSPerNode, c.ConnectionsPerNode)
		}
	}
	p("\n")
	return b.String()
}
