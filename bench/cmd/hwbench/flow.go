package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

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
