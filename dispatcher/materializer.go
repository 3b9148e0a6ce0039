package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/schedule"
)

const (
	// materializeInterval is how often a node looks for schedules of its
	// partitions whose next occurrence comes within the horizon. The horizon
	// is far larger, so a pass late by this much costs nothing.
	materializeInterval = 250 * time.Millisecond
	// materializeBatch caps the schedules of one pass (one transaction); a
	// full batch is followed at once by another.
	materializeBatch = 100
	// maxOccurrencesPerPass caps the tasks one schedule gets in one pass; the
	// rest wait for the next pass, its NextRunAt still due.
	maxOccurrencesPerPass = 1000
	// retryUnreadable is how long a schedule that this node cannot read
	// (its time zone unknown to this node's zone database) waits before the
	// next try.
	retryUnreadable = time.Minute
)

// materializerStore is what the materializer needs of Postgres.
type materializerStore interface {
	MaterializeSchedules(ctx context.Context, p model.MaterializeParams, plan func(*model.Schedule) model.OccurrencePlan) (model.Materialized, error)
}

// materializerConfig configures newMaterializer. Every field is required.
type materializerConfig struct {
	Store   materializerStore
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics
	// Lookahead is how far ahead occurrences become tasks.
	Lookahead time.Duration
	// DefaultTasksPerDay is the node's tasks_per_day, for tenants whose
	// own limits and plan set none (0: none).
	DefaultTasksPerDay int
	// DefaultMaxPendingTasks is the node's max_pending_tasks, for tenants
	// whose own limits and plan set none; 0 for none.
	DefaultMaxPendingTasks int
	// Partitions are those this node owns: only their schedules are
	// materialised here.
	Partitions func() []int16
	// Schedule is told of each task created, to arm it if it is due within
	// the loaded window.
	Schedule func(id uuid.UUID, at time.Time)
}

// materializer turns schedules' occurrences into tasks.
type materializer struct {
	cfg materializerConfig
}

func newMaterializer(cfg materializerConfig) *materializer { return &materializer{cfg: cfg} }

// Run turns the occurrences of the schedules in this node's
// partitions into tasks, Lookahead ahead of time, so that each occurrence is
// an ordinary task (durable, claimed once, retried with the schedule's
// policy) before the loader's window reaches it.
func (m *materializer) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for ctx.Err() == nil {
			if m.pass(ctx) < materializeBatch {
				break
			}
		}
		t.Reset(materializeInterval)
	}
}

// pass runs one pass: it materialises the occurrences falling due
// within Lookahead of up to materializeBatch due schedules of this node's
// partitions and arms the new tasks. It returns the number of schedules it
// worked on.
func (m *materializer) pass(ctx context.Context) int {
	owned := m.cfg.Partitions()
	if len(owned) == 0 {
		return 0
	}
	now := m.cfg.Clock.Now()
	horizon := now.Add(m.cfg.Lookahead)
	planned := 0
	done, err := m.cfg.Store.MaterializeSchedules(ctx, model.MaterializeParams{
		Partitions:  owned,
		Until:       horizon,
		Limit:       materializeBatch,
		NotifyUntil: horizon,

		DefaultTasksPerDay: m.cfg.DefaultTasksPerDay, DefaultMaxPendingTasks: m.cfg.DefaultMaxPendingTasks,
	}, func(s *model.Schedule) model.OccurrencePlan {
		planned++
		return m.plan(s, now, horizon)
	})
	if err != nil {
		if ctx.Err() == nil {
			m.cfg.Metrics.storeErrors.WithLabelValues("materialize").Inc()
			m.cfg.Logger.Error("materialising schedules failed; will retry", "err", err)
		}
		return 0
	}
	// The tasks are in this node's partitions (a schedule's occurrences are
	// put in its own): arm them here rather than wait for the NOTIFY round
	// trip. Those beyond the loaded window are left to the loader.
	for _, t := range done.Created {
		m.cfg.Schedule(t.ID, t.At)
	}
	if done.Skipped > 0 {
		m.cfg.Metrics.skippedOccurrences.Add(float64(done.Skipped))
		m.cfg.Logger.Warn("schedule occurrences skipped: their tenants are at max_pending_tasks or tasks_per_day", "occurrences", done.Skipped)
	}
	return planned
}

// plan decides what to materialise for a due schedule: every occurrence from
// its NextRunAt up to horizon. An occurrence more than Lookahead overdue
// was missed (no node materialised it: the whole cluster was down, or the
// schedule's partition had no owner, for longer than the horizon); all the
// missed occurrences collapse into one task for the most recent of them,
// sent at once, and the schedule goes on from its next occurrence: a
// schedule back from downtime fires once, not once per missed tick.
func (m *materializer) plan(s *model.Schedule, now, horizon time.Time) model.OccurrencePlan {
	sch, err := schedule.Parse(s.Cron, s.Timezone, s.CreatedAt)
	if err != nil {
		m.cfg.Logger.Error("cannot read a schedule; trying again later", "schedule", s.ID, "cron", s.Cron,
			"timezone", s.Timezone, "err", err, "retry_in", retryUnreadable)
		retry := now.Add(retryUnreadable)
		return model.OccurrencePlan{Next: &retry}
	}
	next := *s.NextRunAt
	var occurrences []time.Time
	if now.Sub(next) > m.cfg.Lookahead {
		latest := sch.Last(next, now)
		m.cfg.Logger.Warn("schedule missed occurrences; sending the most recent one once",
			"schedule", s.ID, "missed_since", next, "latest", latest)
		if latest.IsZero() {
			next = sch.Next(now)
		} else {
			occurrences = append(occurrences, latest)
			next = sch.Next(latest)
		}
	}
	for !next.IsZero() && !next.After(horizon) && len(occurrences) < maxOccurrencesPerPass {
		occurrences = append(occurrences, next)
		next = sch.Next(next)
	}
	p := model.OccurrencePlan{Occurrences: occurrences}
	if !next.IsZero() {
		p.Next = &next
	}
	return p
}
