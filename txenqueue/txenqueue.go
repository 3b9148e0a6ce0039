// Package txenqueue creates hookwheel tasks inside an application's own
// Postgres transaction, for applications that share hookwheel's database.
//
// A call to the HTTP API cannot take part in the application's transaction.
// Made before the commit, it leaves a webhook behind when the transaction
// rolls back ("cancel order 42 in 30 minutes" for an order that was never
// stored); made after it, a crash in between loses the webhook. Insert
// writes the task row with the application's own connection, in its
// transaction: "order created" and "cancel it in 30 minutes" commit together
// or not at all, and hookwheel's dispatchers hear of the task when, and only
// if, the transaction commits.
//
// Use it when the application connects to the Postgres database that
// hookwheel's nodes use and a task must share the fate of the application's
// writes. Use the HTTP API (or its Go client, github.com/hookwheel/hookwheel/sdk/go)
// otherwise: from another database, network or language, or when nothing
// needs to commit with the task.
//
// The rules are the API's, applied by the same code: a task the API would
// refuse with 422 is refused with a *ValidationError naming the fields as
// the API's JSON does ("url", "retry.max_attempts", "headers.X-Token"); the
// tenant's max_pending_tasks quota gives a *QuotaError, its tasks_per_day a
// *DailyQuotaError; an idempotency key behaves as the API's Idempotency-Key
// header. None of these refusals runs a statement that fails, so the
// transaction stays usable.
//
// Tasks inserted here count in the tenant's tasks created today (its usage,
// and its tasks_per_day) in the application's transaction, as the API's
// count in theirs: they count if and when it commits. The tasks_per_day
// check is not the API's exact one, though: the API holds the tenant's
// count locked from its check to its commit, which here would hold every
// create of the tenant, the API's included, behind a transaction that may
// stay open for long. This package reads the count without a lock instead,
// so concurrent transactions may together pass the quota by what they
// insert; and each statement counts on one of 16 rows of the tenant's day,
// apart from the API's, that no other open transaction holds (while fewer
// than 16 are open for the tenant), so that open transactions never wait
// for each other nor hold back the API's creates.
//
// A Task goes to one URL: the package does not publish to topics (the
// API's "topic" instead of "url", which stores one task per endpoint with a
// publish that parents them). Insert a Task per endpoint instead, or
// publish through the API.
//
// The package writes the rows hookwheel's nodes read, with hookwheel's own
// statements, so the application must build with the version of this module
// that its nodes run; README.md ("Transactional enqueue") lists the grants
// its database role needs.
package txenqueue

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/store"
)

// Querier is what Insert runs its statements through: pgx.Tx (the usual
// case), *pgx.Conn or *pgxpool.Pool. Through a connection or a pool, each
// statement commits on its own, as the HTTP API's would. Its connections must
// use pgx's default query exec mode, or cache_describe or describe_exec: the
// exec and simple_protocol modes cannot encode the statements' parameters,
// and Insert refuses them.
type Querier = store.Querier

