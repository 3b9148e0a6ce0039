package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Topics. A topic is a tenant's named set of endpoint URLs; a webhook
// published to it becomes one ordinary task per endpoint, stored with the
// publish that parents them in one transaction, so that nothing past the
// store knows of topics: each task is claimed, sent, retried, broken off by
// its target's breaker and dead-lettered on its own. The endpoints are read
// when the publish is made; a later change to the topic changes no task.

// The bounds of topics. A topic's name appears in URLs and on command
// lines; its endpoints are read whole by every publish, and each makes a
// task.
const (
	MaxTopicNameLen     = 100
	MaxTopicDescription = 500
	MaxTopicEndpoints   = 100
	// MaxTopics is the most topics a tenant may have.
	MaxTopics = 1000
)

// The bounds of what one call's publishes store, the defaults of
// Config.MaxFanoutBytes and MaxFanoutTasks.
const (
	DefaultMaxFanoutBytes = 32 << 20
	DefaultMaxFanoutTasks = 10_000
)

// ValidTopicName reports whether name may name a topic (or a topic's
// endpoint): 1 to MaxTopicNameLen characters of A-Z, a-z, 0-9, '.', '_'
// and '-', starting with a letter or a digit.
func ValidTopicName(name string) bool {
	if name == "" || len(name) > MaxTopicNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// TopicNameProblem says what is wrong with name as the name of a topic (or
// of a topic's endpoint), or "" when nothing is.
func TopicNameProblem(name string) string {
	if ValidTopicName(name) {
		return ""
	}
	return fmt.Sprintf("must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or a digit",
		MaxTopicNameLen)
}

var (
	// ErrNoSuchTopic refuses a publish to a topic the tenant does not have.
	ErrNoSuchTopic = errors.New("no such topic")
	// ErrTopicEmpty refuses a publish to a topic without endpoints.
	ErrTopicEmpty = errors.New("topic has no endpoints")
)

// TopicQuotaError refuses a topic that would bring the tenant's topics over
// MaxTopics.
type TopicQuotaError struct {
	Limit int
}

func (e *TopicQuotaError) Error() string {
	return fmt.Sprintf("topic quota of %d reached", e.Limit)
}

// FanoutError refuses a publish that would store more than a call may: its
// body once per endpoint past Config.MaxFanoutBytes, or, in a batch, tasks
// past Config.MaxFanoutTasks. Field is the request field at fault ("body"
// or "topic"), Message why, for the caller.
type FanoutError struct {
	Field   string
	Message string
}

func (e *FanoutError) Error() string { return e.Field + " " + e.Message }

// Published is the outcome of a publish that did not fail.
type Published struct {
	// Publish is the publish made, with its tasks, or, when Replayed, the
	// publish an earlier request with the same idempotency key made, with
	// its tasks as they are now.
	Publish *model.Publish
	// Replayed says the request repeated an earlier one: nothing was stored.
	Replayed bool
}

// Publish publishes template to its topic (template.Topic): one task per
// endpoint of the tenant's topic, each template with the endpoint's URL,
// stored with their publish in one transaction. A topic the tenant does
// not have is ErrNoSuchTopic, one without endpoints ErrTopicEmpty, a body
// too large for the endpoints a *FanoutError.
//
// Idempotency and the quotas (pending tasks, tasks per day) work as in
// Create, the quotas counting every task: a publish carrying a key the tenant used for a
// publish already is not stored, and the earlier one is returned, Replayed,
// when the request hashes match, and with ErrKeyReused when they do not.
// Publishes' keys are apart from tasks'. The tasks due within the
// look-ahead window are announced as Create announces one.
func (s *Service) Publish(ctx context.Context, tenant *model.Tenant, template *model.Task) (Published, error) {
	if template.Topic == nil {
		return Published{}, errors.New("publish: the task names no topic")
	}
	topic, err := s.store.GetTopic(ctx, tenant.ID, *template.Topic)
	if errors.Is(err, model.ErrNotFound) {
		return Published{}, ErrNoSuchTopic
	}
	if err != nil {
		return Published{}, fmt.Errorf("publish: %w", err)
	}
	if len(topic.Endpoints) == 0 {
		return Published{}, ErrTopicEmpty
	}
	budget := s.fanoutBudget()
	if err := budget.take(topic, template); err != nil {
		return Published{}, err
	}
	// Every endpoint's task continues the publish's trace.
	carryTrace(ctx, template)
	pub, err := newPublish(tenant, template, topic)
	if err != nil {
		return Published{}, err
	}
	notifyBefore := s.dueSoonBefore(s.clock.Now())
	var stored []model.PublishResult
	insert := func(st model.CreateStore) error {
		if err := checkQuotaKeyed(ctx, st, tenant, len(pub.Tasks), pub.IdempotencyKey, st.HasPublishKey); err != nil {
			return err
		}
		stored, _, err = st.InsertPublishes(ctx, []*model.Publish{pub}, nil, notifyBefore)
		if err != nil {
			return fmt.Errorf("publish to topic %q: %w", topic.Name, err)
		}
		return nil
	}
	if perDay := tenant.Limits.TasksPerDay; perDay <= 0 {
		err = insert(s.store)
	} else {
		err = s.store.WithTasksCreated(ctx, tenant.ID, func(tx model.CreateStore, created int) error {
			if created+len(pub.Tasks) > perDay {
				held, err := keyHeld(ctx, pub.IdempotencyKey, tenant.ID, tx.HasPublishKey)
				if err != nil {
					return err
				}
				if !held {
					return &DailyQuotaError{Limit: perDay, Created: created, Adding: len(pub.Tasks)}
				}
			}
			return insert(tx)
		})
	}
	if err != nil {
		return Published{}, err
	}
	if res := stored[0]; !res.Created {
		if !bytes.Equal(res.Existing.RequestHash, pub.RequestHash) {
			return Published{Publish: res.Existing}, ErrKeyReused
		}
		return Published{Publish: res.Existing, Replayed: true}, nil
	}
	a := s.committed(notifyBefore)
	for _, t := range pub.Tasks {
		a.task(t.ID, t.RunAt)
	}
	a.send(ctx)
	return Published{Publish: pub}, nil
}

// newPublish makes the publish of template to topic: a new id, and one task
// per endpoint, in endpoint order, each a copy of template with the
// endpoint's URL and name, the publish's id and topic, and no idempotency
// key of its own (the publish holds it). The ids are UUIDv7s taken one
// after the other, so that id order is endpoint order.
func newPublish(tenant *model.Tenant, template *model.Task, topic *model.Topic) (*model.Publish, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("create publish id: %w", err)
	}
	pub := &model.Publish{ID: id, TenantID: tenant.ID, Topic: topic.Name,
		IdempotencyKey: template.IdempotencyKey, RequestHash: template.RequestHash,
		TaskCount: len(topic.Endpoints), Tasks: make([]*model.Task, 0, len(topic.Endpoints))}
	name := topic.Name
	for _, ep := range topic.Endpoints {
		t := *template
		if t.ID, err = uuid.NewV7(); err != nil {
			return nil, fmt.Errorf("create task id: %w", err)
		}
		t.TenantID, t.URL = tenant.ID, ep.URL
		t.IdempotencyKey, t.RequestHash = nil, nil
		t.PublishID, t.Topic, t.EndpointName = &pub.ID, &name, nil
		if ep.Name != "" {
			endpoint := ep.Name
			t.EndpointName = &endpoint
		}
		pub.Tasks = append(pub.Tasks, &t)
	}
	return pub, nil
}

