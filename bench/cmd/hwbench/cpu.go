package main

import (
	"context"
	"math"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// cpuUse is the CPU time spent during a run's delivery phase (after the
// tasks were stored), by who spent it. Postgres counts only the backends
// connected to the system's own database; Redis is the whole server, which
// other work on the machine may share.
type cpuUse struct {
	HarnessS      float64 `json:"harness_s"` // hwbench: receiver, and the River/Asynq workers
	NodeS         float64 `json:"hookwheel_processes_s,omitempty"`
	PostgresS     float64 `json:"postgres_backends_s,omitempty"`
	RedisS        float64 `json:"redis_server_s"`
	PerDeliveryMs float64 `json:"total_per_delivery_ms"`
	WallS         float64 `json:"wall_s"`
}

// cpuSource is implemented by systems whose processes and database can be watched.
type cpuSource interface {
	processPIDs() []int
	databaseName() string
}

func (h *hookwheelSystem) processPIDs() []int {
	var out []int
	for _, n := range h.nodes {
		select {
		case <-n.exited:
		default:
			out = append(out, n.pid())
		}
	}
	return out
}

func (h *hookwheelSystem) databaseName() string { return dbNameOf(h.dbURL) }
func (r *riverSystem) processPIDs() []int       { return nil }
func (r *riverSystem) databaseName() string     { return dbNameOf(r.dbURL) }

func dbNameOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(p.Path, "/")
}

// procCPU is a process's user+system CPU time in seconds (0 if gone).
func procCPU(pid int) float64 {
	f, ok := procStat(pid)
	if !ok {
		return 0
	}
	return statSeconds(f, 11) + statSeconds(f, 12)
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

type cpuSnap struct {
	self     float64
	procs    map[int]float64
	backends map[int]float64
	redis    float64
}

func (s *services) redisPID(ctx context.Context) int {
	rdb, err := s.redis()
	if err != nil {
		return 0
	}
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func (s *services) snapCPU(ctx context.Context, sys system) cpuSnap {
	snap := cpuSnap{self: selfCPU(), procs: map[int]float64{}, backends: map[int]float64{}}
	if pid := s.redisPID(ctx); pid > 0 {
		snap.redis = procCPU(pid)
	}
	src, ok := sys.(cpuSource)
	if !ok {
		return snap
	}
	for _, pid := range src.processPIDs() {
		snap.procs[pid] = procCPU(pid)
	}
	if db := src.databaseName(); db != "" {
		if conn, err := pgx.Connect(ctx, s.databaseURL); err == nil {
			rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", db)
			if err == nil {
				pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
				for _, p := range pids {
					snap.backends[int(p)] = procCPU(int(p))
				}
			}
			conn.Close(ctx)
		}
	}
	return snap
}

// cpuBetween is what was spent from a to b. Processes seen only at the end
// count from zero; those gone by the end are lost (rare: pools keep their
// connections).
func cpuBetween(a, b cpuSnap, wall float64, delivered int) cpuUse {
	u := cpuUse{HarnessS: b.self - a.self, RedisS: b.redis - a.redis, WallS: wall}
	for pid, v := range b.procs {
		u.NodeS += v - a.procs[pid]
	}
	for pid, v := range b.backends {
		u.PostgresS += v - a.backends[pid]
	}
	if delivered > 0 {
		u.PerDeliveryMs = (u.HarnessS + u.NodeS + u.PostgresS + u.RedisS) * 1000 / float64(delivered)
	}
	r := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	u.HarnessS, u.NodeS, u.PostgresS, u.RedisS, u.PerDeliveryMs, u.WallS = r(u.HarnessS), r(u.NodeS), r(u.PostgresS), r(u.RedisS), r(u.PerDeliveryMs), r(u.WallS)
	return u
}

func servicesOf(sys system) *services {
	switch s := sys.(type) {
	case *hookwheelSystem:
		return s.svc
	case *idKeeper:
		return s.svc
	case *riverSystem:
		return s.svc
	case *asynqSystem:
		return s.svc
	}
	return nil
}
