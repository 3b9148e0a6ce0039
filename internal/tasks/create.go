package tasks

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// Created is the outcome of a create that did not fail.
type Created struct {
	// Task is the task created or, when Replayed, the task an earlier request
	// with the same idempotency key created, as it is now.
	Task *model.Task
	// Replayed says the request repeated an earlier one: nothing was stored.
	Replayed bool
}

// Create stores one task of tenant, due at t.RunAt. It gives t its id and
// tenant. A task carrying an idempotency key the tenant already used is not
// stored: the earlier task is returned, Replayed, when t.RequestHash matches
// its own, and with ErrKeyReused when it does not. Over the tenant's
// pending-task quota it fails with a *QuotaError, unless its idempotency key
// names a task the tenant already has (a client retrying a create that
// succeeded gets its task back, not a refusal). Past the tenant's
// tasks_per_day it fails with a *DailyQuotaError, with the same exception;
// that check is exact across nodes (Creator.WithTasksCreated).
//
// A task due within the look-ahead window is announced on commit by the
// store and told to the local dispatcher (see announcement).
func (s *Service) Create(ctx context.Context, tenant *model.Tenant, t *model.Task) (Created, error) {
	notifyBefore := s.dueSoonBefore(s.clock.Now())
	res, err := CreateWith(ctx, s.store, tenant, t, notifyBefore)
	if err != nil || res.Replayed {
		return res, err
	}
	a := s.committed(notifyBefore)
	a.task(t.ID, t.RunAt)
	a.send(ctx)
	return res, nil
}

// Creator is what creating tasks needs of the store: *store.DB is one, and
// so is a store.TxStore, which runs the statements in a caller's
// transaction.
type Creator interface {
	model.CreateStore
	// WithTasksCreated runs fn with the tenant's count of tasks created
	// today and st to create through, for the tasks_per_day check:
	// *store.DB in a transaction of its own, holding the count's row lock
	// until it commits what fn stored, so that the check is exact; a
	// store.TxStore in the caller's transaction, reading the count without
	// a lock (see package txenqueue).
	WithTasksCreated(ctx context.Context, tenantID uuid.UUID, fn func(st model.CreateStore, created int) error) error
}

// carryTrace gives t the trace context of ctx's span, unless it has one:
// the API's request span, which continues the create request's
// traceparent, or an application's own span around a transactional
// enqueue. Its webhooks are then sent as children of it (package tracing).
func carryTrace(ctx context.Context, t *model.Task) {
	if t.TraceParent == "" {
		t.TraceParent, t.TraceState = tracing.Carried(ctx)
	}
}

// CreateWith is Create through st, without telling anyone of the task but
// by the notification st's insert sends on commit when the task falls due
// before notifyBefore. The Service calls it and then announces; a program
// inserting tasks in its own transaction calls it with st bound to that
// transaction, and decides notifyBefore for a commit that may come long
// after (see package txenqueue).
func CreateWith(ctx context.Context, st Creator, tenant *model.Tenant, t *model.Task, notifyBefore time.Time) (Created, error) {
	if t.Topic != nil {
		return Created{}, fmt.Errorf("create task: it names topic %q: publish it instead", *t.Topic)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Created{}, fmt.Errorf("create task id: %w", err)
	}
	t.ID, t.TenantID = id, tenant.ID
	carryTrace(ctx, t)
	perDay := tenant.Limits.TasksPerDay
	if perDay <= 0 {
		return createOne(ctx, st, tenant, t, notifyBefore)
	}
	var res Created
	err = st.WithTasksCreated(ctx, tenant.ID, func(tx model.CreateStore, created int) error {
		if created >= perDay {
			held, err := keyHeld(ctx, t.IdempotencyKey, tenant.ID, tx.HasIdempotencyKey)
			if err != nil {
				return err
			}
			if !held {
				return &DailyQuotaError{Limit: perDay, Created: created, Adding: 1}
			}
		}
		res, err = createOne(ctx, tx, tenant, t, notifyBefore)
		return err
	})
	return res, err
}