// fanoutBudget is what the publishes of one call may still store.
type fanoutBudget struct {
	bytes, tasks int64
	maxBytes     int64
	maxTasks     int64
	batch        bool
}

// fanoutBudget starts the budget of a single publish, which its topic's
// bound on endpoints already keeps to few tasks.
func (s *Service) fanoutBudget() *fanoutBudget {
	return &fanoutBudget{bytes: s.maxFanoutBytes, maxBytes: s.maxFanoutBytes}
}

// batchFanoutBudget starts the budget of a batch's publishes together.
func (s *Service) batchFanoutBudget() *fanoutBudget {
	return &fanoutBudget{bytes: s.maxFanoutBytes, maxBytes: s.maxFanoutBytes,
		tasks: int64(s.maxFanoutTasks), maxTasks: int64(s.maxFanoutTasks), batch: true}
}

// take takes from the budget the publish of template to topic, or refuses
// it with a *FanoutError, taking nothing.
func (b *fanoutBudget) take(topic *model.Topic, template *model.Task) error {
	n := int64(len(topic.Endpoints))
	size := int64(len(template.Body)) * n
	if b.batch && n > b.tasks {
		return &FanoutError{Field: "topic", Message: fmt.Sprintf(
			"has %d endpoints, and this batch's publishes may make at most %d tasks together (%d left); publish in another call",
			n, b.maxTasks, b.tasks)}
	}
	if size > b.bytes {
		if b.batch {
			return &FanoutError{Field: "body", Message: fmt.Sprintf(
				"is stored once per endpoint of topic %q (%d × %d bytes), and this batch's publishes may store at most %d bytes together (%d left); publish in another call",
				topic.Name, n, len(template.Body), b.maxBytes, b.bytes)}
		}
		return &FanoutError{Field: "body", Message: fmt.Sprintf(
			"is stored once per endpoint of topic %q (%d × %d bytes), and a publish may store at most %d bytes; send a smaller body, or publish to fewer endpoints",
			topic.Name, n, len(template.Body), b.maxBytes)}
	}
	b.bytes -= size
	b.tasks -= n
	return nil
}

