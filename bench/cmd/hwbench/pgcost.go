package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// lifeCost is what a run's tasks cost the database server over their whole
// life: from before the first was stored until the last was recorded done
// (insert, claim, send, record, completion), per task. Postgres is the one
// part of an installation that does not scale out, so its CPU and WAL per
// task bound what an installation can do.
//
// The CPU is the whole server's: the postmaster's own and its reaped
// children's time plus every live child's (backends, WAL writer,
// checkpointer, autovacuum), read from /proc. Work of other databases on
// the same server counts too: measure on an otherwise idle server.
type lifeCost struct {
	PostgresCPUPerTaskMs float64 `json:"postgres_cpu_per_task_ms"`
	WALBytesPerTask      float64 `json:"wal_bytes_per_task"`
	// NodeCPUPerTaskMs is the system's own processes' (hookwheel's nodes;
	// River and Asynq run in the harness, whose CPU is not split).
	NodeCPUPerTaskMs float64 `json:"node_cpu_per_task_ms,omitempty"`
	// Completed is how many tasks the system recorded done in the window
	// (hookwheel: attempts; River: jobs completed).
	Completed int64   `json:"completed"`
	WallS     float64 `json:"wall_s"`
	// Storing is the part of the above spent until the last task was
	// stored (inserts, and whatever the system did meanwhile); the rest
	// is the tasks' dispatch. Nil when it could not be read.
	Storing *lifeCost `json:"storing,omitempty"`
}

// completer is implemented by systems that record each task's end in
// Postgres: the whole life ends only once that is written.
type completer interface {
	// completed counts the tasks recorded done so far in the system's
	// database.
	completed(ctx context.Context) (int64, error)
}

func (h *hookwheelSystem) completed(ctx context.Context) (int64, error) {
	return h.attemptsRecorded(ctx)
}

func (r *riverSystem) completed(ctx context.Context) (int64, error) {
	var n int64
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
	return n, err
}

// lifeSnap is one reading of the counters lifeCost is the difference of.
type lifeSnap struct {
	at          time.Time
	postgresCPU float64
	walLSN      string
	nodeCPU     float64
	completed   int64
}

// snapLife reads the counters; a reading that fails leaves its field zero
// and lifeCostBetween leaves out what it cannot tell.
func (s *services) snapLife(ctx context.Context, sys system) lifeSnap {
	snap := lifeSnap{at: time.Now()}
	conn, err := pgx.Connect(ctx, s.databaseURL)
	if err != nil {
		return snap
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid(), pg_current_wal_lsn()::text").Scan(&backend, &snap.walLSN); err == nil {
		snap.postgresCPU = serverCPU(backend)
	}
	if src, ok := sys.(cpuSource); ok {
		for _, pid := range src.processPIDs() {
			snap.nodeCPU += procCPU(pid)
		}
	}
	if c, ok := sys.(completer); ok {
		snap.completed, _ = c.completed(ctx)
	}
	return snap
}

// lifeCostBetween is what tasks tasks cost from a to b.
func (s *services) lifeCostBetween(ctx context.Context, a, b lifeSnap, tasks int) *lifeCost {
	per := func(total float64) float64 { return math.Round(total/float64(tasks)*1000) / 1000 }
	c := &lifeCost{
		PostgresCPUPerTaskMs: per((b.postgresCPU - a.postgresCPU) * 1000),
		NodeCPUPerTaskMs:     per((b.nodeCPU - a.nodeCPU) * 1000),
		Completed:            b.completed - a.completed,
		WallS:                math.Round(b.at.Sub(a.at).Seconds()*1000) / 1000,
	}
	if a.walLSN != "" && b.walLSN != "" {
		if conn, err := pgx.Connect(ctx, s.databaseURL); err == nil {
			var n int64
			if conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", b.walLSN, a.walLSN).Scan(&n) == nil {
				c.WALBytesPerTask = math.Round(float64(n) / float64(tasks))
			}
			conn.Close(ctx)
		}
	}
	return c
}

// serverCPU is the CPU time, in seconds, of the Postgres server backend
// belongs to: its postmaster's own and reaped children's, plus every live
// child's. A child that exits between two readings moves from the live sum
// to the reaped one with its whole time, so differences stay exact.
func serverCPU(backend int) float64 {
	f, ok := procStat(backend)
	if !ok {
		return 0
	}
	postmaster, _ := strconv.Atoi(f[1])
	pf, ok := procStat(postmaster)
	if !ok {
		return 0
	}
	total := statSeconds(pf, 11) + statSeconds(pf, 12) + statSeconds(pf, 13) + statSeconds(pf, 14)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return total
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cf, ok := procStat(pid); ok && cf[1] == pf[0] {
			total += statSeconds(cf, 11) + statSeconds(cf, 12)
		}
	}
	return total
}

// procStat is /proc/pid/stat's fields after the command: [0] is the pid
// (put back in front), [1] the parent's pid, [11] utime, [12] stime, [13]
// cutime, [14] cstime, in clock ticks.
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	// After the command: state, ppid, ...; f[0] becomes the pid.
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, false
	}
	f[0] = strconv.Itoa(pid)
	return f, true
}

func statSeconds(f []string, i int) float64 {
	v, _ := strconv.ParseFloat(f[i], 64)
	return v / 100 // USER_HZ
}
