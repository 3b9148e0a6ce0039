package model

import "time"

// PurgeParams selects what one store.DB.PurgeFinished pass deletes.
type PurgeParams struct {
	// Now is the instant retention is counted back from.
	Now time.Time
	// DefaultRetention applies to tenants without a retention of their
	// own; 0 keeps their finished tasks forever.
	DefaultRetention time.Duration
	// Limit caps the tasks of one pass (one statement).
	Limit int
	// IdempotencyWindow is how long after its creation a purged task's (or
	// publish's) idempotency key is remembered: a repeat inside it answers
	// the purged one and creates nothing. 0 remembers none.
	IdempotencyWindow time.Duration
}

// PurgeResult is what one store.DB.PurgeFinished pass deleted.
type PurgeResult struct {
	Tasks    int
	Attempts int
	// Publishes counts the publishes deleted with the last of their tasks.
	Publishes int
	// Remembered counts the idempotency keys of the deleted tasks and
	// publishes kept in idempotency_keys.
	Remembered int
}
