package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/hookwheel/hookwheel/openapi"
)

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
