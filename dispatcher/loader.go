package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// loadPage bounds the rows of one statement that hands tasks back or lists
// overdue ones; duePage, those of one page of a load. ListDue cannot stop
// at a page's end: it reads every task due in the rest of the window
// across the partitions, and sorts them, to return the page's first ones.
// So a window holding a backlog of n tasks costs n²/(2·duePage) rows read:
// with pages of 5,000, loading 400,000 tasks due at once took as much of
// Postgres as recording their outcomes. A page of 50,000 due tasks is 2 MB
// on the node.
const (
	loadPage = 5000
	duePage  = 50_000
)

// loaderStore is what the loader needs of Postgres.
type loaderStore interface {
	ListDue(ctx context.Context, partitions []int16, after model.DueCursor, until time.Time, limit int) ([]model.DueTask, error)
	ListDueExcept(ctx context.Context, partitions []int16, after model.DueCursor, until time.Time, limit int,
		held *model.Held) ([]model.DueTask, error)
	ReleaseOrphans(ctx context.Context, partitions []int16, limit int) ([]model.DueTask, error)
}

// loadedWindow is the end of the window the loader has loaded or is
// loading: a task announced later with a due time up to it must go into the
// wheel directly, since the loader's scan may have missed it.
type loadedWindow struct {
	// until is replaced, never modified, so readers need no lock; nil
	// before the first load.
	until atomic.Pointer[time.Time]
}

// extend moves the end of the window to until, if that is later.
func (w *loadedWindow) extend(until time.Time) {
	for {
		cur := w.until.Load()
		if cur != nil && !until.After(*cur) {
			return
		}
		if w.until.CompareAndSwap(cur, &until) {
			return
		}
	}
}

// end is the end of the window; the zero time before the first load.
func (w *loadedWindow) end() time.Time {
	if p := w.until.Load(); p != nil {
		return *p
	}
	return time.Time{}
}

// covers reports whether a task due at at falls inside the window.
func (w *loadedWindow) covers(at time.Time) bool {
	p := w.until.Load()
	return p != nil && !at.After(*p)
}

// loaderConfig configures newLoader. Every field is required.
type loaderConfig struct {
	Store         loaderStore
	Clock         clock.Clock
	Logger        *slog.Logger
	Metrics       *metrics
	Lookahead     time.Duration
	LoadInterval  time.Duration
	SweepInterval time.Duration
	// Partitions are those this node owns: only their tasks are loaded.
	Partitions func() []int16
	// Arm puts a loaded task into the wheel.
	Arm func(id uuid.UUID, at time.Time)
	// Pending reports whether a task is in the wheel or in flight already,
	// for the sweep to leave alone.
	Pending func(id uuid.UUID) bool
	// Held are the tenants and the tenants' targets whose tasks are held
	// (heldTenants): the sweep passes over them, so that their overdue backlog neither fills its
	// pages nor is armed again every sweep. Nil: none.
	Held func() *model.Held
}

// loader keeps the wheel fed from Postgres: it loads the window of tasks
// falling due within Lookahead and sweeps up overdue tasks that slipped past
// every wheel. The tasks other nodes store inside the window come through
// the listener.
type loader struct {
	cfg    loaderConfig
	window loadedWindow
	// gained carries partitions this node just took over, to be read from
	// the beginning.
	gained chan []int16
	// rescan asks for the whole window to be read again (the listener
	// reconnected and may have missed announcements).
	rescan chan struct{}
}

func newLoader(cfg loaderConfig) *loader {
	if cfg.Held == nil {
		cfg.Held = noneHeld
	}
	return &loader{cfg: cfg, gained: make(chan []int16, 64), rescan: make(chan struct{}, 1)}
}

// Run loads and sweeps until ctx ends.
func (l *loader) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.runLoader(ctx) }()
	go func() { defer wg.Done(); l.runSweeper(ctx) }()
	wg.Wait()
}

// takeOver has partitions this node just gained loaded from the beginning
// of time; it never blocks.
func (l *loader) takeOver(partitions []int16) {
	select {
	case l.gained <- partitions:
	default:
		// The loader is behind on takeovers: have it read everything.
		l.askRescan()
	}
}

func (l *loader) askRescan() {
	select {
	case l.rescan <- struct{}{}:
	default:
	}
}

// runLoader keeps the wheel loaded with every waiting task due within
// Lookahead. Each pass reads only the slice of time it has not read yet, so
// its cost follows the rate at which tasks fall due, not how many wait.
// Tasks stored later inside an already-read slice are announced directly
// (Schedule, or NOTIFY through the listener).
func (l *loader) runLoader(ctx context.Context) {
	// Start from the beginning of time: whatever is overdue fires at once.
	var cursor model.DueCursor
	ticker := l.cfg.Clock.NewTimer(0)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.rescan:
			cursor = model.DueCursor{}
		case gained := <-l.gained:
			l.catchUp(ctx, gained)
			continue
		case <-ticker.C():
		}
		next, ok := l.load(ctx, cursor)
		if ok {
			cursor = next
		}
		ticker.Reset(l.cfg.LoadInterval)
	}
}

