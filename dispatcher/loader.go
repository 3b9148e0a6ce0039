package dispatcher

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/store"
)

const loadPage = 5000

// runLoader keeps the wheel loaded with every waiting task due within
// Lookahead. Each pass reads only the slice of time it has not read yet, so
// its cost follows the rate at which tasks fall due, not how many wait.
// Tasks stored later inside an already-read slice are announced directly
// (Schedule, or NOTIFY through runListener).
func (d *Dispatcher) runLoader(ctx context.Context) {
	// Start from the beginning of time: whatever is overdue fires at once.
	var cursor store.DueCursor
	ticker := d.clock.NewTimer(0)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.rescan:
			cursor = store.DueCursor{}
		case gained := <-d.gained:
			d.catchUp(ctx, gained)
			continue
		case <-ticker.C():
		}
		next, ok := d.load(ctx, cursor)
		if ok {
			cursor = next
		}
		ticker.Reset(d.cfg.LoadInterval)
	}
}

// catchUp loads partitions this node just took over, from the beginning of
// time to the end of the window already loaded for the others: what their
// previous owner left waiting (overdue included) fires here.
func (d *Dispatcher) catchUp(ctx context.Context, partitions []int16) {
	d.mu.Lock()
	until := d.loadingUntil
	d.mu.Unlock()
	var cursor store.DueCursor
	for {
		due, err := d.db.ListDue(ctx, partitions, cursor, until, loadPage)
		if err != nil {
			if ctx.Err() == nil {
				d.metrics.storeErrors.WithLabelValues("load").Inc()
				d.logger.Error("loading gained partitions failed; a full rescan follows", "err", err)
				select {
				case d.rescan <- struct{}{}:
				default:
				}
			}
			return
		}
		for _, t := range due {
			d.arm(t.ID, t.At)
		}
		d.metrics.loaded.Add(float64(len(due)))
		if len(due) < loadPage {
			return
		}
		last := due[len(due)-1]
		cursor = store.DueCursor{At: last.At, ID: last.ID}
	}
}

// load reads the tasks due after cursor and up to now+Lookahead into the
// wheel and returns the cursor to continue from.
func (d *Dispatcher) load(ctx context.Context, cursor store.DueCursor) (store.DueCursor, bool) {
	until := d.clock.Now().Add(d.cfg.Lookahead)
	// Widen the window before reading it: a task announced from now on with
	// a due time inside it goes to the wheel directly, so none can fall
	// between this read and the announcement.
	d.mu.Lock()
	if until.After(d.loadingUntil) {
		d.loadingUntil = until
	}
	d.mu.Unlock()

	started := d.clock.Now()
	loaded := 0
	for {
		due, err := d.db.ListDue(ctx, d.ownedPartitions(), cursor, until, loadPage)
		if err != nil {
			if ctx.Err() == nil {
				d.metrics.storeErrors.WithLabelValues("load").Inc()
				d.logger.Error("loading due tasks failed; will retry", "err", err)
			}
			return cursor, false
		}
		for _, t := range due {
			d.arm(t.ID, t.At)
		}
		loaded += len(due)
		if len(due) < loadPage {
			break
		}
		last := due[len(due)-1]
		cursor = store.DueCursor{At: last.At, ID: last.ID}
	}
	d.metrics.loaded.Add(float64(loaded))
	d.metrics.loadDuration.Observe(d.clock.Now().Sub(started).Seconds())
	return store.DueCursor{At: until, ID: uuid.Max}, true
}

// runListener feeds the wheel with tasks that other nodes store inside the
// loaded window, as Postgres announces them on commit.
func (d *Dispatcher) runListener(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := d.db.ListenDue(ctx, func() {
			// Announcements made while not listening are lost: read the
			// window again.
			select {
			case d.rescan <- struct{}{}:
			default:
			}
			backoff = 100 * time.Millisecond
		}, func(t store.DueTask) {
			d.Schedule(t.ID, t.At)
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		d.metrics.storeErrors.WithLabelValues("listen").Inc()
		d.logger.Warn("listening for due tasks failed; reconnecting", "err", err, "in", backoff)
		t := d.clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// runSweeper gathers what slipped past the wheel: tasks overdue yet in no
// wheel (written by hand, or announced while a node was failing over).
// Claims whose owner died are recovered on every heartbeat (membership.go).
func (d *Dispatcher) runSweeper(ctx context.Context) {
	t := d.clock.NewTimer(d.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		d.sweep(ctx)
		t.Reset(d.cfg.SweepInterval)
	}
}

func (d *Dispatcher) sweep(ctx context.Context) {
	// Overdue by more than a sweep interval and yet neither in the wheel nor
	// in flight: nobody else will send it.
	overdue, err := d.db.ListDue(ctx, d.ownedPartitions(), store.DueCursor{}, d.clock.Now().Add(-d.cfg.SweepInterval), loadPage)
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.storeErrors.WithLabelValues("sweep").Inc()
			d.logger.Error("sweeping overdue tasks failed", "err", err)
		}
		return
	}
	stray := 0
	for _, t := range overdue {
		d.mu.Lock()
		inflight := d.inflight[t.ID] > 0
		d.mu.Unlock()
		if inflight || d.timers.Contains(t.ID) {
			continue
		}
		stray++
		d.arm(t.ID, t.At)
	}
	if stray > 0 {
		d.metrics.swept.Add(float64(stray))
		d.logger.Warn("found overdue tasks in no wheel; firing them", "tasks", stray)
	}
}
