package dispatcher

import (
	"context"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/schedule"
	"github.com/hookwheel/hookwheel/store"
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

// runMaterializer turns the occurrences of the schedules in this node's
// partitions into tasks, Lookahead ahead of time, so that each occurrence is
// an ordinary task (durable, claimed once, retried with the schedule's
// policy) before the loader's window reaches it.
func (d *Dispatcher) runMaterializer(ctx context.Context) {
	t := d.clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for ctx.Err() == nil {
			if d.materialize(ctx) < materializeBatch {
				break
			}
		}
		t.Reset(materializeInterval)
	}
}

// materialize runs one pass: it materialises the occurrences falling due
// within Lookahead of up to materializeBatch due schedules of this node's
// partitions and arms the new tasks. It returns the number of schedules it
// worked on.
func (d *Dispatcher) materialize(ctx context.Context) int {
	owned := d.ownedPartitions()
	if len(owned) == 0 {
		return 0
	}
	now := d.clock.Now()
	horizon := now.Add(d.cfg.Lookahead)
	planned := 0
	created, err := d.db.MaterializeSchedules(ctx, store.MaterializeParams{
		Partitions:  owned,
		Until:       horizon,
		Limit:       materializeBatch,
		NotifyUntil: horizon,
	}, func(s *model.Schedule) store.Plan {
		planned++
		return d.plan(s, now, horizon)
	})
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.storeErrors.WithLabelValues("materialize").Inc()
			d.logger.Error("materialising schedules failed; will retry", "err", err)
		}
		return 0
	}
	// The tasks are in this node's partitions (a schedule's occurrences are
	// put in its own): arm them here rather than wait for the NOTIFY round
	// trip. Those beyond the loaded window are left to the loader.
	for _, t := range created {
		d.Schedule(t.ID, t.At)
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
func (d *Dispatcher) plan(s *model.Schedule, now, horizon time.Time) store.Plan {
	sch, err := schedule.Parse(s.Cron, s.Timezone, s.CreatedAt)
	if err != nil {
		d.logger.Error("cannot read a schedule; trying again later", "schedule", s.ID, "cron", s.Cron,
			"timezone", s.Timezone, "err", err, "retry_in", retryUnreadable)
		retry := now.Add(retryUnreadable)
		return store.Plan{Next: &retry}
	}
	next := *s.NextRunAt
	var occurrences []time.Time
	if now.Sub(next) > d.cfg.Lookahead {
		latest := sch.Last(next, now)
		d.logger.Warn("schedule missed occurrences; sending the most recent one once",
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
	p := store.Plan{Occurrences: occurrences}
	if !next.IsZero() {
		p.Next = &next
	}
	return p
}