// createOne is CreateWith past the daily quota: the pending-task quota,
// then the insert, through st.
func createOne(ctx context.Context, st model.CreateStore, tenant *model.Tenant, t *model.Task, notifyBefore time.Time) (Created, error) {
	if err := checkQuota(ctx, st, tenant, 1, t.IdempotencyKey); err != nil {
		return Created{}, err
	}
	existing, created, err := st.InsertTask(ctx, t, t.RunAt.Before(notifyBefore))
	if err != nil {
		return Created{}, fmt.Errorf("create task: %w", err)
	}
	if !created {
		if !bytes.Equal(existing.RequestHash, t.RequestHash) {
			return Created{Task: existing}, ErrKeyReused
		}
		return Created{Task: existing, Replayed: true}, nil
	}
	return Created{Task: t}, nil
}

// BatchResult is what became of one task of a batch.
type BatchResult struct {
	// Created is the task created or replayed; for a task that was a
	// publish (its Topic set), Publish is the publish instead, as Publish
	// returns it, and Created.Task is nil.
	Created
	Publish *model.Publish
	// Err, when set, is why the task was not stored: a *QuotaError,
	// ErrKeyReused (Task, or Publish, is then the one holding the key), or
	// for a publish ErrNoSuchTopic, ErrTopicEmpty or a *FanoutError.
	Err error
}

// CreateBatch stores tasks of tenant together, giving each its id and
// tenant; results[i] is what became of tasks[i]. A task with its Topic set
// is published to that topic, as by Publish; the others are created, as by
// Create. Each is created, replayed or refused for its key as by Create or
// Publish.
//
// The publishes together make at most Config.MaxFanoutTasks tasks and store
// at most Config.MaxFanoutBytes of bodies, each body once per endpoint: one
// that would pass either is refused with a *FanoutError, and the later ones
// are still considered. The pending-task quota admits tasks in order, a
// publish counting one per endpoint and fitting whole or not at all: the
// first that does not fit and all those after it are refused with a
// *QuotaError each and not stored; then tasks_per_day admits the rest the
// same way, refusing with a *DailyQuotaError, exactly (under the lock of
// Creator.WithTasksCreated, so concurrent batches never admit more than the
// quota together). The idempotency exception of Create does not apply
// here: a batch is counted as sent (though a repeat, storing nothing, is
// not counted as created).
//
// The error is for the batch as a whole, which the store takes all or
// nothing in one transaction: none of the tasks is then stored.
func (s *Service) CreateBatch(ctx context.Context, tenant *model.Tenant, tasks []*model.Task) ([]BatchResult, error) {
	notifyBefore := s.dueSoonBefore(s.clock.Now())
	pub := &publishing{store: s.store, budget: s.batchFanoutBudget()}
	results, err := createBatch(ctx, s.store, pub, tenant, tasks, notifyBefore)
	if err != nil {
		return nil, err
	}
	a := s.committed(notifyBefore)
	for _, res := range results {
		switch {
		case res.Err != nil || res.Replayed:
		case res.Publish != nil:
			for _, t := range res.Publish.Tasks {
				a.task(t.ID, t.RunAt)
			}
		default:
			a.task(res.Task.ID, res.Task.RunAt)
		}
	}
	a.send(ctx)
	return results, nil
}

// CreateBatchWith is CreateBatch through st, without telling anyone of the
// tasks but by the notification st's insert sends on commit for those due
// before notifyBefore (as CreateWith). It does not publish to topics: a
// task with its Topic set fails the whole call.
func CreateBatchWith(ctx context.Context, st Creator, tenant *model.Tenant, tasks []*model.Task, notifyBefore time.Time) ([]BatchResult, error) {
	return createBatch(ctx, st, nil, tenant, tasks, notifyBefore)
}

// Publisher is what publishing to topics needs of the store besides what
// creating tasks does: *store.DB is one.
type Publisher interface {
	Creator
	GetTopics(ctx context.Context, tenantID uuid.UUID, names []string) (map[string]*model.Topic, error)
}

// publishing is how a batch publishes its tasks that name a topic: through
// store, within budget.
type publishing struct {
	store  Publisher
	budget *fanoutBudget
}

