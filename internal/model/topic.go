package model

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// Topic is a tenant's named set of endpoint URLs. A webhook published to it
// becomes one ordinary task per endpoint, so that each is delivered, retried
// and dead-lettered on its own.
type Topic struct {
	TenantID    uuid.UUID
	Name        string
	Description string
	// Endpoints are in the order a publish makes their tasks.
	Endpoints []TopicEndpoint
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ErrTopicQuota refuses a new topic to a tenant that has as many as it may.
var ErrTopicQuota = errors.New("topic quota reached")

// TopicEndpoint is one URL of a topic, stored as this JSON.
type TopicEndpoint struct {
	URL string `json:"url"`
	// Name is optional ("" for none), unique within the topic.
	Name string `json:"name,omitempty"`
}

// TopicFilter selects a page of a tenant's topics, in name order (byte
// order).
type TopicFilter struct {
	// After, when set, continues a listing after the topic of this name.
	After *string
	Limit int
}

// Publish is one publish to a topic: the parent of the tasks it made, one
// per endpoint the topic had.
type Publish struct {
	ID       uuid.UUID
	TenantID uuid.UUID
	// Topic is the topic's name, which may since have been deleted.
	Topic          string
	IdempotencyKey *string
	RequestHash    []byte
	// TaskCount is how many tasks the publish made.
	TaskCount int
	CreatedAt time.Time
	// Tasks are its tasks in endpoint order: to store, each carrying the
	// publish's id, topic and its endpoint; as read, those retention has
	// not deleted yet, as they are now.
	Tasks []*Task
}

// StatusCounts counts p's tasks by status.
func (p *Publish) StatusCounts() map[TaskStatus]int {
	counts := make(map[TaskStatus]int, 6)
	for _, t := range p.Tasks {
		counts[t.Status]++
	}
	return counts
}

// PublishResult is what storing one publish did.
type PublishResult struct {
	// Created says the publish and all its tasks were stored; their
	// CreatedAt (and the tasks' Status, NextAttemptAt, UpdatedAt) are then
	// filled in.
	Created bool
	// Existing, when the publish was not created, is the publish that
	// already holds its idempotency key, with its tasks as they are now:
	// stored before, or by an earlier publish of the same call. The caller
	// tells a replay from a reused key by comparing RequestHash.
	Existing *Publish
}