// Config configures a Client. The bounds are a hookwheel node's: set them as
// your nodes' environment sets them, so that Insert accepts what the API
// would.
type Config struct {
	// TenantID is the tenant the tasks belong to: the "id" that
	// POST /v1/admin/tenants and `hookwheel tenant create` answer, or that
	// GET /v1/me answers with one of the tenant's API keys. Required.
	TenantID uuid.UUID

	// MaxBodyBytes is the largest webhook body (HOOKWHEEL_MAX_BODY_BYTES).
	// Default 1 MiB.
	MaxBodyBytes int
	// MaxScheduleAhead is how far ahead a task may be due
	// (HOOKWHEEL_MAX_SCHEDULE_AHEAD). Default 8760h (365 days).
	MaxScheduleAhead time.Duration
	// MaxTimeout is the longest per-attempt timeout a task may ask for
	// (HOOKWHEEL_MAX_TIMEOUT). Default 5m.
	MaxTimeout time.Duration
	// AllowPrivateTargets accepts URLs whose host is a loopback, private or
	// other internal address (HOOKWHEEL_ALLOW_PRIVATE_TARGETS): for
	// development and tests. Default false. Whatever it says, the
	// dispatchers check every address they dial by their own settings.
	AllowPrivateTargets bool
	// TargetAllowCIDRs are internal ranges accepted all the same
	// (HOOKWHEEL_TARGET_ALLOW_CIDRS); the ranges granted to the tenant
	// itself (target_allow_cidrs) are read from the database. Default none.
	TargetAllowCIDRs []netip.Prefix

	// DefaultMaxPendingTasks and DefaultMaxTimeout are the nodes' limits for
	// a tenant without a max_pending_tasks or max_timeout of its own
	// (HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS, HOOKWHEEL_DEFAULT_MAX_TIMEOUT).
	// Default 1,000 and 30s, as the nodes'; a negative value sets no limit
	// (as 0 does in the nodes' environment).
	DefaultMaxPendingTasks int
	DefaultMaxTimeout      time.Duration

	// CommitWithin is how long after an Insert its transaction is expected
	// to commit, at most. Tasks due before the Insert plus the dispatchers'
	// 30 s look-ahead plus CommitWithin are announced to the dispatchers
	// on commit, which makes them arrive on time whenever the commit comes
	// within it (see Client.Insert). A transaction that stays open longer
	// may leave a task due after that bound, yet before its commit plus the
	// look-ahead, to the dispatchers' sweep: sent, but up to 10 s late.
	// Default 5m; a negative value announces every task, for applications
	// that hold transactions open for long.
	//
	// An announcement makes the committing transaction take Postgres's
	// global NOTIFY lock until its commit is flushed, which serialises the
	// commits of announcing transactions; tasks due beyond the window are
	// therefore not announced, and the loaders find them.
	CommitWithin time.Duration

	// Now reads the time: due times (Delay, a RunAt already past) are
	// reckoned from it, and it must agree with the nodes' clocks to well
	// within CommitWithin. Default time.Now.
	Now func() time.Time
}

// DefaultCommitWithin is Config.CommitWithin's default.
const DefaultCommitWithin = 5 * time.Minute

