// Package tasks is the task lifecycle: what creating, canceling, rescheduling
// and replaying a task, and creating, pausing, resuming and deleting a
// schedule, mean beyond the row they change — the pending-task quota, the
// idempotency of creation, and which dispatcher has to hear of the change —
// and the rules a task must keep to be stored at all (Rules). It exists so
// that these rules live in one place, below the HTTP API and above the
// store, whatever calls them: the API, or a program creating tasks in its
// own transaction (CreateWith, package txenqueue).
//
// A task stored to fall due within the dispatchers' look-ahead window is past
// their loaders' read, so it is announced twice: the store notifies every
// dispatcher on commit, and the dispatcher running in this process, if any,
// is told directly, sparing the notification's round trip. Which tasks that
// is gets decided before the write, so the write's own statement can notify;
// the window moves on while the write is in flight, so the tasks that entered
// it meanwhile are announced once more after the commit (announcement).
package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// Announcer is the dispatcher running in this process. *dispatcher.Dispatcher
// is one.
type Announcer interface {
	// Schedule tells it of a committed task whose next attempt is due at at.
	Schedule(id uuid.UUID, at time.Time)
	// Cancel tells it a task needs no timer any more.
	Cancel(id uuid.UUID)
	// Lookahead is how far ahead it keeps due tasks loaded.
	Lookahead() time.Duration
}

// Store is where tasks and schedules live: the store methods the Service
// calls. *store.DB is one. A change to a tenant's configuration (topics,
// flow limits, schedules) takes the audit entry that records it, to be
// written in the same transaction.
type Store interface {
	CountPendingTasks(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error)
	CountSchedules(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error)
	HasIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error)
	InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error)
	InsertTasks(ctx context.Context, tasks []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error)
	WithTasksCreated(ctx context.Context, tenantID uuid.UUID, fn func(st model.CreateStore, created int) error) error
	GetTask(ctx context.Context, tenantID, id uuid.UUID) (*model.Task, error)
	ListTasks(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter) ([]*model.Task, error)
	ListTasksWithBodies(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter, budget int64) ([]*model.Task, bool, error)
	ListAttempts(ctx context.Context, tenantID, taskID uuid.UUID, after, limit int) ([]model.Attempt, error)
	CancelTask(ctx context.Context, tenantID, id uuid.UUID) (*model.Task, error)
	CancelTasks(ctx context.Context, tenantID uuid.UUID, f model.CancelFilter) ([]uuid.UUID, error)
	RescheduleTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, notifyDue bool) (*model.Task, error)
	ReplayTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, edit *model.TaskEdit) (*model.Task, error)
	CountDeadTasks(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter) (int, error)
	ReplayTasks(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter, at time.Time) ([]uuid.UUID, time.Time, error)
	DeadTasksToEdit(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter, after uuid.UUID, limit int) ([]model.EditTarget, error)
	EditReplayTasks(ctx context.Context, tenantID uuid.UUID, changes []model.TaskChange, at time.Time) ([]uuid.UUID, time.Time, error)
	AnnounceDue(ctx context.Context, due map[uuid.UUID]time.Time) error
	ListNodes(ctx context.Context) ([]model.Node, error)

	PutTopic(ctx context.Context, t *model.Topic, maxTopics int, audit func(created bool) *model.AuditEntry) (created bool, err error)
	GetTopic(ctx context.Context, tenantID uuid.UUID, name string) (*model.Topic, error)
	GetTopics(ctx context.Context, tenantID uuid.UUID, names []string) (map[string]*model.Topic, error)
	ListTopics(ctx context.Context, tenantID uuid.UUID, f model.TopicFilter) ([]*model.Topic, error)
	DeleteTopic(ctx context.Context, tenantID uuid.UUID, name string, audit *model.AuditEntry) (*model.Topic, error)
	InsertPublishes(ctx context.Context, pubs []*model.Publish, tasks []*model.Task, notifyBefore time.Time) ([]model.PublishResult, []model.InsertResult, error)
	GetPublish(ctx context.Context, tenantID, id uuid.UUID) (*model.Publish, error)
	HasPublishKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error)

	PutFlowLimit(ctx context.Context, l *model.FlowLimit, maxLimits int, audit func(created bool) *model.AuditEntry) (created bool, err error)
	GetFlowLimit(ctx context.Context, tenantID uuid.UUID, key string) (*model.FlowLimit, error)
	ListFlowLimits(ctx context.Context, tenantID uuid.UUID, f model.FlowLimitFilter) ([]*model.FlowLimit, error)
	DeleteFlowLimit(ctx context.Context, tenantID uuid.UUID, key string, audit *model.AuditEntry) (*model.FlowLimit, error)

	PauseTarget(ctx context.Context, p *model.TargetPause, audit *model.AuditEntry) (*model.TargetPause, bool, error)
	ResumeTarget(ctx context.Context, tenantID uuid.UUID, target string, at time.Time, audit *model.AuditEntry) (*model.TargetPause, error)
	ListTargetPauses(ctx context.Context, tenantID uuid.UUID) ([]*model.TargetPause, error)

	InsertSchedule(ctx context.Context, s *model.Schedule, audit *model.AuditEntry) error
	GetSchedule(ctx context.Context, tenantID, id uuid.UUID) (*model.Schedule, error)
	ListSchedules(ctx context.Context, tenantID uuid.UUID, f model.ScheduleFilter) ([]*model.Schedule, error)
	ListSchedulesWithBodies(ctx context.Context, tenantID uuid.UUID, f model.ScheduleFilter, budget int64) ([]*model.Schedule, bool, error)
	PauseSchedule(ctx context.Context, tenantID, id uuid.UUID, audit *model.AuditEntry) (*model.Schedule, []uuid.UUID, error)
	DeleteSchedule(ctx context.Context, tenantID, id uuid.UUID, audit *model.AuditEntry) (*model.Schedule, []uuid.UUID, error)
	ResumeSchedule(ctx context.Context, tenantID, id uuid.UUID, next func(*model.Schedule) (*time.Time, error), audit *model.AuditEntry) (*model.Schedule, error)
	UpdateSchedule(ctx context.Context, tenantID, id uuid.UUID, change func(*model.Schedule) (*model.Schedule, error),
		audit func(*model.Schedule) *model.AuditEntry) (*model.Schedule, []uuid.UUID, error)

	// RecordAudit records an audit entry on its own: for the bulk changes,
	// which commit in chunks.
	RecordAudit(ctx context.Context, entry model.AuditEntry) error

	StatsStore
}