// catchUp loads partitions this node just took over, from the beginning of
// time to the end of the window already loaded for the others: what their
// previous owner left waiting (overdue included) fires here.
//
// First it frees the tasks a dead owner may have left parked behind an
// ordering key that nothing blocks any more (store/ordering.go): its claim
// parked them and it died before rechecking. Freed, they are overdue, and
// the load below takes them.
func (l *loader) catchUp(ctx context.Context, partitions []int16) {
	until := l.window.end()
	for {
		released, err := l.cfg.Store.ReleaseOrphans(ctx, partitions, loadPage)
		if err != nil {
			if ctx.Err() == nil {
				l.cfg.Metrics.storeErrors.WithLabelValues("load").Inc()
				l.cfg.Logger.Error("releasing orphaned parked tasks of gained partitions failed; they wait for the partitions' next owner",
					"err", err)
			}
			break
		}
		if len(released) < loadPage {
			break
		}
	}
	var cursor model.DueCursor
	for {
		due, err := l.cfg.Store.ListDue(ctx, partitions, cursor, until, duePage)
		if err != nil {
			if ctx.Err() == nil {
				l.cfg.Metrics.storeErrors.WithLabelValues("load").Inc()
				l.cfg.Logger.Error("loading gained partitions failed; a full rescan follows", "err", err)
				l.askRescan()
			}
			return
		}
		for _, t := range due {
			l.cfg.Arm(t.ID, t.At)
		}
		l.cfg.Metrics.loaded.Add(float64(len(due)))
		if len(due) < duePage {
			return
		}
		last := due[len(due)-1]
		cursor = model.DueCursor{At: last.At, ID: last.ID}
	}
}

// load reads the tasks due after cursor and up to now+Lookahead into the
// wheel and returns the cursor to continue from.
func (l *loader) load(ctx context.Context, cursor model.DueCursor) (model.DueCursor, bool) {
	until := l.cfg.Clock.Now().Add(l.cfg.Lookahead)
	// Widen the window before reading it: a task announced from now on with
	// a due time inside it goes to the wheel directly, so none can fall
	// between this read and the announcement.
	l.window.extend(until)

	started := l.cfg.Clock.Now()
	loaded := 0
	for {
		due, err := l.cfg.Store.ListDue(ctx, l.cfg.Partitions(), cursor, until, duePage)
		if err != nil {
			if ctx.Err() == nil {
				l.cfg.Metrics.storeErrors.WithLabelValues("load").Inc()
				l.cfg.Logger.Error("loading due tasks failed; will retry", "err", err)
			}
			return cursor, false
		}
		for _, t := range due {
			l.cfg.Arm(t.ID, t.At)
		}
		loaded += len(due)
		if len(due) < duePage {
			break
		}
		last := due[len(due)-1]
		cursor = model.DueCursor{At: last.At, ID: last.ID}
	}
	l.cfg.Metrics.loaded.Add(float64(loaded))
	l.cfg.Metrics.loadDuration.Observe(l.cfg.Clock.Now().Sub(started).Seconds())
	return model.DueCursor{At: until, ID: uuid.Max}, true
}

// runSweeper gathers what slipped past the wheel: tasks overdue yet in no
// wheel (written by hand, or announced while a node was failing over).
// Claims whose owner died are recovered on every heartbeat (membership.go).
func (l *loader) runSweeper(ctx context.Context) {
	clock.Every(ctx, l.cfg.Clock, l.cfg.SweepInterval, func() { l.sweep(ctx) })
}

func (l *loader) sweep(ctx context.Context) {
	// Overdue by more than a sweep interval and yet neither in the wheel nor
	// in flight: nobody else will send it.
	overdue, err := l.cfg.Store.ListDueExcept(ctx, l.cfg.Partitions(), model.DueCursor{}, l.cfg.Clock.Now().Add(-l.cfg.SweepInterval), loadPage,
		l.cfg.Held())
	if err != nil {
		if ctx.Err() == nil {
			l.cfg.Metrics.storeErrors.WithLabelValues("sweep").Inc()
			l.cfg.Logger.Error("sweeping overdue tasks failed", "err", err)
		}
		return
	}
	stray := 0
	for _, t := range overdue {
		if l.cfg.Pending(t.ID) {
			continue
		}
		stray++
		l.cfg.Arm(t.ID, t.At)
	}
	if stray > 0 {
		l.cfg.Metrics.swept.Add(float64(stray))
		l.cfg.Logger.Warn("found overdue tasks in no wheel; firing them", "tasks", stray)
	}
}