// Client inserts the tasks of one tenant. It holds no connection and is
// safe for concurrent use.
type Client struct {
	tenantID uuid.UUID
	rules    tasks.Rules
	// defaults are the nodes' limits under the tenant's own.
	defaults     model.Limits
	commitWithin time.Duration
	now          func() time.Time
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.TenantID == uuid.Nil {
		return nil, errors.New("txenqueue: Config.TenantID is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = tasks.DefaultMaxBody
	}
	if cfg.MaxScheduleAhead <= 0 {
		cfg.MaxScheduleAhead = tasks.DefaultMaxScheduleAhead
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = tasks.DefaultMaxTimeout
	}
	if cfg.CommitWithin == 0 {
		cfg.CommitWithin = DefaultCommitWithin
	}
	nodeDefaults := model.DefaultNodeLimits()
	defaults := model.Limits{MaxPendingTasks: cfg.DefaultMaxPendingTasks, MaxTimeout: cfg.DefaultMaxTimeout}.
		Over(model.Limits{MaxPendingTasks: nodeDefaults.MaxPendingTasks, MaxTimeout: nodeDefaults.MaxTimeout}).Resolve()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{
		tenantID: cfg.TenantID,
		rules: tasks.Rules{
			MaxBody: cfg.MaxBodyBytes, MaxScheduleAhead: cfg.MaxScheduleAhead,
			DefaultTimeout: tasks.DefaultTimeout, MaxTimeout: cfg.MaxTimeout,
			Guard: netguard.New(netguard.Config{AllowPrivate: cfg.AllowPrivateTargets, AllowCIDRs: cfg.TargetAllowCIDRs}),
		},
		defaults:     defaults,
		commitWithin: cfg.CommitWithin,
		now:          cfg.Now,
	}, nil
}

// Task is a webhook to schedule: the fields of POST /v1/tasks, in Go's
// types. A zero field takes the API's default.
type Task struct {
	// URL is where the webhook goes: an absolute http or https URL.
	// Required.
	URL string
	// Method is GET, POST, PUT, PATCH or DELETE. Default POST.
	Method string
	// Headers are sent with the webhook; hookwheel's own (webhook-*,
	// Hookwheel-*, Idempotency-Key) and those of the connection may not be
	// set.
	Headers map[string]string
	// Body is sent byte for byte. It must be UTF-8 text: encode binary
	// data yourself.
	Body []byte
	// RunAt is when the webhook is due; Delay is the same, counted from
	// the Insert (not from the commit). At most one of them; neither, or a
	// time already past, means at once.
	RunAt time.Time
	Delay time.Duration
	// Timeout bounds each attempt. Default 30s, cut to the tenant's
	// max_timeout.
	Timeout time.Duration
	// MaxAttempts, MinBackoff and MaxBackoff are the retry policy.
	// Default the tenant's, else 10 attempts from 1s up to 1h.
	MaxAttempts int
	MinBackoff  time.Duration
	MaxBackoff  time.Duration
	// Labels are key-value pairs that the API's lists filter on.
	Labels map[string]string
	// OrderingKey, when set, delivers the tenant's tasks with the same key
	// one at a time, in due order (the API's ordering_key).
	OrderingKey string
	// FlowKey, when set, holds the task's sends to the rate and
	// parallelism the tenant set for the key (the API's flow_key).
	FlowKey string
	// Callback and FailureCallback, when set, are told of the task's
	// delivery and of its death by a signed POST of their own (the API's
	// callback and failure_callback).
	Callback, FailureCallback string
	// IdempotencyKey, when set, makes the insert idempotent within the
	// tenant: a second Insert with the same key and the same Task inserts
	// nothing and returns the first one's task, Replayed; with another Task
	// it fails with ErrKeyReused. Keys are shared with the API's
	// Idempotency-Key, but a Task never matches an API request: a key is
	// repeated through the way it was first used.
	IdempotencyKey string
}

// Inserted is a task as stored: the one an Insert created or, when
// Replayed, the one an earlier insert with the same idempotency key
// created, as it is now.
type Inserted struct {
	ID uuid.UUID
	// Status is "scheduled" for a task just inserted; a replayed one may
	// be further on.
	Status      string
	URL         string
	Method      string
	Headers     map[string]string
	Body        []byte
	RunAt       time.Time
	Timeout     time.Duration
	MaxAttempts int
	MinBackoff  time.Duration
	MaxBackoff  time.Duration
	Labels      map[string]string
	// OrderingKey, FlowKey, Callback and FailureCallback are empty when
	// the task has none.
	OrderingKey, FlowKey, Callback, FailureCallback string
	// IdempotencyKey is empty for a task inserted without one.
	IdempotencyKey string
	// CreatedAt is Postgres's time of the inserting transaction's start.
	CreatedAt time.Time
	// Replayed says the task was there already: nothing was inserted.
	Replayed bool
}

// ErrKeyReused refuses a Task whose idempotency key the tenant already used
// for a different task. Nothing was inserted.
var ErrKeyReused = tasks.ErrKeyReused

// ErrUnknownTenant is returned when Config.TenantID names no tenant.
var ErrUnknownTenant = errors.New("txenqueue: no tenant with this id")

// QuotaError refuses tasks that would bring the tenant's pending tasks over
// its max_pending_tasks, as the API's 429 does; RetryAfter says when to try
// again. Nothing was inserted.
type QuotaError = tasks.QuotaError

// DailyQuotaError refuses tasks that would bring the tenant's tasks created
// today (UTC) over its tasks_per_day; RetryAfter(now) says how long until
// the next UTC midnight, when the count starts again. Nothing was inserted.
type DailyQuotaError = tasks.DailyQuotaError

// ValidationError refuses a Task that breaks the API's rules. Nothing was
// inserted.
type ValidationError struct {
	// Fields says what is wrong, field by field, named as in the JSON of
	// POST /v1/tasks.
	Fields []FieldError
}

// FieldError is one thing wrong with a Task.
type FieldError struct {
	// Field is the field's name in the API's JSON: "url", "run_at",
	// "timeout", "retry.max_attempts" (MaxAttempts), "headers.<name>",
	// "labels.<key>", "idempotency_key".
	Field string
	// Message says why, following the field's name: "is required".
	Message string
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + " " + f.Message
	}
	return "txenqueue: invalid task: " + strings.Join(parts, "; ")
}

