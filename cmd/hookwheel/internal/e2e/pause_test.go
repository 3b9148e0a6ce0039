package e2e_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chaosPause is one freeze of a node with SIGSTOP, until its SIGCONT.
type chaosPause struct {
	node          int
	at, resumedAt time.Time
}

// TestThreeNodesPaused: three processes share 5,000 tasks falling due over
// 20 s while one of them, in turn, is frozen with SIGSTOP for 4 s every 6 s
// and then resumed: what a long GC pause, a container throttled at its CPU
// quota or a VM live migration does to a node. Its partitions move to the
// others, which send what it had claimed; the woken node must not send those
// claims again. Every task arrives; a task arrives twice only when its send
// was on the wire when its node froze (an answer the node had read is in
// the answer journal, and the recovery records it rather than sending it
// again): its first delivery came before the freeze; at most
// pauseDuplicates per pause, each with the same webhook-id and
// Idempotency-Key.
//
// The rate, about 80 tasks a second per node, keeps what a node has on the
// wire at a freeze to a few; the duplicates grow with it.
//
// Not parallel, for the same reason as TestThreeNodesKilled.
func TestThreeNodesPaused(t *testing.T) {
	const (
		count  = 5000
		spread = 20 * time.Second
		frozen = 4 * time.Second
		every  = 6 * time.Second
		drain  = 60 * time.Second
		// pauseDuplicates bounds the duplicates a freeze may cause, on
		// average over the pauses: the sends a node has on the wire at the
		// instant it freezes.
		pauseDuplicates = 3
	)
	c := startCluster(t, 3)
	rcv := newCountingReceiver(t)

	// Created in batch calls: one at a time, a loaded machine took longer
	// than any lead measured beforehand.
	t0 := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
	end := t0.Add(spread)
	tasks := planTasks(count, t0, spread)
	started := time.Now()
	createTasksInBatches(t, c.bases, c.apiKey, rcv.URL+"/paused", tasks)
	t.Logf("created %d tasks in %s, %s before the first falls due", count, time.Since(started).Round(time.Millisecond), time.Until(t0).Round(time.Millisecond))
	require.True(t, time.Now().Before(t0), "creating the tasks took past the first due time")

	// The freezer: from t0+1s, every 6 s while the freeze ends before the
	// last task falls due, SIGSTOP the next node and SIGCONT it 4 s later.
	var pauses []chaosPause
	freezerDone := make(chan struct{})
	go func() {
		defer close(freezerDone)
		next := t0.Add(time.Second)
		for i := 0; next.Add(frozen).Before(end); i++ {
			<-time.After(time.Until(next)) // pacing, not waiting for a condition
			n := c.nodes[i%len(c.nodes)]
			at, err := n.Signal(syscall.SIGSTOP)
			if err != nil {
				t.Errorf("freezer: %v", err)
				return
			}
			<-time.After(frozen) // the node stays frozen
			resumed, err := n.Signal(syscall.SIGCONT)
			if err != nil {
				t.Errorf("freezer: %v", err)
				return
			}
			pauses = append(pauses, chaosPause{node: i % len(c.nodes), at: at, resumedAt: resumed})
			next = at.Add(every)
		}
	}()
	<-freezerDone
	require.False(t, t.Failed(), "the freezer failed")
	require.NotEmpty(t, pauses)

	deadline := end.Add(drain)
	if err := rcv.waitDistinct(count, deadline); err != nil {
		logMissing(t, c.dbURL, tasks, rcv.snapshot())
		logDeferrals(t, c.bases)
		require.NoError(t, err)
	}
	t.Logf("every task arrived %s after the last fell due", time.Since(tasks[len(tasks)-1].runAt).Round(time.Millisecond))
	require.NoError(t, waitTasksInStatus(c.bases[0], c.apiKey, "delivered", count, deadline))
	extra := rcv.settle(time.Second)

	hits := rcv.snapshot()
	first, duplicated := checkHits(t, tasks, hits)
	byID := map[string][]hit{}
	for _, h := range hits {
		byID[h.id] = append(byID[h.id], h)
	}
	duplicates := len(hits) - len(first)
	for n, p := range pauses {
		var around latencies
		for _, task := range tasks {
			if task.runAt.Before(p.at) || task.runAt.After(p.resumedAt) {
				continue
			}
			if h, ok := first[task.id]; ok {
				around = append(around, h.lateness())
			}
		}
		t.Logf("pause %d of node%d at t0%+.3fs for %s: tasks due meanwhile: lateness %s",
			n+1, p.node, p.at.Sub(t0).Seconds(), p.resumedAt.Sub(p.at).Round(time.Millisecond), around)
	}
	for _, task := range tasks {
		if h, ok := first[task.id]; ok && h.lateness() > maxFailover/2 {
			t.Logf("task %s due at t0%+.3fs arrived %s late", task.id, task.runAt.Sub(t0).Seconds(), h.lateness().Round(time.Millisecond))
		}
	}
	all := firstLateness(first).sorted()
	t.Logf("lateness of the first delivery of all %d tasks: %s", count, all)
	t.Logf("%d pauses, %d duplicate deliveries of %d tasks (bound %d); %d deliveries after all were recorded delivered",
		len(pauses), duplicates, len(duplicated), len(pauses)*pauseDuplicates, extra)

	// A duplicate is a send on the wire when its node froze: its first
	// delivery reached the receiver shortly before the freeze (or the
	// moment after, for a request already written), and another came after.
	for _, id := range duplicated {
		ds := byID[id]
		slices.SortFunc(ds, func(a, b hit) int { return a.arrived.Compare(b.arrived) })
		var attempts []string
		for _, d := range ds {
			attempts = append(attempts, fmt.Sprintf("attempt %d at t0%+.3fs key %q", d.attempt, d.arrived.Sub(t0).Seconds(), d.idemKey))
		}
		t.Logf("task %s arrived %d times: %v", id, len(ds), attempts)
		matched := slices.ContainsFunc(pauses, func(p chaosPause) bool {
			return !ds[0].arrived.Before(p.at.Add(-inFlightWindow)) && !ds[0].arrived.After(p.at.Add(killSlack)) && ds[len(ds)-1].arrived.After(p.at)
		})
		if !matched {
			t.Errorf("task %s arrived %d times, the first not within %s before a freeze: %v", id, len(ds), inFlightWindow, attempts)
		}
		for _, d := range ds[1:] {
			require.Equal(t, ds[0].idemKey, d.idemKey, "every delivery of task %s carries the same Idempotency-Key", id)
		}
	}
	require.LessOrEqual(t, duplicates, len(pauses)*pauseDuplicates, "a woken node sent claims it no longer held")
	require.LessOrEqual(t, all[len(all)-1], maxFailover, "a frozen node's tasks must move to the others quickly")
	c.termAll(t)
}