// Config configures a Service.
type Config struct {
	// Store holds tasks and schedules. Required.
	Store Store
	// Announcer is the dispatcher running in this process. Optional: an
	// API-only node has none, and its tasks reach the dispatchers through the
	// store's notifications alone.
	Announcer Announcer
	// Lookahead is the dispatchers' look-ahead window when no Announcer runs
	// here to say what it is. It must match the dispatchers' Lookahead.
	// Default model.DefaultLookahead.
	Lookahead time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger reports announcements that failed after their task was stored.
	// Default slog.Default().
	Logger *slog.Logger
	// MaxFanoutBytes bounds the bodies one call's publishes to topics store,
	// each body counted once per endpoint. Default DefaultMaxFanoutBytes
	// (32 MiB).
	MaxFanoutBytes int64
	// MaxFanoutTasks bounds the tasks one batch's publishes make together.
	// Default DefaultMaxFanoutTasks (10,000).
	MaxFanoutTasks int
}

// Service runs the task lifecycle. It is safe for concurrent use.
type Service struct {
	store    Store
	announce Announcer
	// lookahead is the window when the Announcer does not say.
	lookahead time.Duration
	clock     clock.Clock
	logger    *slog.Logger
	// maxFanoutBytes and maxFanoutTasks are Config's.
	maxFanoutBytes int64
	maxFanoutTasks int
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("tasks: Config.Store is required")
	}
	if cfg.Lookahead <= 0 {
		cfg.Lookahead = model.DefaultLookahead
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxFanoutBytes <= 0 {
		cfg.MaxFanoutBytes = DefaultMaxFanoutBytes
	}
	if cfg.MaxFanoutTasks <= 0 {
		cfg.MaxFanoutTasks = DefaultMaxFanoutTasks
	}
	announce := cfg.Announcer
	if announce == nil {
		announce = silent{}
	}
	return &Service{store: cfg.Store, announce: announce, lookahead: cfg.Lookahead, clock: cfg.Clock,
		logger: cfg.Logger, maxFanoutBytes: cfg.MaxFanoutBytes, maxFanoutTasks: cfg.MaxFanoutTasks}, nil
}

// silent stands for the dispatcher of a node that runs none.
type silent struct{}

func (silent) Schedule(uuid.UUID, time.Time) {}
func (silent) Cancel(uuid.UUID)              {}
func (silent) Lookahead() time.Duration      { return 0 }

// dueSoonBefore is the instant before which a task stored now falls inside
// the dispatchers' loaded window, and so must be announced: the local
// dispatcher's window when one runs here, else Config.Lookahead.
func (s *Service) dueSoonBefore(now time.Time) time.Time {
	window := s.announce.Lookahead()
	if window <= 0 {
		window = s.lookahead
	}
	return now.Add(window)
}

