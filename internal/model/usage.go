package model

import (
	"time"

	"github.com/google/uuid"
)

// UsageCounts is what a tenant used over a day or a range of days, as
// metered by the statements that commit each fact (store/usage.go).
type UsageCounts struct {
	// TasksCreated counts tasks stored by a create (API, batch, publish
	// copies, schedule occurrences, transactional enqueue); not callback
	// tasks, nor an idempotent repeat that stored nothing.
	TasksCreated int64
	// Deliveries counts the attempts recorded as delivering their task (one
	// per task delivered, a replay's again), Attempts every attempt
	// recorded, FailedAttempts the rest.
	Deliveries, Attempts, FailedAttempts int64
	// BytesSent counts the request bodies of the attempts recorded,
	// BytesReceived what was read of their answers' bodies.
	BytesSent, BytesReceived int64
}

// Add adds o to c.
func (c *UsageCounts) Add(o UsageCounts) {
	c.TasksCreated += o.TasksCreated
	c.Deliveries += o.Deliveries
	c.Attempts += o.Attempts
	c.FailedAttempts += o.FailedAttempts
	c.BytesSent += o.BytesSent
	c.BytesReceived += o.BytesReceived
}

// UsageDay is a tenant's usage of one UTC day.
type UsageDay struct {
	// Date is the day, at midnight UTC.
	Date time.Time
	UsageCounts
}

// TenantUsageDay is one tenant's usage of one day, for the operator's
// report: every tenant's, a deleted tenant's included.
type TenantUsageDay struct {
	TenantID uuid.UUID
	// TenantName and Plan are the tenant's now; TenantName is nil once the
	// tenant is deleted, Plan nil without a plan (or once deleted).
	TenantName *string
	Plan       *string
	UsageDay
}

// UsageReportFilter selects the operator's usage report's rows: days From
// to To (inclusive, midnight UTC), one tenant's or every tenant's, in (day,
// tenant) order after the cursor, at most Limit.
type UsageReportFilter struct {
	From, To time.Time
	TenantID *uuid.UUID
	// AfterDate and AfterTenant, when AfterDate is not zero, start the page
	// after that row.
	AfterDate   time.Time
	AfterTenant uuid.UUID
	Limit       int
}

// UsageKeepDays is how many days usage is kept, whatever the task
// retention: the purger deletes older rows, and a report reads at most as
// many days.
const UsageKeepDays = 400