// createBatch is CreateBatch and CreateBatchWith: the tasks stored through
// st, and the publishes among them through pub, which is nil where the
// caller cannot publish (and a task naming a topic then fails the call).
// It announces nothing but through the store's notifications on commit.
func createBatch(ctx context.Context, st Creator, pub *publishing, tenant *model.Tenant, tasks []*model.Task,
	notifyBefore time.Time,
) ([]BatchResult, error) {
	results := make([]BatchResult, len(tasks))
	topics, err := batchTopics(ctx, pub, tenant.ID, tasks)
	if err != nil {
		return nil, err
	}
	// weights[i] is how many tasks tasks[i] stores: 1, its topic's
	// endpoints for a publish (pubs[i]), or 0 once refused.
	weights := make([]int, len(tasks))
	pubs := make([]*model.Publish, len(tasks))
	total := 0
	for i, t := range tasks {
		// Before a publish copies t for each endpoint.
		carryTrace(ctx, t)
		if t.Topic == nil {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("create task id: %w", err)
			}
			t.ID, t.TenantID = id, tenant.ID
			weights[i] = 1
			total++
			continue
		}
		topic := topics[*t.Topic]
		switch {
		case topic == nil:
			results[i].Err = ErrNoSuchTopic
			continue
		case len(topic.Endpoints) == 0:
			results[i].Err = ErrTopicEmpty
			continue
		}
		if err := pub.budget.take(topic, t); err != nil {
			results[i].Err = err
			continue
		}
		p, err := newPublish(tenant, t, topic)
		if err != nil {
			return nil, err
		}
		pubs[i], weights[i] = p, len(p.Tasks)
		total += weights[i]
	}
	perDay := tenant.Limits.TasksPerDay
	if perDay <= 0 || total == 0 {
		err = storeBatch(ctx, st, tenant, tasks, weights, pubs, total, -1, notifyBefore, results)
	} else {
		err = st.WithTasksCreated(ctx, tenant.ID, func(tx model.CreateStore, created int) error {
			return storeBatch(ctx, tx, tenant, tasks, weights, pubs, total, created, notifyBefore, results)
		})
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}

// storeBatch is the rest of createBatch, through st: the quotas, each
// refusing the tasks that do not fit (createdToday is the tenant's count of
// tasks created today for its tasks_per_day, -1 when it has none), then
// the insert of the others, whose outcomes it writes into results.
func storeBatch(ctx context.Context, st model.CreateStore, tenant *model.Tenant, tasks []*model.Task, weights []int,
	pubs []*model.Publish, total, createdToday int, notifyBefore time.Time, results []BatchResult,
) error {
	var err error
	if quota := tenant.Limits.MaxPendingTasks; quota > 0 && total > 0 {
		current, err := st.CountPendingTasks(ctx, tenant.ID, quota)
		if err != nil {
			return fmt.Errorf("count pending tasks of tenant %s: %w", tenant.ID, err)
		}
		total = refuseBeyond(weights, results, max(0, quota-current),
			&QuotaError{Limit: quota, Pending: current, Adding: total, RetryAfter: QuotaRetryAfter})
	}
	if perDay := tenant.Limits.TasksPerDay; createdToday >= 0 && total > 0 {
		refuseBeyond(weights, results, max(0, perDay-createdToday),
			&DailyQuotaError{Limit: perDay, Created: createdToday, Adding: total})
	}

	// plain are the tasks to create, plainAt[k] the index of plain[k] in
	// tasks; likewise the publishes.
	var (
		plain, plainAt = make([]*model.Task, 0, len(tasks)), make([]int, 0, len(tasks))
		publishes      []*model.Publish
		publishAt      []int
		taskResults    []model.InsertResult
		publishResults []model.PublishResult
	)
	for i, w := range weights {
		switch {
		case w == 0:
		case pubs[i] != nil:
			publishes, publishAt = append(publishes, pubs[i]), append(publishAt, i)
		default:
			plain, plainAt = append(plain, tasks[i]), append(plainAt, i)
		}
	}
	if len(publishes) == 0 {
		taskResults, err = st.InsertTasks(ctx, plain, notifyBefore)
	} else {
		publishResults, taskResults, err = st.InsertPublishes(ctx, publishes, plain, notifyBefore)
	}
	if err != nil {
		return fmt.Errorf("create %d tasks and %d publishes: %w", len(plain), len(publishes), err)
	}
	for k, res := range taskResults {
		i, t := plainAt[k], plain[k]
		switch {
		case res.Created:
			results[i].Task = t
		case bytes.Equal(res.Existing.RequestHash, t.RequestHash):
			results[i].Task, results[i].Replayed = res.Existing, true
		default:
			results[i].Task, results[i].Err = res.Existing, ErrKeyReused
		}
	}
	for k, res := range publishResults {
		i, p := publishAt[k], publishes[k]
		switch {
		case res.Created:
			results[i].Publish = p
		case bytes.Equal(res.Existing.RequestHash, p.RequestHash):
			results[i].Publish, results[i].Replayed = res.Existing, true
		default:
			results[i].Publish, results[i].Err = res.Existing, ErrKeyReused
		}
	}
	return nil
}

