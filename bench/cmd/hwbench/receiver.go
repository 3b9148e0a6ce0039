package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Lateness is kept in microseconds, from 1 µs to 1 hour, at 3 significant
// digits.
func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
}

// payload is the body every system sends: the run it belongs to, the task's
// number in the run and the instant it was meant to arrive (the intended
// schedule: lateness is measured against it, never against when a sender
// started, so a stalled system cannot hide its stall).
type payload struct {
	Run   string `json:"run"`
	Seq   int    `json:"seq"`
	DueNs int64  `json:"due_ns"`
}

func makeBody(run string, seq int, due time.Time) string {
	return fmt.Sprintf(`{"run":%q,"seq":%d,"due_ns":%d}`, run, seq, due.UnixNano())
}

// receiver is the local HTTP endpoint every system delivers to. It checks the
// Standard Webhooks signature and records each task's lateness: arrival minus
// its intended due time.
type receiver struct {
	srv *http.Server
	url string
	cur atomic.Pointer[runState]
	// stray counts requests of no current run (late repeats of an earlier
	// run, far-future calibration tasks).
	stray atomic.Int64
}

// runState is what the receiver records for one run.
type runState struct {
	id    string
	start time.Time // the first due instant
	dues  []int64   // intended due time of each task, Unix ns
	wh    *standardwebhooks.Webhook

	mu         sync.Mutex
	hist       *hdrhistogram.Histogram // lateness, µs
	early      *hdrhistogram.Histogram // how early the early ones came, µs
	seen       []bool
	arrivals   []int64 // arrival of each task, Unix ns (first arrival)
	received   int
	duplicates int
	dupSeqs    []int // the task of each repeat, to tell which part of a run they came in
	badSig     int
	closed     bool
	afterClose int // arrivals after finish
	first      time.Time
	last       time.Time
	done       chan struct{}
}

func newReceiver() (*receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + l.Addr().String() + "/hook"}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

func (r *receiver) close() { _ = r.srv.Close() }

// begin starts recording a run of len(dues) tasks signed with secret.
func (r *receiver) begin(id, secret string, dues []int64) (*runState, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("signing secret: %w", err)
	}
	rs := &runState{
		id:       id,
		dues:     dues,
		wh:       wh,
		hist:     newHist(),
		early:    newHist(),
		seen:     make([]bool, len(dues)),
		arrivals: make([]int64, len(dues)),
		done:     make(chan struct{}),
	}
	if len(dues) > 0 {
		rs.start = time.Unix(0, dues[0])
	}
	r.cur.Store(rs)
	return rs, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	arrived := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rs := r.cur.Load()
	if rs == nil || p.Run != rs.id || p.Seq < 0 || p.Seq >= len(rs.dues) {
		r.stray.Add(1)
		w.WriteHeader(http.StatusOK)
		return
	}
	sigOK := rs.wh.Verify(body, req.Header) == nil
	late := arrived.Sub(time.Unix(0, rs.dues[p.Seq]))

	rs.mu.Lock()
	if !sigOK {
		rs.badSig++
	}
	if rs.closed {
		rs.afterClose++
		rs.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	if rs.seen[p.Seq] {
		rs.duplicates++
		rs.dupSeqs = append(rs.dupSeqs, p.Seq)
		rs.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	rs.seen[p.Seq] = true
	rs.arrivals[p.Seq] = arrived.UnixNano()
	if late < 0 {
		_ = rs.early.RecordValue(max(1, (-late).Microseconds()))
		late = 0
	}
	_ = rs.hist.RecordValue(max(1, late.Microseconds()))
	if rs.first.IsZero() || arrived.Before(rs.first) {
		rs.first = arrived
	}
	if arrived.After(rs.last) {
		rs.last = arrived
	}
	rs.received++
	if rs.received == len(rs.dues) {
		close(rs.done)
	}
	rs.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// finish closes the run at deadline: every task not yet arrived is recorded
// as late by (deadline - due), since it was at least that late — dropping it
// would flatter the system.
func (rs *runState) finish(deadline time.Time) (missing int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, seen := range rs.seen {
		if seen {
			continue
		}
		missing++
		late := deadline.Sub(time.Unix(0, rs.dues[i]))
		_ = rs.hist.RecordValue(max(1, late.Microseconds()))
	}
	rs.closed = true // later arrivals are counted apart
	return missing
}

// perSecond counts first arrivals in each whole second after the first one.
func (rs *runState) perSecond() []int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.first.IsZero() {
		return nil
	}
	first := rs.first.UnixNano()
	var out []int
	for _, a := range rs.arrivals {
		if a == 0 {
			continue
		}
		s := int((a - first) / int64(time.Second))
		for len(out) <= s {
			out = append(out, 0)
		}
		out[s]++
	}
	return out
}