// announcement tells the dispatchers of the tasks one write stored that fall
// due within their loaded window.
//
// The write's own statement notifies, on commit, the tasks due before
// notifyBefore, decided from the clock before the write. A loader pass that
// runs while the write is in flight reads without the uncommitted rows, yet
// widens its window to its own now plus the look-ahead and moves its cursor
// there: a task due between notifyBefore and that end would be neither
// announced nor loaded, and only the sweep would find it, late. Every such
// pass started before the commit, so its window ends before the clock read
// after the commit plus the look-ahead: the tasks due up to there are
// announced too, by a second statement that only the rare write with such
// tasks pays for, and a dispatcher whose window does not reach them yet
// leaves them to its loader, which will see them committed.
type announcement struct {
	s *Service
	// notifyBefore is the bound the write's statement notified by.
	notifyBefore time.Time
	// lateBefore is the same bound read after the commit.
	lateBefore time.Time
	// late are the tasks due in [notifyBefore, lateBefore).
	late map[uuid.UUID]time.Time
}

// committed starts the announcement of a write that has committed, whose
// statement notified the tasks due before notifyBefore.
func (s *Service) committed(notifyBefore time.Time) *announcement {
	return &announcement{s: s, notifyBefore: notifyBefore, lateBefore: s.dueSoonBefore(s.clock.Now())}
}

// task announces a task the write stored, due at at, to the dispatcher here
// if it falls due within the window, and keeps it for send if the write's
// statement did not notify it.
func (a *announcement) task(id uuid.UUID, at time.Time) {
	switch {
	case at.Before(a.notifyBefore):
	case at.Before(a.lateBefore):
		if a.late == nil {
			a.late = map[uuid.UUID]time.Time{}
		}
		a.late[id] = at
	default:
		return
	}
	a.s.announce.Schedule(id, at)
}

// announceTimeout bounds send's notification, which no longer follows the
// request's cancellation.
const announceTimeout = 5 * time.Second

// send notifies every dispatcher of the tasks the write's statement did not.
// The tasks are stored whatever happens here, so a failure is only logged:
// the sweep still finds them, late.
func (a *announcement) send(ctx context.Context) {
	if len(a.late) == 0 {
		return
	}
	// The write has committed: a client that goes away now (canceling the
	// request's context) must not cost its tasks their announcement and
	// leave them to the sweep, late. So the notification outlives the
	// request, bounded so a stuck database does not hold the handler.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceTimeout)
	defer cancel()
	if err := a.s.store.AnnounceDue(ctx, a.late); err != nil {
		a.s.logger.Warn("announcing tasks stored as the window moved failed; the sweep will send them late",
			"tasks", len(a.late), "err", err)
	}
}

// ErrKeyReused refuses a create whose idempotency key the tenant already used
// for a different request.
var ErrKeyReused = errors.New("idempotency key already used by a different request")

// ErrCallbackOfCallback refuses an edit that gives a callback task callback
// URLs of its own: a callback's outcome is reported to no one, so that
// callbacks never report on each other.
var ErrCallbackOfCallback = errors.New("a callback task cannot have callbacks of its own")

// ConflictError is a change the task's current status does not allow. It
// matches model.ErrConflict.
type ConflictError struct {
	// Op is the change refused: "cancel", "reschedule" or "replay".
	Op string
	// Task is the task as it is.
	Task *model.Task
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s task %s: it is %s", e.Op, e.Task.ID, e.Task.Status)
}

func (e *ConflictError) Unwrap() error { return model.ErrConflict }

// QuotaError refuses tasks that would bring the tenant's pending tasks
// (scheduled, retrying or dispatching) over its max_pending_tasks.
type QuotaError struct {
	// Limit is the tenant's max_pending_tasks.
	Limit int
	// Pending is how many it has, counted up to Limit.
	Pending int
	// Adding is how many the refused request would have added.
	Adding int
	// RetryAfter is how long a client should wait before trying again.
	RetryAfter time.Duration
}

// DailyQuotaError refuses tasks that would bring the tenant's tasks created
// today (UTC) over its tasks_per_day.
type DailyQuotaError struct {
	// Limit is the tenant's tasks_per_day.
	Limit int
	// Created is how many tasks it created today.
	Created int
	// Adding is how many the refused request would have added.
	Adding int
}

func (e *DailyQuotaError) Error() string {
	return fmt.Sprintf("daily task quota of %d exceeded: %d created today, %d more asked", e.Limit, e.Created, e.Adding)
}

// RetryAfter is how long from now until the quota starts again, at the
// next UTC midnight.
func (e *DailyQuotaError) RetryAfter(now time.Time) time.Duration {
	return model.NextUTCMidnight(now).Sub(now)
}

// ScheduleQuotaError refuses a schedule that would bring the tenant's
// schedules over its max_schedules.
type ScheduleQuotaError struct {
	// Limit is the tenant's max_schedules.
	Limit int
}

func (e *ScheduleQuotaError) Error() string {
	return fmt.Sprintf("schedule quota of %d reached", e.Limit)
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("pending-task quota of %d exceeded: %d pending, %d more asked", e.Limit, e.Pending, e.Adding)
}

// QuotaRetryAfter is the RetryAfter of a QuotaError. The quota frees as
// tasks finish, which nothing here can predict; a second is what a client
// ingesting as fast as it may should wait.
const QuotaRetryAfter = time.Second