// Insert stores task through q, normally the application's transaction, and
// returns it as stored. The task is the application's like any row: it
// exists for hookwheel when the transaction commits, and never if it rolls
// back. On an error nothing was inserted, and only an error of Postgres
// itself (not a *ValidationError, *QuotaError, *DailyQuotaError,
// ErrKeyReused or ErrUnknownTenant) leaves the transaction aborted.
//
// An idempotency key that another open transaction has inserted makes
// Insert wait for that transaction to end: it then returns that task,
// Replayed, if the other committed, and inserts its own if it rolled back.
// In a repeatable read or serializable transaction, a key committed by
// another after this one's snapshot is a serialization failure, retried as
// any.
//
// Insert costs one round trip to read the tenant's settings, one to count
// its pending tasks when it has a max_pending_tasks quota, and one for the
// insert; InsertMany pays them once for any number of tasks.
//
// No task can be missed, whenever the transaction commits. A dispatcher's
// loader reads, about once a second, the tasks due in the slice of time
// entering its window (its clock plus the 30 s look-ahead), then moves past
// that slice for good; a task committed later with a due time in a slice
// already read reaches the dispatcher only by announcement: a NOTIFY that
// Insert's own statement issues and that Postgres delivers when the
// transaction commits, and never if it rolls back. The dispatcher arms the
// task it names for its due time, or fires it at once when that has passed:
// a transaction that commits after its task's due time still has it sent
// within milliseconds of the commit. A loader can have passed over a task
// due at T only if its window reached T before the commit C, and a window
// never reaches beyond its clock plus the look-ahead: only if T < C + 30 s.
// Insert announces every task due before its own time I plus 30 s plus
// Config.CommitWithin, which covers all of them whenever C comes within
// CommitWithin of I. A task due later than that is still ahead of every
// loader's window at the commit, so the loaders read it, committed, when
// their window reaches it. (An announcement of a task beyond a dispatcher's
// window is ignored, for the same reason.)
func (c *Client) Insert(ctx context.Context, q Querier, task Task) (*Inserted, error) {
	st, err := store.On(q)
	if err != nil {
		return nil, fmt.Errorf("txenqueue: %w", err)
	}
	tenant, err := c.tenant(ctx, st)
	if err != nil {
		return nil, err
	}
	now := c.now()
	t, err := c.check(&task, tenant, now)
	if err != nil {
		return nil, err
	}
	res, err := tasks.CreateWith(ctx, st, tenant, t, c.notifyBefore(now))
	switch {
	case errors.Is(err, tasks.ErrKeyReused):
		return nil, fmt.Errorf("%w: key %q names task %s", ErrKeyReused, task.IdempotencyKey, res.Task.ID)
	case err != nil:
		return nil, fmt.Errorf("txenqueue: %w", err)
	}
	return inserted(res.Task, res.Replayed), nil
}

// Result is what became of one task of InsertMany: Task, or Err, which is a
// *ValidationError, a *QuotaError, a *DailyQuotaError or ErrKeyReused.
type Result struct {
	Task *Inserted
	Err  error
}

