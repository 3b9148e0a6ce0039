package model

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// DefaultFlowKey names the limits a tenant gives every flow key that has
// none of its own. Each key is still limited apart: the default is a
// template, not a shared budget.
const DefaultFlowKey = "*"

// FlowLimit is what a tenant allows the tasks of one flow key: at most Rate
// sends per Period and at most Parallelism in flight, across every node. A
// zero Rate or Parallelism leaves that side unlimited; a FlowLimit with
// neither (the zero value) limits nothing.
type FlowLimit struct {
	TenantID uuid.UUID
	// Key is the flow key, or DefaultFlowKey. On a claim it is the task's
	// own key, whichever limits apply to it.
	Key         string
	Rate        int
	Period      time.Duration
	Parallelism int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Limited reports whether l limits anything.
func (l FlowLimit) Limited() bool { return l.Rate > 0 || l.Parallelism > 0 }

// PerSecond is the rate as sends per second; 0 when there is no rate.
func (l FlowLimit) PerSecond() float64 {
	if l.Rate <= 0 || l.Period <= 0 {
		return 0
	}
	return float64(l.Rate) / l.Period.Seconds()
}

// ErrFlowLimitQuota refuses limits for a new key to a tenant that has as
// many keys limited as it may.
var ErrFlowLimitQuota = errors.New("flow limit quota reached")

// FlowLimitFilter selects a page of a tenant's flow limits, in key order
// (byte order).
type FlowLimitFilter struct {
	// After, when set, continues a listing after this key.
	After *string
	Limit int
}
