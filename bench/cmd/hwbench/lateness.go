package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// latencySummary is an HDR histogram's percentiles, in milliseconds.
type latencySummary struct {
	Count        int64      `json:"count"`
	P50Ms        float64    `json:"p50_ms"`
	P90Ms        float64    `json:"p90_ms"`
	P99Ms        float64    `json:"p99_ms"`
	P999Ms       float64    `json:"p999_ms"`
	MaxMs        float64    `json:"max_ms"`
	MeanMs       float64    `json:"mean_ms"`
	Distribution []pctPoint `json:"distribution,omitempty"`
}

type pctPoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

var plotPercentiles = []float64{0, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92.5, 95, 96.875, 97.5, 98.4375, 99, 99.2188,
	99.5, 99.6094, 99.75, 99.8047, 99.9, 99.9023, 99.95, 99.9512, 99.975, 99.99, 99.995, 99.999, 100}

func summarize(h *hdrhistogram.Histogram) latencySummary {
	ms := func(us int64) float64 { return math.Round(float64(us)) / 1000 }
	s := latencySummary{
		Count:  h.TotalCount(),
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P90Ms:  ms(h.ValueAtQuantile(90)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
		MeanMs: math.Round(h.Mean()) / 1000,
	}
	if h.TotalCount() > 0 {
		for _, p := range plotPercentiles {
			s.Distribution = append(s.Distribution, pctPoint{Percentile: p, Ms: ms(h.ValueAtQuantile(p))})
		}
	}
	return s
}

// lateResult is one run of tasks falling due, as the receiver saw it.
type lateResult struct {
	System   string `json:"system"`
	Scenario string `json:"scenario"`
	Label    string `json:"label"`
	Tasks    int    `json:"tasks"`
	// IntendedRate is how many tasks fall due per second (0: all at one instant).
	IntendedRate float64 `json:"intended_rate_per_s"`
	SpreadS      float64 `json:"spread_s"`

	Delivered     int   `json:"delivered"`
	Missing       int   `json:"missing"`
	Duplicates    int   `json:"duplicates"`
	BadSignatures int   `json:"bad_signatures"`
	AfterDeadline int   `json:"arrived_after_deadline"`
	Early         int64 `json:"early"`
	// EarlyP99Ms and EarlyMaxMs: how early the early ones were.
	EarlyP99Ms float64 `json:"early_p99_ms"`
	EarlyMaxMs float64 `json:"early_max_ms"`

	// Lateness is arrival minus intended due time; early arrivals count as 0
	// here (and in Early), missing ones as late as the deadline.
	Lateness latencySummary `json:"lateness"`

	// AchievedRate is deliveries per second between the first and the last arrival.
	AchievedRate float64 `json:"achieved_rate_per_s"`
	WindowS      float64 `json:"window_s"`
	// Sustained*: deliveries in each whole second of the window (the last,
	// partial second left out).
	SustainedMin    float64 `json:"sustained_min_per_s,omitempty"`
	SustainedMedian float64 `json:"sustained_median_per_s,omitempty"`
	PerSecond       []int   `json:"per_second,omitempty"`

	InsertS       float64 `json:"insert_s"`
	InsertRate    float64 `json:"insert_rate_per_s"`
	LeadS         float64 `json:"lead_s"`
	InsertOverran bool    `json:"insert_overran_first_due"`

	// Keys and OrderViolations are the ordering scenario's: each time a
	// key's task arrived no later than the one before it in its order (or
	// either never arrived).
	Keys            int `json:"ordering_keys,omitempty"`
	OrderViolations int `json:"order_violations"`

	AttemptsRecorded      int64   `json:"attempts_recorded,omitempty"`
	AttemptsRecordedLagMs float64 `json:"attempts_recorded_after_last_delivery_ms,omitempty"`
	// WALBytesPerTask is the Postgres WAL written from before the tasks were
	// stored until every attempt was recorded, per task: what one delivered
	// task costs the primary's disk and its replicas' network. It is the
	// server's WAL, so anything else written meanwhile counts too.
	WALBytesPerTask float64 `json:"wal_bytes_per_task,omitempty"`

	// CPU spent while the tasks fell due and were delivered.
	CPU *cpuUse `json:"cpu,omitempty"`
	// Life is what the tasks cost the database server from before they
	// were stored until the last was recorded done (lateSpec.life).
	Life *lifeCost `json:"life_cost,omitempty"`

	// NodeMetrics are hookwheel's own counters and gauges at the end of the
	// run (summed over its nodes): deferrals, attempts by outcome...
	NodeMetrics map[string]float64 `json:"hookwheel_metrics,omitempty"`

	RSSBeforeBytes int64   `json:"rss_before_bytes,omitempty"`
	RSSMaxBytes    int64   `json:"rss_max_bytes,omitempty"`
	WheelTimers    float64 `json:"wheel_timers_after,omitempty"`
	BacklogRows    int64   `json:"backlog_rows,omitempty"`

	Notes []string `json:"notes,omitempty"`

	hist *hdrhistogram.Histogram
	rs   *runState
}

type lateSpec struct {
	scenario, label string
	tasks           int
	spread          time.Duration // 0: all due at one instant
	minLead         time.Duration
	drain           time.Duration // wait this long after the last due time at most
	// during runs in its own goroutine once the tasks are stored, with the
	// first due instant.
	during func(first time.Time)
	// afterInsert, if set, runs right after insertion (RSS sampling...).
	rssPID int
	// keys, when set, gives task i the ordering key i mod keys and a due
	// time i/keys microseconds after the first: each key's tasks are then
	// ordered by due time whatever order they are stored in.
	keys int
	// flowKey, when set, is every task's flow key (its limit set beforehand).
	flowKey string
	// life measures the tasks' whole-life cost (Result.Life): from before
	// they are stored until the system has recorded each one done.
	life bool
}

var runCounter atomic.Int64

// insertRates caches, per system, a measured insertion rate, to know how far
// ahead to schedule a run so that every task is stored before the first falls due.
var (
	insertRatesMu sync.Mutex
	insertRates   = map[system]float64{}
)

func insertRate(ctx context.Context, sys system, url string) (float64, error) {
	insertRatesMu.Lock()
	r, ok := insertRates[sys]
	insertRatesMu.Unlock()
	if ok {
		return r, nil
	}
	// 2,000 tasks due in a year: never fired during the bench.
	const n = 2000
	far := time.Now().Add(365 * 24 * time.Hour)
	tasks := make([]task, n)
	for i := range tasks {
		tasks[i] = task{seq: i, due: far}
	}
	start := time.Now()
	if _, err := sys.Schedule(ctx, "calibrate", url, tasks); err != nil {
		return 0, err
	}
	r = n / time.Since(start).Seconds()
	insertRatesMu.Lock()
	insertRates[sys] = r
	insertRatesMu.Unlock()
	logf("%s: stores about %.0f tasks/s", sys.Name(), r)
	return r, nil
}

// runLateness schedules spec.tasks tasks due evenly over spec.spread (or all
// at once), waits for them at the receiver and summarizes what it saw.
func runLateness(ctx context.Context, sys system, recv *receiver, spec lateSpec) (*lateResult, error) {
	svc := servicesOf(sys)
	rate, err := insertRate(ctx, sys, recv.url)
	if err != nil {
		return nil, err
	}
	if spec.drain == 0 {
		spec.drain = 30*time.Second + time.Duration(spec.tasks/1000)*time.Second
	}
	if spec.minLead == 0 {
		// Stored at least 6 s ahead: more than River's job scheduler
		// interval (5 s, with 5 s of lookahead), so no system is judged on
		// tasks stored just before they fall due.
		spec.minLead = 6 * time.Second
	}
	lead := max(spec.minLead, 2*time.Second+time.Duration(2*float64(spec.tasks)/rate*float64(time.Second)))
	first := time.Now().Add(lead).Truncate(time.Millisecond)
	tasks := make([]task, spec.tasks)
	dues := make([]int64, spec.tasks)
	for i := range tasks {
		due := first
		if spec.spread > 0 {
			due = first.Add(time.Duration(int64(i) * int64(spec.spread) / int64(spec.tasks))).Truncate(time.Microsecond)
		}
		tasks[i] = task{seq: i, due: due}
		if spec.keys > 0 {
			tasks[i].due = due.Add(time.Duration(i/spec.keys) * time.Microsecond)
			tasks[i].orderingKey = fmt.Sprintf("%s-key-%d", spec.scenario, i%spec.keys)
		}
		tasks[i].flowKey = spec.flowKey
		dues[i] = due.UnixNano()
	}
	runID := fmt.Sprintf("%s-%s-%d", spec.scenario, sys.Name(), runCounter.Add(1))
	rs, err := recv.begin(runID, sys.Secret(), dues)
	if err != nil {
		return nil, err
	}
	res := &lateResult{
		System: sys.Name(), Scenario: spec.scenario, Label: spec.label, Tasks: spec.tasks,
		SpreadS: spec.spread.Seconds(), LeadS: lead.Seconds(), rs: rs,
	}
	if spec.spread > 0 {
		res.IntendedRate = math.Round(float64(spec.tasks) / spec.spread.Seconds())
	}
	var sampler *rssSampler
	if spec.rssPID > 0 {
		if cur, _, err := rss(spec.rssPID); err == nil {
			res.RSSBeforeBytes = cur
		}
		sampler = sampleRSS(spec.rssPID, 100*time.Millisecond)
	}
	logf("%s %s %s: storing %d tasks, the first due in %s", sys.Name(), spec.scenario, spec.label, spec.tasks, lead.Round(time.Millisecond))
	var lifeStart lifeSnap
	if spec.life && svc != nil {
		lifeStart = svc.snapLife(ctx, sys)
	}
	insertStart := time.Now()
	ids, err := sys.Schedule(ctx, runID, recv.url, tasks)
	if err != nil {
		if sampler != nil {
			sampler.finish()
		}
		return nil, err
	}
	res.InsertS = time.Since(insertStart).Seconds()
	var lifeStored lifeSnap
	if spec.life && svc != nil {
		lifeStored = svc.snapLife(ctx, sys)
	}
	res.InsertRate = math.Round(float64(spec.tasks) / res.InsertS)
	// Storing many tasks can be slower than the calibration said: the next
	// run plans with the slowest rate seen.
	insertRatesMu.Lock()
	if res.InsertRate < insertRates[sys] {
		insertRates[sys] = res.InsertRate
	}
	insertRatesMu.Unlock()
	if time.Now().After(first) {
		res.InsertOverran = true
		res.Notes = append(res.Notes, "storing the tasks took longer than the lead: some were stored after their due time")
		logf("warning: storing took %.1fs, past the first due time", res.InsertS)
	}
	_ = ids
	var cpuStart cpuSnap
	cpuWall := time.Now()
	if svc != nil {
		cpuStart = svc.snapCPU(ctx, sys)
	}
	if spec.during != nil {
		go spec.during(first)
	}
	lastDue := time.Unix(0, dues[len(dues)-1])
	deadline := lastDue.Add(spec.drain)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-rs.done:
	case <-timer.C:
		logf("%s %s %s: deadline reached with tasks missing", sys.Name(), spec.scenario, spec.label)
	case <-ctx.Done():
		if sampler != nil {
			sampler.finish()
		}
		return nil, ctx.Err()
	}
	if sampler != nil {
		res.RSSMaxBytes = sampler.finish()
	}
	if svc != nil {
		cpuEnd := svc.snapCPU(ctx, sys)
		rs.mu.Lock()
		got := rs.received
		rs.mu.Unlock()
		u := cpuBetween(cpuStart, cpuEnd, time.Since(cpuWall).Seconds(), got)
		res.CPU = &u
	}
	res.Missing = rs.finish(time.Now())
	if spec.life && svc != nil {
		res.Life = waitRecorded(ctx, svc, sys, res, lifeStart, lifeStored)
	}
	res.NodeMetrics = nodeMetrics(sys)

	rs.mu.Lock()
	res.Delivered = rs.received
	res.Duplicates = rs.duplicates
	res.BadSignatures = rs.badSig
	res.Early = rs.early.TotalCount()
	if res.Early > 0 {
		res.EarlyP99Ms = float64(rs.early.ValueAtQuantile(99)) / 1000
		res.EarlyMaxMs = float64(rs.early.Max()) / 1000
	}
	res.hist = rs.hist
	res.Lateness = summarize(rs.hist)
	if res.Delivered > 1 {
		res.WindowS = rs.last.Sub(rs.first).Seconds()
		res.AchievedRate = math.Round(float64(res.Delivered) / max(res.WindowS, 0.001))
	}
	rs.mu.Unlock()
	res.PerSecond = rs.perSecond()
	if full := res.PerSecond; len(full) > 1 {
		full = slices.Clone(full[:len(full)-1])
		sort.Ints(full)
		res.SustainedMin = float64(full[0])
		res.SustainedMedian = float64(full[len(full)/2])
	}
	if res.Missing > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d tasks had not arrived by the deadline; counted as late as the deadline", res.Missing))
	}
	cpuNote := ""
	if res.CPU != nil {
		cpuNote = fmt.Sprintf("; CPU s harness %.1f, hookwheel %.1f, postgres %.1f, redis %.1f (%.3f ms per delivery)",
			res.CPU.HarnessS, res.CPU.NodeS, res.CPU.PostgresS, res.CPU.RedisS, res.CPU.PerDeliveryMs)
	}
	if l := res.Life; l != nil {
		cpuNote += fmt.Sprintf("; whole life per task: Postgres CPU %.3f ms, WAL %.0f B, node CPU %.3f ms (%d recorded done in %.1f s)",
			l.PostgresCPUPerTaskMs, l.WALBytesPerTask, l.NodeCPUPerTaskMs, l.Completed, l.WallS)
		if st := l.Storing; st != nil {
			cpuNote += fmt.Sprintf(", of which storing Postgres CPU %.3f ms, WAL %.0f B", st.PostgresCPUPerTaskMs, st.WALBytesPerTask)
		}
	}
	logf("%s %s %s: %d/%d delivered, lateness p50 %.2f ms p99 %.2f ms p99.9 %.2f ms max %.2f ms, %d early, %.0f/s%s",
		sys.Name(), spec.scenario, spec.label, res.Delivered, res.Tasks, res.Lateness.P50Ms, res.Lateness.P99Ms,
		res.Lateness.P999Ms, res.Lateness.MaxMs, res.Early, res.AchievedRate, cpuNote)
	return res, nil
}
