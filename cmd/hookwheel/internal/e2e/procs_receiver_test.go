package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hit is one webhook request as the counting receiver saw it.
type hit struct {
	id          string // webhook-id
	idemKey     string // Idempotency-Key
	attempt     int    // Hookwheel-Attempt
	scheduledAt time.Time
	arrived     time.Time
	bad         string // what was wrong with the headers, if anything
}

func (h hit) lateness() time.Duration { return h.arrived.Sub(h.scheduledAt) }

// countingReceiver is a real HTTP server that answers 200 to every webhook
// and records who it was, counting deliveries per webhook-id. Every request
// signals progress.
type countingReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	hits     []hit
	byID     map[string][]int // indexes into hits
	progress chan struct{}
}

func newCountingReceiver(t testing.TB) *countingReceiver {
	r := &countingReceiver{byID: map[string][]int{}, progress: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := hit{arrived: time.Now(), id: req.Header.Get("webhook-id"), idemKey: req.Header.Get("Idempotency-Key")}
		_, _ = io.Copy(io.Discard, req.Body)
		var bad []string
		var err error
		if h.attempt, err = strconv.Atoi(req.Header.Get("Hookwheel-Attempt")); err != nil || h.attempt < 1 {
			bad = append(bad, fmt.Sprintf("Hookwheel-Attempt %q", req.Header.Get("Hookwheel-Attempt")))
		}
		if h.scheduledAt, err = time.Parse(time.RFC3339Nano, req.Header.Get("Hookwheel-Scheduled-At")); err != nil {
			bad = append(bad, fmt.Sprintf("Hookwheel-Scheduled-At %q", req.Header.Get("Hookwheel-Scheduled-At")))
		}
		if h.id == "" {
			bad = append(bad, "no webhook-id")
		}
		h.bad = strings.Join(bad, ", ")
		r.mu.Lock()
		r.byID[h.id] = append(r.byID[h.id], len(r.hits))
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		select {
		case r.progress <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

// counts returns the number of distinct webhook-ids and of deliveries.
func (r *countingReceiver) counts() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID), len(r.hits)
}

func (r *countingReceiver) snapshot() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hits)
}

// waitDistinct waits until n distinct webhook-ids have arrived, or the
// deadline passes.
func (r *countingReceiver) waitDistinct(n int, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if d, _ := r.counts(); d >= n {
			return nil
		}
		select {
		case <-r.progress:
		case <-timer.C:
			d, total := r.counts()
			return fmt.Errorf("%d of %d tasks arrived (%d deliveries) by the deadline", d, n, total)
		}
	}
}

// settle watches the receiver for a while, so that a late duplicate has its
// chance to arrive, and returns how many deliveries came in meanwhile.
func (r *countingReceiver) settle(d time.Duration) int {
	_, before := r.counts()
	<-time.After(d)
	_, after := r.counts()
	return after - before
}

// checkHits checks every delivery against the planned tasks: a known
// webhook-id, the task's Idempotency-Key, its run_at as
// Hookwheel-Scheduled-At, not before it. It returns the first delivery of
// each task by id and the ids delivered more than once.
func checkHits(t testing.TB, tasks []plannedTask, hits []hit) (first map[string]hit, duplicated []string) {
	t.Helper()
	byID := make(map[string]*plannedTask, len(tasks))
	for i := range tasks {
		byID[tasks[i].id] = &tasks[i]
	}
	first = make(map[string]hit, len(tasks))
	count := map[string]int{}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for _, h := range hits {
		task, ok := byID[h.id]
		switch {
		case h.bad != "":
			problem("delivery of %s: bad headers: %s", h.id, h.bad)
			continue
		case !ok:
			problem("delivery with unknown webhook-id %q", h.id)
			continue
		}
		if h.idemKey != task.expectedKey {
			problem("task %s: Idempotency-Key %q, want %q (attempt %d)", h.id, h.idemKey, task.expectedKey, h.attempt)
		}
		if !h.scheduledAt.Equal(task.runAt) {
			problem("task %s: Hookwheel-Scheduled-At %s, want its run_at %s", h.id, h.scheduledAt.Format(time.RFC3339Nano), task.runAt.Format(time.RFC3339Nano))
		}
		if h.arrived.Before(task.runAt) {
			problem("task %s arrived %s before its run_at", h.id, task.runAt.Sub(h.arrived))
		}
		count[h.id]++
		if f, seen := first[h.id]; !seen || h.arrived.Before(f.arrived) {
			first[h.id] = h
		}
	}
	for _, task := range tasks {
		if count[task.id] == 0 {
			problem("task %s (run_at %s) never arrived", task.id, task.runAt.Format(time.RFC3339Nano))
		}
		if count[task.id] > 1 {
			duplicated = append(duplicated, task.id)
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d+ problems with the deliveries:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return first, duplicated
}

// latencies summarises lateness (arrival minus Hookwheel-Scheduled-At).
type latencies []time.Duration

func (l latencies) sorted() latencies {
	s := slices.Clone(l)
	slices.Sort(s)
	return s
}

// quantile of a sorted list; 0 when empty.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q*float64(len(l))+0.5) - 1
	return l[max(0, min(len(l)-1, i))]
}

func (l latencies) String() string {
	s := l.sorted()
	if len(s) == 0 {
		return "none"
	}
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return fmt.Sprintf("n=%d p50=%s p99=%s p99.9=%s max=%s", len(s), ms(s.quantile(0.5)), ms(s.quantile(0.99)), ms(s.quantile(0.999)), ms(s[len(s)-1]))
}
