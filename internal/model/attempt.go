package model

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// AttemptResult is what became of one claimed attempt.
type AttemptResult struct {
	Attempt
	ClaimToken uuid.UUID
	// Status is the task's status after the attempt: delivered, retrying,
	// dead or expired.
	Status TaskStatus
	// Unattempted marks the end of a claim that was never sent: the task
	// expired before its attempt could start. No attempt row is written and
	// none is metered, the claim's attempt number is given back, and the
	// task's last status code stays the previous attempt's; Error says why.
	Unattempted bool
	// NextAttemptAt is set when Status is retrying.
	NextAttemptAt *time.Time
	// Callback, when set, is the callback task the outcome makes (a
	// delivered or dead task with a callback URL for it): inserted, due at
	// its RunAt, by the statement that records the attempt, and only if
	// that statement records it. Its ID, URL, Headers, Body and RunAt are
	// used; its tenant, timeout and retry policy are the source task's, and
	// CallbackOf is the source.
	Callback *Task
	// BytesSent is the request body's length in bytes, and BytesReceived
	// what was read of the answer's body (kept and discarded alike): the
	// statement that records the attempt adds them to the tenant's usage of
	// the day, with the attempt, and only if it records the attempt.
	BytesSent, BytesReceived int64
}

// ErrClaimLost is returned when an attempt is recorded by a sender that no
// longer owns the task (its lease expired and another node took over).
var ErrClaimLost = errors.New("claim lost")

// AttemptClaim names one attempt to claim (store.Redis.ClaimAttempts).
type AttemptClaim struct {
	TaskID  uuid.UUID
	Attempt int
	Token   uuid.UUID
	TTL     time.Duration
}

// AnsweredAttempt is a send its receiver acknowledged with a 2xx.
type AnsweredAttempt struct {
	TaskID     uuid.UUID
	Attempt    int
	Token      uuid.UUID
	StatusCode int
	StartedAt  time.Time
	Duration   time.Duration
	// BytesSent and BytesReceived are the attempt's (AttemptResult's), so
	// that an answer recovered from the journal is metered as the sender
	// would have; 0 in a mark written before they were kept.
	BytesSent, BytesReceived int64
}
