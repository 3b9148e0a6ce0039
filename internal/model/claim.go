package model

import (
	"time"

	"github.com/google/uuid"
)

// DueTask is a waiting task and the instant its next attempt falls due: all a
// dispatcher keeps in memory per timer.
type DueTask struct {
	ID uuid.UUID
	At time.Time
}

// DueCursor is a position in the due-time order: (at, id).
type DueCursor struct {
	At time.Time
	ID uuid.UUID
}

// RecoveredClaim is a claim handed back to the queue, and the attempt and
// token it was held under.
type RecoveredClaim struct {
	DueTask
	Attempt int
	Token   uuid.UUID
}

// DeferredClaim is a claim to hand back unsent, to wait until NotBefore.
type DeferredClaim struct {
	ID        uuid.UUID
	Token     uuid.UUID
	NotBefore time.Time
}
