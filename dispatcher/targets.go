package dispatcher

import (
	"errors"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/sony/gobreaker/v2"
)

// A target is where webhooks go: a URL's scheme, host and port. Each target
// has its own circuit breaker and its own share of the senders, so that a
// dead or slow receiver neither gets hammered nor holds up anyone else's
// webhooks.

// BreakerConfig tunes the per-target circuit breakers. Zero fields take the
// defaults.
type BreakerConfig struct {
	// ConsecutiveFailures trips the breaker. Default 5.
	ConsecutiveFailures uint32
	// FailureRatio over Window trips it too, once MinRequests were made in
	// the window. Defaults 0.5, 60s and 20.
	FailureRatio float64
	Window       time.Duration
	MinRequests  uint32
	// Cooldown is how long a tripped breaker stays open before it lets one
	// probe through (half-open). Default 30s.
	Cooldown time.Duration
	// ReleasePace spaces out the tasks deferred while a breaker was open, so
	// that they do not all come back at the instant it closes: the k-th
	// deferral is due at the probe time plus k × ReleasePace. Default 20ms
	// (50 a second).
	ReleasePace time.Duration
}

func (c *BreakerConfig) setDefaults() {
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = 5
	}
	if c.FailureRatio <= 0 {
		c.FailureRatio = 0.5
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.MinRequests == 0 {
		c.MinRequests = 20
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 30 * time.Second
	}
	if c.ReleasePace <= 0 {
		c.ReleasePace = 20 * time.Millisecond
	}
}

// errTargetFailed tells a breaker that an attempt failed in a way that says
// the target is unwell (network error, timeout, 408/425/429/5xx).
var errTargetFailed = errors.New("target failed")

// targetKey is the scheme, host and port of a URL: "https://example.com:443".
func targetKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port
}

type target struct {
	key     string
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	// Guarded by targets.mu.
	inflight int
	parked   []*model.ClaimedTask
	// sendTime is a moving average of how long a send to the target takes,
	// to tell a task that finds no room when a slot is likely free.
	sendTime time.Duration
	openedAt time.Time
	deferred int
}

// targets holds the state of every target this node has sent to.
type targets struct {
	cfg         BreakerConfig
	maxInflight int
	maxWaiting  int
	onChange    func(key string, from, to gobreaker.State)

	mu    sync.Mutex
	byKey map[string]*target
}

func newTargets(cfg BreakerConfig, maxInflight, maxWaiting int, onChange func(key string, from, to gobreaker.State)) *targets {
	cfg.setDefaults()
	return &targets{cfg: cfg, maxInflight: maxInflight, maxWaiting: maxWaiting, onChange: onChange, byKey: map[string]*target{}}
}

func (ts *targets) get(key string) *target {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byKey[key]
	if ok {
		return t
	}
	t = &target{key: key}
	cfg := ts.cfg
	t.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         key,
		MaxRequests:  1,
		Interval:     cfg.Window,
		BucketPeriod: cfg.Window / 10,
		Timeout:      cfg.Cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= cfg.ConsecutiveFailures ||
				(c.Requests >= cfg.MinRequests && float64(c.TotalFailures) >= cfg.FailureRatio*float64(c.Requests))
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			// Called under the breaker's own lock, never under ts.mu.
			ts.mu.Lock()
			if to == gobreaker.StateOpen {
				t.openedAt = time.Now()
				t.deferred = 0
			}
			ts.mu.Unlock()
			if ts.onChange != nil {
				ts.onChange(name, from, to)
			}
		},
	})
	ts.byKey[key] = t
	return t
}

// parkAnyway is the wait for a send slot below which a task parks even
// beyond the target's share of waiting room.
const parkAnyway = time.Second

type admission int

const (
	sendNow admission = iota // a send slot is the caller's
	parked                   // c waits for a slot; whoever frees one sends it
	full                     // no room to wait either: give c back until wait
)

// admit takes a send slot of the target for c, or parks c until a send to
// the same target finishes, or, when too many already wait, says how long
// until a slot is likely free.
func (ts *targets) admit(t *target, c *model.ClaimedTask) (admission, time.Duration) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch {
	case t.inflight < ts.maxInflight:
		t.inflight++
		return sendNow, 0
	case len(t.parked) < ts.maxWaiting:
		t.parked = append(t.parked, c)
		return parked, 0
	}
	ahead := float64(len(t.parked)+1) / float64(ts.maxInflight)
	wait := time.Duration(ahead * float64(max(t.sendTime, time.Millisecond)))
	if wait < parkAnyway {
		// A fast target that is merely busy drains its queue within
		// moments: giving tasks back would cost two writes each and slow
		// everyone down. Only a slow target's surplus goes back.
		t.parked = append(t.parked, c)
		return parked, 0
	}
	return full, min(wait, 30*time.Second)
}

// done records a send that took took, and gives its slot back or hands it
// straight to the oldest task parked for the target, which the caller then
// sends.
func (ts *targets) done(t *target, took time.Duration) (next *model.ClaimedTask) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if took > 0 {
		if t.sendTime == 0 {
			t.sendTime = took
		} else {
			t.sendTime += (took - t.sendTime) / 8
		}
	}
	if len(t.parked) > 0 {
		next = t.parked[0]
		t.parked[0] = nil
		t.parked = t.parked[1:]
		return next
	}
	t.inflight--
	return nil
}

// sendTimeOf is the moving average of how long a send to the target with
// this key takes; 0 before the first. The dispatch limits use it to tell a
// task that finds no room to wait for a concurrency slot when one is likely
// free.
func (ts *targets) sendTimeOf(key string) time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.byKey[key]; ok {
		return t.sendTime
	}
	return 0
}

// deferUntil is when a task refused by t's breaker should be tried again:
// the breaker's next probe, spaced by ReleasePace from the other deferrals.
func (ts *targets) deferUntil(t *target, now time.Time) time.Time {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	probe := t.openedAt.Add(ts.cfg.Cooldown)
	if probe.Before(now) {
		// Half-open, a probe in flight: its answer comes within a timeout.
		probe = now.Add(time.Second)
	}
	at := probe.Add(time.Duration(t.deferred) * ts.cfg.ReleasePace)
	t.deferred++
	return at
}

// BreakerStatus is one target's breaker as this node sees it.
type BreakerStatus struct {
	Target   string
	State    string
	Counts   gobreaker.Counts
	OpenedAt time.Time
	// NextProbeAt is set while the breaker is open.
	NextProbeAt time.Time
	InFlight    int
	Parked      int
}

func (ts *targets) statuses() []BreakerStatus {
	ts.mu.Lock()
	list := make([]*target, 0, len(ts.byKey))
	for _, t := range ts.byKey {
		list = append(list, t)
	}
	ts.mu.Unlock()
	out := make([]BreakerStatus, 0, len(list))
	for _, t := range list {
		state, counts := t.breaker.State(), t.breaker.Counts()
		ts.mu.Lock()
		s := BreakerStatus{Target: t.key, State: state.String(), Counts: counts, OpenedAt: t.openedAt,
			InFlight: t.inflight, Parked: len(t.parked)}
		ts.mu.Unlock()
		if state == gobreaker.StateOpen {
			s.NextProbeAt = t.openedAt.Add(ts.cfg.Cooldown)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}
