package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

type failoverResult struct {
	Rate                 int     `json:"rate_per_s"`
	DurationS            float64 `json:"duration_s"`
	KillAfterS           float64 `json:"kill_after_first_due_s"`
	Nodes                int     `json:"nodes"`
	KilledNodePartitions int     `json:"killed_node_partitions"`
	// FirstFireElsewhereMs: SIGKILL to the first delivery, by the survivor,
	// of a task of the killed node's partitions.
	FirstFireElsewhereMs float64 `json:"first_fire_elsewhere_ms"`
	// CaughtUpMs: SIGKILL to the delivery of the last task stranded by it
	// (due before the survivor started firing the killed node's tasks).
	CaughtUpMs      float64        `json:"caught_up_ms"`
	Stranded        int            `json:"stranded_tasks"`
	KilledNodeTasks latencySummary `json:"killed_node_tasks_lateness"`
	SurvivorTasks   latencySummary `json:"survivor_tasks_lateness"`
	Lost            int            `json:"lost"`
	Duplicates      int            `json:"duplicates"`
	Run             *lateResult    `json:"run"`
	Notes           []string       `json:"notes,omitempty"`
}

func failover(ctx context.Context, svc *services, hwOpts hookwheelOptions, recv *receiver, rate int, dur, killAfter time.Duration) (*failoverResult, error) {
	h, err := startHookwheel(ctx, svc, hwOpts, "failover")
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if _, err := h.AddNode(ctx); err != nil {
		return nil, err
	}
	// Wait until the two nodes share the partitions.
	var nodeA uuid.UUID
	deadline := time.Now().Add(30 * time.Second)
	for {
		var owners, minShare int
		err := h.pool.QueryRow(ctx, `SELECT count(*), coalesce(min(n), 0) FROM (SELECT owner, count(*) AS n FROM partitions
			WHERE owner IS NOT NULL AND lease_expires_at > now() GROUP BY owner) s`).Scan(&owners, &minShare)
		if err == nil && owners == 2 && minShare >= 100 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("failover: the two nodes did not share the partitions within 30 s (owners %d, smallest share %d, %v)", owners, minShare, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := h.pool.QueryRow(ctx, "SELECT id FROM nodes ORDER BY started_at LIMIT 1").Scan(&nodeA); err != nil {
		return nil, err
	}
	h.submitNode.Store(1) // the API of the node that survives

	res := &failoverResult{Rate: rate, DurationS: dur.Seconds(), KillAfterS: killAfter.Seconds(), Nodes: 2}
	var (
		killedAt time.Time
		partsOfA = map[int16]bool{}
		killDone = make(chan struct{})
		ids      []uuid.UUID
	)
	during := func(first time.Time) {
		defer close(killDone)
		time.Sleep(time.Until(first.Add(killAfter)))
		rows, err := h.pool.Query(ctx, "SELECT id FROM partitions WHERE owner = $1", nodeA)
		if err == nil {
			ps, _ := pgx.CollectRows(rows, pgx.RowTo[int16])
			for _, p := range ps {
				partsOfA[p] = true
			}
		}
		killedAt = time.Now()
		h.nodes[0].kill()
		logf("failover: SIGKILL to node 1 (%d partitions) at %s after the first due time", len(partsOfA), killAfter)
	}
	// Keep the ids Schedule returns: a task's partition is its id's last byte.
	sched := &idKeeper{hookwheelSystem: h, ids: &ids}
	r, err := runLateness(ctx, sched, recv, lateSpec{
		scenario: "failover", label: fmt.Sprintf("%d/s, kill at +%s", rate, killAfter),
		tasks: int(float64(rate) * dur.Seconds()), spread: dur, during: during,
		drain: 60 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	<-killDone
	res.Run = r
	res.KilledNodePartitions = len(partsOfA)
	res.Lost = r.Missing
	res.Duplicates = r.Duplicates

	rs := r.rs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k := killedAt.UnixNano()
	var firstElsewhere int64 = math.MaxInt64
	deadHist, liveHist := newHist(), newHist()
	type arr struct{ due, at int64 }
	var moved []arr
	for i, id := range ids {
		due, at := rs.dues[i], rs.arrivals[i]
		if due < k {
			continue
		}
		lateUs := int64(0)
		if at > 0 {
			lateUs = max(1, (at-due)/1000)
		}
		if partsOfA[int16(id[15])] {
			if at > 0 {
				_ = deadHist.RecordValue(lateUs)
				moved = append(moved, arr{due, at})
				firstElsewhere = min(firstElsewhere, at)
			}
		} else if at > 0 {
			_ = liveHist.RecordValue(lateUs)
		}
	}
	res.KilledNodeTasks = summarize(deadHist)
	res.SurvivorTasks = summarize(liveHist)
	if firstElsewhere != math.MaxInt64 {
		res.FirstFireElsewhereMs = float64(firstElsewhere-k) / 1e6
		var caught int64
		for _, m := range moved {
			if m.due < firstElsewhere {
				res.Stranded++
				caught = max(caught, m.at)
			}
		}
		if caught > 0 {
			res.CaughtUpMs = float64(caught-k) / 1e6
		}
	} else {
		res.Notes = append(res.Notes, "no task of the killed node's partitions arrived after the kill")
	}
	logf("failover: first task of the killed node fired elsewhere %.0f ms after SIGKILL; %d stranded tasks caught up %.0f ms after it; killed node's tasks p99 %.1f ms, survivor's p99 %.1f ms; %d lost, %d duplicates",
		res.FirstFireElsewhereMs, res.Stranded, res.CaughtUpMs, res.KilledNodeTasks.P99Ms, res.SurvivorTasks.P99Ms, res.Lost, res.Duplicates)
	return res, nil
}