// InsertMany stores tasks through q in one statement, as
// POST /v1/tasks/batch does: results[i] is what became of tasks[i]. Each
// task is inserted, replayed or refused on its own; the quota admits tasks
// in order, refusing those that do not fit. The error is for the call as a
// whole: nothing was inserted. To have all of the tasks or none, roll the
// transaction back when a result carries an Err.
func (c *Client) InsertMany(ctx context.Context, q Querier, list []Task) ([]Result, error) {
	st, err := store.On(q)
	if err != nil {
		return nil, fmt.Errorf("txenqueue: %w", err)
	}
	tenant, err := c.tenant(ctx, st)
	if err != nil {
		return nil, err
	}
	now := c.now()
	results := make([]Result, len(list))
	valid := make([]*model.Task, 0, len(list))
	at := make([]int, 0, len(list)) // at[j]: the index in list of valid[j]
	for i := range list {
		t, err := c.check(&list[i], tenant, now)
		if err != nil {
			results[i].Err = err
			continue
		}
		valid = append(valid, t)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return results, nil
	}
	created, err := tasks.CreateBatchWith(ctx, st, tenant, valid, c.notifyBefore(now))
	if err != nil {
		return nil, fmt.Errorf("txenqueue: %w", err)
	}
	for j, res := range created {
		i := at[j]
		switch {
		case errors.Is(res.Err, tasks.ErrKeyReused):
			results[i].Err = fmt.Errorf("%w: key %q names task %s", ErrKeyReused, list[i].IdempotencyKey, res.Task.ID)
		case res.Err != nil:
			results[i].Err = res.Err
		default:
			results[i].Task = inserted(res.Task, res.Replayed)
		}
	}
	return results, nil
}

// notifyBefore is the bound on due times below which a task inserted at
// now is announced on commit (see Insert).
func (c *Client) notifyBefore(now time.Time) time.Time {
	if c.commitWithin < 0 {
		return time.Date(9999, time.December, 31, 0, 0, 0, 0, time.UTC) // every task
	}
	return now.Add(model.DefaultLookahead + c.commitWithin)
}

// tenant reads the settings of the client's tenant through st, in the
// application's transaction.
func (c *Client) tenant(ctx context.Context, st store.TxStore) (*model.Tenant, error) {
	tenant, err := st.GetTenantSettings(ctx, c.tenantID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil, fmt.Errorf("%w: %s", ErrUnknownTenant, c.tenantID)
	case err != nil:
		return nil, fmt.Errorf("txenqueue: %w", err)
	}
	tenant.Limits = tenant.LimitOverrides.Resolve(tenant.PlanLimits, c.defaults)
	return tenant, nil
}

// check turns a Task into the task to store, or a *ValidationError, by the
// API's rules.
func (c *Client) check(task *Task, tenant *model.Tenant, now time.Time) (*model.Task, error) {
	req := &tasks.Request{Headers: task.Headers, Body: task.Body, Labels: task.Labels}
	if task.URL != "" {
		req.URL = &task.URL
	}
	if task.OrderingKey != "" {
		req.OrderingKey = &task.OrderingKey
	}
	if task.FlowKey != "" {
		req.FlowKey = &task.FlowKey
	}
	if task.Callback != "" {
		req.Callback = &task.Callback
	}
	if task.FailureCallback != "" {
		req.FailureCallback = &task.FailureCallback
	}
	if task.Method != "" {
		req.Method = &task.Method
	}
	if !task.RunAt.IsZero() {
		req.RunAt = &task.RunAt
	}
	if task.Delay != 0 {
		req.Delay = &task.Delay
	}
	if task.Timeout != 0 {
		req.Timeout = &task.Timeout
	}
	if task.MaxAttempts != 0 || task.MinBackoff != 0 || task.MaxBackoff != 0 {
		req.Retry = &tasks.RetryRequest{}
		if task.MaxAttempts != 0 {
			req.Retry.MaxAttempts = &task.MaxAttempts
		}
		if task.MinBackoff != 0 {
			req.Retry.MinBackoff = &task.MinBackoff
		}
		if task.MaxBackoff != 0 {
			req.Retry.MaxBackoff = &task.MaxBackoff
		}
	}
	if task.IdempotencyKey != "" {
		req.IdempotencyKey = &task.IdempotencyKey
	}
	var fe tasks.FieldErrors
	t := c.rules.Check(&fe, req, tenant, now)
	if t == nil {
		ve := &ValidationError{Fields: make([]FieldError, len(fe))}
		for i, f := range fe {
			ve.Fields[i] = FieldError(f)
		}
		return nil, ve
	}
	if t.IdempotencyKey != nil {
		t.RequestHash = requestHash(task)
	}
	return t, nil
}

