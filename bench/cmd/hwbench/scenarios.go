package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/openapi"
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
	insertStart := time.Now()
	ids, err := sys.Schedule(ctx, runID, recv.url, tasks)
	if err != nil {
		if sampler != nil {
			sampler.finish()
		}
		return nil, err
	}
	res.InsertS = time.Since(insertStart).Seconds()
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
	logf("%s %s %s: %d/%d delivered, lateness p50 %.2f ms p99 %.2f ms p99.9 %.2f ms max %.2f ms, %d early, %.0f/s%s",
		sys.Name(), spec.scenario, spec.label, res.Delivered, res.Tasks, res.Lateness.P50Ms, res.Lateness.P99Ms,
		res.Lateness.P999Ms, res.Lateness.MaxMs, res.Early, res.AchievedRate, cpuNote)
	return res, nil
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

// throughput: n tasks all due at one instant; deliveries per second.
func throughput(ctx context.Context, sys system, recv *receiver, n int) (*lateResult, error) {
	var (
		before   int64
		walStart string
	)
	h, isHW := sys.(*hookwheelSystem)
	if isHW {
		before, _ = h.attemptsRecorded(ctx)
		walStart, _ = h.walPosition(ctx)
	}
	res, err := runLateness(ctx, sys, recv, lateSpec{scenario: "throughput", label: fmt.Sprintf("%d due at once", n), tasks: n})
	if err != nil {
		return nil, err
	}
	if isHW {
		// Attempts recorded: every delivery must also be written to Postgres.
		want := before + int64(res.Delivered)
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := h.attemptsRecorded(ctx)
			if err == nil && got >= want {
				res.AttemptsRecorded = got - before
				res.rs.mu.Lock()
				res.AttemptsRecordedLagMs = math.Max(0, float64(time.Since(res.rs.last).Microseconds())/1000)
				res.rs.mu.Unlock()
				if walStart != "" {
					if bytes, err := h.walSince(ctx, walStart); err == nil {
						res.WALBytesPerTask = math.Round(float64(bytes) / float64(n))
					}
				}
				break
			}
			if time.Now().After(deadline) {
				res.AttemptsRecorded = got - before
				res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d attempts recorded 30 s after the last delivery", got-before, res.Delivered))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return res, nil
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

// flowResult is the flow scenario's: every task under one flow key limited
// to Rate sends per second, all due at one instant, and how closely the
// arrivals at the receiver kept to the limit.
type flowResult struct {
	Key        string  `json:"flow_key"`
	Rate       int     `json:"rate_per_s"`
	IntervalMs float64 `json:"interval_ms"` // the spacing the limit asks for: 1 s / Rate
	Tasks      int     `json:"tasks"`

	// Delivered counts distinct tasks that arrived, Duplicates the repeats
	// of one already arrived, Missing those not arrived by the deadline.
	Delivered  int `json:"delivered"`
	Duplicates int `json:"duplicates"`
	Missing    int `json:"missing"`

	// FirstAfterDueMs is the first arrival after the instant every task fell due.
	FirstAfterDueMs float64 `json:"first_arrival_after_due_ms"`
	// MeanRate is (arrivals - 1) / (last - first arrival): the rate the key
	// was held to on average; MeanRateRatio is it over Rate.
	MeanRate      float64 `json:"mean_rate_per_s"`
	MeanRateRatio float64 `json:"mean_rate_ratio"`

	// MostInSecond is the most arrivals in any 1-second window [t, t+1s),
	// MostInSecondAtS where that window starts (seconds after the first
	// arrival). Sends spaced exactly put Rate in every window; an arrival
	// held up on its way from the slot before can slip in, so the limit
	// holds while this is at most Rate+1 (WithinOneSlot).
	MostInSecond    int     `json:"most_in_1s_window"`
	MostInSecondAtS float64 `json:"most_in_1s_window_at_s"`
	WithinOneSlot   bool    `json:"most_in_1s_window_at_most_rate_plus_1"`
	// FewestInSecond is the fewest arrivals in any 1-second window lying
	// wholly between the first and the last arrival (-1: the run was
	// shorter than a second): a stall or a slow stretch shows here.
	FewestInSecond    int     `json:"fewest_in_full_1s_window"`
	FewestInSecondAtS float64 `json:"fewest_in_full_1s_window_at_s"`

	// Gaps between consecutive arrivals, against IntervalMs.
	Gaps spreadSummary `json:"gaps_ms"`
	// Sends, SendsMostInSecond and SendGaps are the same over the instants
	// hookwheel began each send (attempts.started_at, every attempt): what
	// the limiter decided, without the delivery's own delays (though with
	// any on the node between a slot and the start of its send).
	Sends                int           `json:"sends_recorded"`
	SendsMostInSecond    int           `json:"sends_most_in_1s_window"`
	SendsMostInSecondAtS float64       `json:"sends_most_in_1s_window_at_s"`
	SendGaps             spreadSummary `json:"send_gaps_ms"`
	// SlotLateness is each arrival (the i-th in time) minus its ideal slot,
	// the first arrival + i x IntervalMs: drift from the asked rate adds up
	// here. Negative when it came before its slot (ahead of the rate).
	SlotLateness spreadSummary `json:"lateness_vs_slot_ms"`

	// FlowRateDeferrals is hookwheel_deferrals_total{reason="flow_rate"}:
	// claims given back to wait for their slot.
	FlowRateDeferrals float64 `json:"flow_rate_deferrals"`

	Run *lateResult `json:"run"`
}

// spreadSummary is exact percentiles of a few thousand values, in
// milliseconds; unlike the HDR histograms it keeps negative values.
type spreadSummary struct {
	MinMs float64 `json:"min_ms"`
	P1Ms  float64 `json:"p1_ms"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// spreadOf summarizes nanosecond values (sorted in place).
func spreadOf(ns []int64) spreadSummary {
	if len(ns) == 0 {
		return spreadSummary{}
	}
	slices.Sort(ns)
	ms := func(v int64) float64 { return math.Round(float64(v)/1000) / 1000 }
	// Nearest rank: the smallest value with at least q of them at or below it.
	at := func(q float64) float64 { return ms(ns[max(0, int(math.Ceil(q*float64(len(ns))))-1)]) }
	return spreadSummary{MinMs: ms(ns[0]), P1Ms: at(0.01), P50Ms: at(0.5), P99Ms: at(0.99), MaxMs: ms(ns[len(ns)-1])}
}

// perSecondExtremes counts sorted instants (Unix ns) in 1-second windows:
// the most in any window [t, t+1s) and the fewest in any lying wholly
// between the first instant and the last (-1 when they are under a second
// apart), each with where its window starts, in seconds after the first.
func perSecondExtremes(sorted []int64) (most int, mostAtS float64, fewest int, fewestAtS float64) {
	const window = int64(time.Second)
	first, last := sorted[0], sorted[len(sorted)-1]
	atS := func(v int64) float64 { return math.Round(float64(v-first)/1e6) / 1000 }
	// A window holds the most when it starts at an instant, so only those
	// starts need counting.
	for i, end := 0, 0; i < len(sorted); i++ {
		for end < len(sorted) && sorted[end] < sorted[i]+window {
			end++
		}
		if end-i > most {
			most, mostAtS = end-i, atS(sorted[i])
		}
	}
	// It holds the fewest just after an instant has left it: count those in
	// (v, v+1s] for each instant v whose window still ends by the last.
	fewest = -1
	for i, from, end := 0, 0, 0; i < len(sorted) && sorted[i]+window <= last; i++ {
		for from < len(sorted) && sorted[from] <= sorted[i] {
			from++
		}
		for end < len(sorted) && sorted[end] <= sorted[i]+window {
			end++
		}
		if c := end - from; fewest < 0 || c < fewest {
			fewest, fewestAtS = c, atS(sorted[i])
		}
	}
	return most, mostAtS, fewest, fewestAtS
}

// flowKeyName is the flow key of the flow scenario's tasks.
const flowKeyName = "hwbench-flow"

// flow limits one flow key to rate sends per second, stores rate x seconds
// tasks of that key all due at one instant, and measures from the arrivals
// how closely hookwheel held them to the rate.
func flow(ctx context.Context, h *hookwheelSystem, recv *receiver, rate, seconds int) (*flowResult, error) {
	if rate <= 0 || seconds <= 0 {
		return nil, fmt.Errorf("flow: -flow-rate and -flow-seconds must be positive, got %d and %d", rate, seconds)
	}
	// Set before any task is stored: a limit applies to the tasks claimed
	// after it, and these are claimed as they fall due.
	if err := h.putFlowLimit(ctx, flowKeyName, rate, time.Second); err != nil {
		return nil, err
	}
	n := rate * seconds
	run, err := runLateness(ctx, h, recv, lateSpec{scenario: "flow",
		label: fmt.Sprintf("%d due at once, flow key limited to %d/s", n, rate), tasks: n, flowKey: flowKeyName,
		// Sending them takes `seconds` by design: the drain starts after that.
		drain: time.Duration(seconds)*time.Second + 30*time.Second})
	if err != nil {
		return nil, err
	}
	interval := int64(time.Second) / int64(rate)
	res := &flowResult{Key: flowKeyName, Rate: rate, IntervalMs: float64(interval) / 1e6, Tasks: n,
		Delivered: run.Delivered, Duplicates: run.Duplicates, Missing: run.Missing, FewestInSecond: -1,
		FlowRateDeferrals: run.NodeMetrics[`hookwheel_deferrals_total{reason="flow_rate"}`], Run: run}

	run.rs.mu.Lock()
	arrivals := make([]int64, 0, len(run.rs.arrivals))
	for _, a := range run.rs.arrivals {
		if a != 0 {
			arrivals = append(arrivals, a)
		}
	}
	due := run.rs.dues[0]
	run.rs.mu.Unlock()
	if len(arrivals) < 2 {
		return res, fmt.Errorf("flow: %d of %d tasks arrived, too few to measure a rate", len(arrivals), n)
	}
	slices.Sort(arrivals)
	first, last := arrivals[0], arrivals[len(arrivals)-1]
	res.FirstAfterDueMs = float64(first-due) / 1e6
	res.MeanRate = math.Round(float64(len(arrivals)-1)/(float64(last-first)/1e9)*100) / 100
	res.MeanRateRatio = math.Round(res.MeanRate/float64(rate)*1000) / 1000

	res.MostInSecond, res.MostInSecondAtS, res.FewestInSecond, res.FewestInSecondAtS = perSecondExtremes(arrivals)
	res.WithinOneSlot = res.MostInSecond <= rate+1
	gaps := make([]int64, len(arrivals)-1)
	slot := make([]int64, len(arrivals))
	for i, a := range arrivals {
		if i > 0 {
			gaps[i-1] = a - arrivals[i-1]
		}
		slot[i] = a - (first + int64(i)*int64(time.Second)/int64(rate))
	}
	res.Gaps = spreadOf(gaps)
	res.SlotLateness = spreadOf(slot)

	// The same count over the instants hookwheel began each send: arrivals
	// carry the delivery's own delays (the receiver shares the cores), the
	// sends only the limiter's decisions.
	sends, err := h.sendStarts(ctx, res.Delivered+res.Duplicates)
	if err != nil {
		run.Notes = append(run.Notes, "the sends' start times could not be read: "+err.Error())
	} else if len(sends) > 1 {
		res.Sends = len(sends)
		res.SendsMostInSecond, res.SendsMostInSecondAtS, _, _ = perSecondExtremes(sends)
		sendGaps := make([]int64, len(sends)-1)
		for i := 1; i < len(sends); i++ {
			sendGaps[i-1] = sends[i] - sends[i-1]
		}
		res.SendGaps = spreadOf(sendGaps)
	}
	logf("flow: %d/%d delivered once, %d missing, %d repeats; mean %.2f/s for %d/s asked (ratio %.3f); most in a 1 s window %d (limit holds at <= %d: %t; of the %d sends by their start: %d), fewest in a full one %d; gaps p50 %.3f ms p99 %.3f ms max %.3f ms (ideal %.3f ms); lateness vs slot p50 %.3f ms p99 %.3f ms max %.3f ms",
		res.Delivered, n, res.Missing, res.Duplicates, res.MeanRate, rate, res.MeanRateRatio, res.MostInSecond, rate+1, res.WithinOneSlot,
		res.Sends, res.SendsMostInSecond, res.FewestInSecond, res.Gaps.P50Ms, res.Gaps.P99Ms, res.Gaps.MaxMs, res.IntervalMs, res.SlotLateness.P50Ms, res.SlotLateness.P99Ms, res.SlotLateness.MaxMs)
	return res, nil
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
}

// ---- ingest ----

type ingestPhase struct {
	Mode         string         `json:"mode"` // single or batch
	Loop         string         `json:"loop"` // closed: N calls in flight, as fast as it answers; open: calls started at a fixed rate
	Concurrency  int            `json:"concurrency"`
	BatchSize    int            `json:"batch_size"`
	TargetRate   float64        `json:"target_requests_per_s,omitempty"`
	DurationS    float64        `json:"duration_s"`
	Requests     int64          `json:"requests"`
	Tasks        int64          `json:"tasks"`
	Errors       int64          `json:"errors"`
	RequestsPerS float64        `json:"requests_per_s"`
	TasksPerS    float64        `json:"tasks_per_s"`
	Latency      latencySummary `json:"latency"`
	Note         string         `json:"note,omitempty"`

	mu   sync.Mutex // guards the counts and hist while calls run
	hist *hdrhistogram.Histogram
}

// record counts one call that stored n tasks (or failed) and took lat.
func (ph *ingestPhase) record(n int, err error, lat time.Duration) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	ph.Requests++
	if err != nil {
		ph.Errors++
	} else {
		ph.Tasks += int64(n)
	}
	_ = ph.hist.RecordValue(max(1, lat.Microseconds()))
}

type ingestResult struct {
	Phases []*ingestPhase `json:"phases"`
	Notes  []string       `json:"notes,omitempty"`
}

// callFn makes one API call and says how many tasks it stored.
type callFn func(ctx context.Context, seq int) (int, error)

// closedLoop keeps conc calls in flight for dur. Latency is each call's own
// duration: with a closed loop that is all there is to measure.
func closedLoop(ctx context.Context, dur time.Duration, conc int, fn callFn) *ingestPhase {
	ph := &ingestPhase{Loop: "closed", Concurrency: conc, hist: newHist()}
	var (
		wg   sync.WaitGroup
		seq  atomic.Int64
		stop = time.Now().Add(dur)
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && ctx.Err() == nil {
				t0 := time.Now()
				n, err := fn(ctx, int(seq.Add(1)))
				ph.record(n, err, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	ph.DurationS = time.Since(start).Seconds()
	return ph
}

// openLoop starts calls at rate per second for dur, whatever the answers,
// and measures each from the instant it was meant to start: a slow answer
// delays the calls queued behind it and they are charged for it
// (no coordinated omission).
func openLoop(ctx context.Context, dur time.Duration, rate float64, workers int, fn callFn) *ingestPhase {
	ph := &ingestPhase{Loop: "open", Concurrency: workers, TargetRate: math.Round(rate), hist: newHist()}
	total := int(rate * dur.Seconds())
	tickets := make(chan time.Time, total+1)
	start := time.Now()
	go func() {
		defer close(tickets)
		interval := time.Duration(float64(time.Second) / rate)
		for i := range total {
			at := start.Add(time.Duration(i) * interval)
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			if ctx.Err() != nil {
				return
			}
			tickets <- at
		}
	}()
	var (
		wg  sync.WaitGroup
		seq atomic.Int64
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := range tickets {
				n, err := fn(ctx, int(seq.Add(1)))
				ph.record(n, err, time.Since(at))
			}
		}()
	}
	wg.Wait()
	ph.DurationS = time.Since(start).Seconds()
	return ph
}

func (ph *ingestPhase) finish() {
	ph.RequestsPerS = math.Round(float64(ph.Requests) / ph.DurationS)
	ph.TasksPerS = math.Round(float64(ph.Tasks) / ph.DurationS)
	ph.Latency = summarize(ph.hist)
	logf("ingest %s %s-loop (conc %d, batch %d): %.0f requests/s, %.0f tasks/s, latency p50 %.2f ms p99 %.2f ms p99.9 %.2f ms, %d errors",
		ph.Mode, ph.Loop, ph.Concurrency, ph.BatchSize, ph.RequestsPerS, ph.TasksPerS, ph.Latency.P50Ms, ph.Latency.P99Ms, ph.Latency.P999Ms, ph.Errors)
}

func ingest(ctx context.Context, h *hookwheelSystem, recv *receiver, dur time.Duration, batchSize int) (*ingestResult, error) {
	c, err := h.apiClient()
	if err != nil {
		return nil, err
	}
	far := time.Now().Add(24 * time.Hour)
	single := func(ctx context.Context, seq int) (int, error) {
		resp, err := c.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{},
			openapi.TaskRequest{URL: recv.url, Body: makeBody("ingest", seq, far), RunAt: &far, Headers: jsonHeaders})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode() != 201 {
			return 0, fmt.Errorf("%s", resp.Status())
		}
		return 1, nil
	}
	batch := func(ctx context.Context, seq int) (int, error) {
		items := make([]openapi.BatchTaskRequest, batchSize)
		for i := range items {
			items[i] = openapi.BatchTaskRequest{URL: recv.url, Body: makeBody("ingest", seq*batchSize+i, far), RunAt: &far, Headers: jsonHeaders}
		}
		resp, err := c.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: items})
		if err != nil {
			return 0, err
		}
		if resp.JSON200 == nil {
			return 0, fmt.Errorf("%s", resp.Status())
		}
		n := 0
		for _, r := range resp.JSON200.Data {
			if r.Task != nil {
				n++
			}
		}
		return n, nil
	}
	res := &ingestResult{}

	ph := closedLoop(ctx, dur, 32, single)
	ph.Mode, ph.BatchSize = "single", 1
	ph.finish()
	res.Phases = append(res.Phases, ph)
	pause(ctx)
	ph = openLoop(ctx, dur, max(1, ph.RequestsPerS/2), 64, single)
	ph.Mode, ph.BatchSize, ph.Note = "single", 1, "half the closed-loop rate"
	ph.finish()
	res.Phases = append(res.Phases, ph)
	pause(ctx)

	// Is the batch route there?
	if _, err := batch(ctx, 0); err != nil {
		res.Notes = append(res.Notes, "POST /v1/tasks/batch: "+err.Error()+"; batch ingest not measured")
		logf("ingest: batch route answered %v; skipping batch ingest", err)
		return res, nil
	}
	ph = closedLoop(ctx, dur, 4, batch)
	ph.Mode, ph.BatchSize = "batch", batchSize
	ph.finish()
	res.Phases = append(res.Phases, ph)
	pause(ctx)
	ph = openLoop(ctx, dur, max(0.5, ph.RequestsPerS/2), 16, batch)
	ph.Mode, ph.BatchSize, ph.Note = "batch", batchSize, "half the closed-loop rate"
	ph.finish()
	res.Phases = append(res.Phases, ph)
	return res, nil
}

// ---- backlog ----

type backlogResult struct {
	Rate      int           `json:"rate_per_s"`
	DurationS float64       `json:"duration_s"`
	Seeding   []seedStep    `json:"seeding"`
	Runs      []*lateResult `json:"runs"`
}

type seedStep struct {
	Rows     int64   `json:"rows"`
	Seconds  float64 `json:"seconds"`
	RowsPerS float64 `json:"rows_per_s"`
}

// backlog runs tasks falling due at rate for dur with 0 and then each size
// of backlog pending a month ahead, and reports lateness and the node's RSS.
func backlog(ctx context.Context, svc *services, hwOpts hookwheelOptions, recv *receiver, sizes []int64, rate int, dur time.Duration) (*backlogResult, error) {
	h, err := startHookwheel(ctx, svc, hwOpts, "backlog")
	if err != nil {
		return nil, err
	}
	defer h.Close()
	res := &backlogResult{Rate: rate, DurationS: dur.Seconds()}
	pid := h.nodes[0].pid()
	run := func(rows int64) error {
		r, err := runLateness(ctx, h, recv, lateSpec{
			scenario: "backlog", label: fmt.Sprintf("backlog=%d", rows),
			tasks: int(float64(rate) * dur.Seconds()), spread: dur, rssPID: pid,
		})
		if err != nil {
			return err
		}
		r.BacklogRows = rows
		r.WheelTimers = scrapeMetric(h.nodes[0].base, "hookwheel_wheel_timers")
		res.Runs = append(res.Runs, r)
		return nil
	}
	if err := run(0); err != nil {
		return res, err
	}
	// A template task a month ahead, made through the API; the backlog is
	// copies of its row (new ids, spread over the following month).
	far := time.Now().Add(30 * 24 * time.Hour)
	ids, err := h.Schedule(ctx, "template", recv.url, []task{{seq: 0, due: far}})
	if err != nil {
		return res, err
	}
	var have int64
	for _, size := range sizes {
		if size > have {
			t0 := time.Now()
			if err := seedBacklog(ctx, h, ids[0], have, size); err != nil {
				return res, err
			}
			secs := time.Since(t0).Seconds()
			res.Seeding = append(res.Seeding, seedStep{Rows: size - have, Seconds: secs, RowsPerS: math.Round(float64(size-have) / secs)})
			have = size
		}
		pause(ctx)
		if err := run(have); err != nil {
			return res, err
		}
	}
	return res, nil
}

// seedBacklog inserts rows (from, to] as copies of the template task, due a
// month or more ahead, straight into Postgres (the API would take hours for
// ten million), then refreshes planner statistics.
func seedBacklog(ctx context.Context, h *hookwheelSystem, template uuid.UUID, from, to int64) error {
	rows, err := h.pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'tasks' AND is_generated = 'NEVER' ORDER BY ordinal_position`)
	if err != nil {
		return err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var names, exprs []string
	for _, c := range cols {
		expr := "t." + pgx.Identifier{c}.Sanitize()
		switch c {
		case "id":
			expr = "gen_random_uuid()"
		case "run_at", "next_attempt_at":
			expr = "now() + interval '30 days' + (g % 2592000) * interval '1 second'"
		case "created_at", "updated_at":
			expr = "now()"
		case "idempotency_key", "request_hash":
			expr = "NULL"
		case "status":
			expr = "'scheduled'"
		}
		names = append(names, pgx.Identifier{c}.Sanitize())
		exprs = append(exprs, expr)
	}
	q := fmt.Sprintf(`INSERT INTO tasks (%s) SELECT %s FROM tasks t CROSS JOIN generate_series($2::bigint, $3::bigint) AS g WHERE t.id = $1`,
		strings.Join(names, ", "), strings.Join(exprs, ", "))
	const chunk = 250_000
	start := time.Now()
	for lo := from + 1; lo <= to; lo += chunk {
		hi := min(lo+chunk-1, to)
		if _, err := h.pool.Exec(ctx, q, template, lo, hi); err != nil {
			return fmt.Errorf("seed backlog: %w", err)
		}
		done := hi - from
		logf("backlog: %d/%d rows inserted (%.0f rows/s)", done, to-from, float64(done)/time.Since(start).Seconds())
	}
	if _, err := h.pool.Exec(ctx, "ANALYZE tasks"); err != nil {
		return err
	}
	// Write the seeded pages out now rather than in a checkpoint during the run.
	_, _ = h.pool.Exec(ctx, "CHECKPOINT")
	return nil
}

// ---- failover ----

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

// idKeeper is a hookwheelSystem that keeps the ids of what it schedules.
type idKeeper struct {
	*hookwheelSystem
	ids *[]uuid.UUID
}

func (k *idKeeper) Schedule(ctx context.Context, run, url string, tasks []task) ([]uuid.UUID, error) {
	ids, err := k.hookwheelSystem.Schedule(ctx, run, url, tasks)
	if run != "calibrate" {
		*k.ids = ids
	}
	return ids, err
}