// refuseBeyond admits the tasks of a batch in order while they fit in room,
// a publish (its weight, its endpoints) whole or not at all: the first that
// does not fit and every one after it get refused as their error and weight
// 0. It returns the weight admitted.
func refuseBeyond(weights []int, results []BatchResult, room int, refused error) int {
	used, full := 0, false
	for i, w := range weights {
		if w == 0 {
			continue
		}
		if full = full || used+w > room; full {
			results[i].Err, weights[i] = refused, 0
			continue
		}
		used += w
	}
	return used
}

// batchTopics reads the topics the tasks of a batch are published to, by
// name, in one query through pub; names the tenant has no topic of are left
// out. Without pub, a task naming a topic is an error.
func batchTopics(ctx context.Context, pub *publishing, tenantID uuid.UUID, tasks []*model.Task) (map[string]*model.Topic, error) {
	var names []string
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.Topic != nil && !seen[*t.Topic] {
			seen[*t.Topic] = true
			names = append(names, *t.Topic)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if pub == nil {
		return nil, fmt.Errorf("create tasks: publishing to topic %q is not possible here", names[0])
	}
	topics, err := pub.store.GetTopics(ctx, tenantID, names)
	if err != nil {
		return nil, fmt.Errorf("read the topics of a batch: %w", err)
	}
	return topics, nil
}

// checkQuota refuses, with a *QuotaError, n more tasks that would bring the
// tenant's pending tasks above its max_pending_tasks. key, when set, is the
// idempotency key of the one task asked for: a key the tenant already used
// creates nothing, so it passes.
//
// Cost: nothing for a tenant without the quota; otherwise one query counting
// the tenant's pending tasks up to the quota (an index-only range scan, about
// 0.35 µs per pending task, so at most a few milliseconds for a quota of
// 10,000). It checks, it does not reserve: concurrent requests of one tenant
// may each pass and together overshoot the quota by what they add.
func checkQuota(ctx context.Context, st model.CreateStore, tenant *model.Tenant, n int, key *string) error {
	return checkQuotaKeyed(ctx, st, tenant, n, key, st.HasIdempotencyKey)
}

// keyHeld reports whether key, when set, is one the tenant used already,
// as held tells (a task's key, or a publish's): a request repeating it
// stores nothing, so no quota stands in its way.
func keyHeld(ctx context.Context, key *string, tenantID uuid.UUID,
	held func(ctx context.Context, tenantID uuid.UUID, key string) (bool, error),
) (bool, error) {
	if key == nil || *key == "" {
		return false, nil
	}
	ok, err := held(ctx, tenantID, *key)
	if err != nil {
		return false, fmt.Errorf("look up idempotency key of tenant %s: %w", tenantID, err)
	}
	return ok, nil
}

// checkQuotaKeyed is checkQuota for a request whose key, when set, is one
// held tells whether the tenant used: a task's, or a publish's.
func checkQuotaKeyed(ctx context.Context, st model.CreateStore, tenant *model.Tenant, n int, key *string,
	held func(ctx context.Context, tenantID uuid.UUID, key string) (bool, error),
) error {
	quota := tenant.Limits.MaxPendingTasks
	if quota <= 0 || n <= 0 {
		return nil
	}
	pending, err := st.CountPendingTasks(ctx, tenant.ID, quota)
	if err != nil {
		return fmt.Errorf("count pending tasks of tenant %s: %w", tenant.ID, err)
	}
	if pending+n <= quota {
		return nil
	}
	if exists, err := keyHeld(ctx, key, tenant.ID, held); err != nil || exists {
		return err
	}
	return &QuotaError{Limit: quota, Pending: pending, Adding: n, RetryAfter: QuotaRetryAfter}
}

// Pending counts the tenant's pending tasks (scheduled, retrying or
// dispatching), exactly: it costs in proportion to them.
func (s *Service) Pending(ctx context.Context, tenantID uuid.UUID) (int, error) {
	n, err := s.store.CountPendingTasks(ctx, tenantID, 0)
	if err != nil {
		return 0, fmt.Errorf("count pending tasks of tenant %s: %w", tenantID, err)
	}
	return n, nil
}