// requestHash fingerprints what a Task asks for, so that a repeat with the
// same idempotency key can be told from a different task reusing it: the
// fields as given (a Delay, not the due time it resolved to), in a fixed
// encoding (maps in key order, times in UTC), under a name of its own so
// that no API request hashes alike.
func requestHash(t *Task) []byte {
	form := struct {
		Form        string            `json:"form"`
		URL         string            `json:"url"`
		Method      string            `json:"method"`
		Headers     map[string]string `json:"headers"`
		Body        []byte            `json:"body"`
		RunAt       *time.Time        `json:"run_at"`
		Delay       time.Duration     `json:"delay"`
		Timeout     time.Duration     `json:"timeout"`
		MaxAttempts int               `json:"max_attempts"`
		MinBackoff  time.Duration     `json:"min_backoff"`
		MaxBackoff  time.Duration     `json:"max_backoff"`
		Labels      map[string]string `json:"labels"`
		// Added later: omitted when empty, so that a task stored before
		// they existed hashes as it did.
		OrderingKey     string `json:"ordering_key,omitempty"`
		Callback        string `json:"callback,omitempty"`
		FailureCallback string `json:"failure_callback,omitempty"`
		FlowKey         string `json:"flow_key,omitempty"`
	}{
		Form: "txenqueue.Task/1", URL: t.URL, Method: t.Method, Headers: t.Headers, Body: t.Body,
		Delay: t.Delay, Timeout: t.Timeout, MaxAttempts: t.MaxAttempts, MinBackoff: t.MinBackoff,
		MaxBackoff: t.MaxBackoff, Labels: t.Labels,
		OrderingKey: t.OrderingKey, Callback: t.Callback, FailureCallback: t.FailureCallback, FlowKey: t.FlowKey,
	}
	if !t.RunAt.IsZero() {
		utc := t.RunAt.UTC()
		form.RunAt = &utc
	}
	b, _ := json.Marshal(form) // nothing in it fails to marshal
	sum := sha256.Sum256(b)
	return sum[:]
}

// inserted is the Inserted view of a stored task.
func inserted(t *model.Task, replayed bool) *Inserted {
	out := &Inserted{
		ID: t.ID, Status: string(t.Status), URL: t.URL, Method: t.Method, Headers: maps.Clone(t.Headers),
		Body: slices.Clone(t.Body), RunAt: t.RunAt, Timeout: t.Timeout, MaxAttempts: t.MaxAttempts,
		MinBackoff: t.MinBackoff, MaxBackoff: t.MaxBackoff, Labels: maps.Clone(t.Labels),
		CreatedAt: t.CreatedAt, Replayed: replayed,
	}
	if t.IdempotencyKey != nil {
		out.IdempotencyKey = *t.IdempotencyKey
	}
	for _, f := range []struct {
		from *string
		to   *string
	}{{t.OrderingKey, &out.OrderingKey}, {t.FlowKey, &out.FlowKey}, {t.Callback, &out.Callback}, {t.FailureCallback, &out.FailureCallback}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return out
}