// GetPublish reads one of the tenant's publishes with its tasks as they are
// now: model.ErrNotFound when it has none with this id.
func (s *Service) GetPublish(ctx context.Context, tenantID, id uuid.UUID) (*model.Publish, error) {
	p, err := s.store.GetPublish(ctx, tenantID, id)
	if err != nil {
		return nil, fmt.Errorf("get publish %s: %w", id, err)
	}
	return p, nil
}

// PutTopic creates the tenant's topic t.Name or replaces its description and
// endpoints, already valid, and says which. A new topic past MaxTopics is a
// *TopicQuotaError. The change is audited as actor's.
func (s *Service) PutTopic(ctx context.Context, tenant *model.Tenant, t *model.Topic, actor string) (created bool, err error) {
	t.TenantID = tenant.ID
	created, err = s.store.PutTopic(ctx, t, MaxTopics, func(created bool) *model.AuditEntry {
		action := AuditTopicUpdated
		if created {
			action = AuditTopicCreated
		}
		return auditEntry(tenant.ID, actor, action, topicDetail(t))
	})
	if errors.Is(err, model.ErrTopicQuota) {
		return false, &TopicQuotaError{Limit: MaxTopics}
	}
	if err != nil {
		return false, fmt.Errorf("put topic %q: %w", t.Name, err)
	}
	return created, nil
}

// GetTopic reads one of the tenant's topics: model.ErrNotFound when it has
// none of that name.
func (s *Service) GetTopic(ctx context.Context, tenantID uuid.UUID, name string) (*model.Topic, error) {
	t, err := s.store.GetTopic(ctx, tenantID, name)
	if err != nil {
		return nil, fmt.Errorf("get topic %q: %w", name, err)
	}
	return t, nil
}

// ListTopics reads a page of the tenant's topics, in name order.
func (s *Service) ListTopics(ctx context.Context, tenantID uuid.UUID, f model.TopicFilter) ([]*model.Topic, error) {
	ts, err := s.store.ListTopics(ctx, tenantID, f)
	if err != nil {
		return nil, fmt.Errorf("list topics of tenant %s: %w", tenantID, err)
	}
	return ts, nil
}

// DeleteTopic deletes one of the tenant's topics and returns it as it was:
// model.ErrNotFound when it has none of that name. The tasks published to
// it are left as they are. The change is audited as actor's.
func (s *Service) DeleteTopic(ctx context.Context, tenantID uuid.UUID, name string, actor string) (*model.Topic, error) {
	t, err := s.store.DeleteTopic(ctx, tenantID, name, auditEntry(tenantID, actor, AuditTopicDeleted, map[string]any{"topic": name}))
	if err != nil {
		return nil, fmt.Errorf("delete topic %q: %w", name, err)
	}
	return t, nil
}
