package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/retry"
)

// healthStore is what target health needs of Postgres.
type healthStore interface {
	RecordTargetHealth(ctx context.Context, r model.TargetHealthReport,
		event func(model.TargetEvent) (*model.Task, error)) ([]*model.TargetPause, error)
}

// targetHealthConfig configures newTargetHealth. Every field is required.
type targetHealthConfig struct {
	Store   healthStore
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// DisableAfter is how long a tenant's target must fail every attempt
	// to be paused (HOOKWHEEL_TARGET_DISABLE_AFTER).
	DisableAfter time.Duration
	// Interval is how often the node reports what it saw.
	Interval time.Duration
	// Paused is told that targets were paused, so that this node holds
	// them at once.
	Paused func()
}

// targetHealth follows, for hookwheel's own pauses, whether each tenant's
// targets fail every attempt. A target failing for DisableAfter, by every
// node's attempts, is paused (paused_by hookwheel) and the tenant's
// operations URL is told, by a signed task of its own (target.paused);
// after a resume, its first success is told too (target.recovered).
//
// The hot path pays one map update under a mutex per attempt recorded:
// the sender reports each attempt once the recorder has committed it, so
// only outcomes that stand count. Nothing is written per attempt. Every
// Interval the node writes what it saw since its last report, per tenant
// and target, in one transaction (store.RecordTargetHealth): the last
// success, and the run of failures after it (its first and last, the last
// error). Postgres merges the reports of every node into one row per
// failing target (target_health): the first failure since the last success
// any node saw. A success of a target no row says is failing writes
// nothing, so a healthy installation's reports are index probes; and the
// map holds only the targets attempted within one Interval.
type targetHealth struct {
	cfg targetHealthConfig

	mu   sync.Mutex
	seen map[targetID]*healthSeen
}

// healthSeen is what this node saw of one tenant's target since its last
// report: its last success, and the failures after it.
type healthSeen struct {
	success     time.Time
	first, last time.Time
	lastError   string
}

func newTargetHealth(cfg targetHealthConfig) *targetHealth {
	return &targetHealth{cfg: cfg, seen: map[targetID]*healthSeen{}}
}

// healthInterval is how often a node reports target health for
// disableAfter: a twentieth of it, between 100ms and 10s, so that a pause
// comes within a few percent of DisableAfter without a short one waiting
// for a long interval.
func healthInterval(disableAfter time.Duration) time.Duration {
	return min(max(disableAfter/20, 100*time.Millisecond), 10*time.Second)
}

// observe notes an attempt of tenant to the target key, finished at at,
// recorded as succeeded (ok) or failed with errMsg.
func (h *targetHealth) observe(tenant uuid.UUID, key string, at time.Time, ok bool, errMsg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := targetID{tenant: tenant, key: key}
	s := h.seen[id]
	if s == nil {
		s = &healthSeen{}
		h.seen[id] = s
	}
	s.note(at, ok, errMsg)
}

// note adds one attempt; attempts may come out of order.
func (s *healthSeen) note(at time.Time, ok bool, errMsg string) {
	if ok {
		if at.After(s.success) {
			s.success = at
		}
		if !s.last.After(s.success) {
			s.first, s.last, s.lastError = time.Time{}, time.Time{}, ""
		} else if !s.first.After(s.success) {
			s.first = s.success
		}
		return
	}
	if !at.After(s.success) {
		return
	}
	if s.first.IsZero() || at.Before(s.first) {
		s.first = at
	}
	if !at.Before(s.last) {
		s.last, s.lastError = at, errMsg
	}
}

// merge adds what o saw, reported at no time, back: a report that failed.
func (s *healthSeen) merge(o *healthSeen) {
	if !o.success.IsZero() {
		s.note(o.success, true, "")
	}
	if !o.first.IsZero() {
		s.note(o.first, false, o.lastError)
		s.note(o.last, false, o.lastError)
	}
}

// Run reports every Interval until ctx ends, then once more, so that what
// the last attempts showed is not lost.
func (h *targetHealth) Run(ctx context.Context) {
	clock.Every(ctx, h.cfg.Clock, h.cfg.Interval, func() { h.report(ctx) })
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	h.report(stopCtx)
}

// report writes what was seen since the last report. The rows are given in
// key order, the order every writer of target_health locks them in.
func (h *targetHealth) report(ctx context.Context) {
	h.mu.Lock()
	seen := h.seen
	h.seen = make(map[targetID]*healthSeen, len(seen))
	h.mu.Unlock()
	if len(seen) == 0 {
		return
	}
	ids := make([]targetID, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b targetID) int {
		if c := slices.Compare(a.tenant[:], b.tenant[:]); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	now := h.cfg.Clock.Now()
	r := model.TargetHealthReport{At: now.UTC(), DisableAfter: h.cfg.DisableAfter,
		Reason: fmt.Sprintf("every attempt failed for %s", h.cfg.DisableAfter)}
	for _, id := range ids {
		s := seen[id]
		if !s.success.IsZero() {
			r.Successes = append(r.Successes, model.TargetSuccess{TenantID: id.tenant, Target: id.key, At: s.success})
		}
		if !s.first.IsZero() {
			r.Failures = append(r.Failures, model.TargetFailures{TenantID: id.tenant, Target: id.key,
				First: s.first, Last: s.last, LastError: s.lastError})
		}
	}
	paused, err := h.cfg.Store.RecordTargetHealth(ctx, r, func(e model.TargetEvent) (*model.Task, error) {
		return operationsEvent(e, now)
	})
	if err != nil {
		h.cfg.Metrics.storeErrors.WithLabelValues("target_health").Inc()
		h.cfg.Logger.Warn("recording target health failed; will report it again", "targets", len(seen), "err", err)
		h.mu.Lock()
		for id, s := range seen {
			if cur := h.seen[id]; cur != nil {
				cur.merge(s)
			} else {
				h.seen[id] = s
			}
		}
		h.mu.Unlock()
		return
	}
	for _, p := range paused {
		h.cfg.Logger.Warn("target paused: every attempt to it failed for too long; resume it with POST /v1/targets/resume",
			"tenant", p.TenantID, "target", p.Target, "failing_since", p.Since, "disable_after", h.cfg.DisableAfter)
	}
	if len(paused) > 0 {
		h.cfg.Paused()
	}
}

// operationsEventTimeout is the timeout of an operations event's attempts.
const operationsEventTimeout = 30 * time.Second

// operationsEvent is the task telling e to its tenant's operations URL,
// due at now: a POST of JSON, signed with the tenant's secrets like its
// webhooks, retried by hookwheel's default policy.
func operationsEvent(e model.TargetEvent, now time.Time) (*model.Task, error) {
	payload := map[string]any{"type": e.Type, "target": e.Target}
	switch {
	case e.Pause != nil:
		payload["paused_at"] = e.Pause.PausedAt.UTC()
		payload["reason"] = e.Pause.Reason
		if e.Pause.Since != nil {
			payload["since"] = e.Pause.Since.UTC()
		}
		payload["last_error"] = e.Pause.LastError
	default:
		payload["recovered_at"] = e.At.UTC()
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new task id: %w", err)
	}
	policy := retry.DefaultPolicy()
	return &model.Task{
		ID: id, TenantID: e.TenantID, URL: e.OperationsURL, Method: "POST",
		Headers: map[string]string{"Content-Type": "application/json"}, Body: body, RunAt: now.UTC().Truncate(time.Microsecond),
		Timeout: operationsEventTimeout, MaxAttempts: policy.MaxAttempts, MinBackoff: policy.MinBackoff, MaxBackoff: policy.MaxBackoff,
	}, nil
}
