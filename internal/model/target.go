package model

import (
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// TargetKey is the target of a webhook URL: its scheme, host and port,
// "https://example.com:443". Host names are case-insensitive (RFC 4343),
// so the host is lowercased: "EXAMPLE.com" and "example.com" are one
// target; a missing port is the scheme's default. Every piece of the
// dispatcher's target state, and a target's pause, is keyed by it;
// hookwheel_target_key (migration 00033) computes the same in Postgres.
func TargetKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// Who paused a target.
const (
	PausedByTenant    = "tenant"
	PausedByHookwheel = "hookwheel"
)

// TargetPause is one of a tenant's paused targets: its tasks to Target wait,
// unclaimed and unattempted, until it is resumed.
type TargetPause struct {
	TenantID uuid.UUID
	// Target is a TargetKey.
	Target   string
	PausedAt time.Time
	// PausedBy is PausedByTenant or PausedByHookwheel.
	PausedBy string
	Reason   string
	// Since and LastError are set on hookwheel's pauses: the first failure
	// of the unbroken run of failures that paused the target, and the last
	// one's error.
	Since     *time.Time
	LastError *string
}

// PausedTarget names a target one tenant paused.
type PausedTarget struct {
	TenantID uuid.UUID
	Target   string
}

// Held is what the dispatcher leaves out of claims and sweeps: the tenants
// whose tasks are all held (suspended, being deleted), and the targets
// paused per tenant. A nil *Held holds nothing.
type Held struct {
	Tenants []uuid.UUID
	// TargetTenants are the tenants with a paused target, each once, and
	// Targets each paused target as HeldTargetKey writes it: a claim
	// computes a task's target only for the tenants in TargetTenants.
	TargetTenants []uuid.UUID
	Targets       []string
}

// HeldTargetKey is how Held.Targets writes a tenant's paused target, the
// form the claim statement compares to: the tenant id as Postgres writes a
// uuid as text, a space, the target.
func HeldTargetKey(tenant uuid.UUID, target string) string {
	return tenant.String() + " " + target
}

// ActorHookwheel is the audit actor of what hookwheel does by itself: a
// target it paused.
const ActorHookwheel = "hookwheel"

// Types of the events sent to a tenant's operations URL.
const (
	EventTargetPaused    = "target.paused"
	EventTargetRecovered = "target.recovered"
)

// TargetHealthReport is what one dispatcher saw of its tenants' targets
// since its last report: for each tenant and target, its last success, and
// the run of failures after it.
type TargetHealthReport struct {
	// At is when the report is made; a target hookwheel pauses is paused
	// at At.
	At time.Time
	// DisableAfter is how long a target must have failed every attempt to
	// be paused (HOOKWHEEL_TARGET_DISABLE_AFTER), and Reason what its
	// pause says.
	DisableAfter time.Duration
	Reason       string
	Successes    []TargetSuccess
	Failures     []TargetFailures
}

// TargetSuccess is a tenant's last successful attempt to a target.
type TargetSuccess struct {
	TenantID uuid.UUID
	Target   string
	At       time.Time
}

// TargetFailures is a run of failed attempts of a tenant to a target, with
// no success between them: the first and the last, and the last's error.
type TargetFailures struct {
	TenantID    uuid.UUID
	Target      string
	First, Last time.Time
	LastError   string
}

// TargetEvent is an event for a tenant's operations URL: a target
// hookwheel paused (Pause set), or one that recovered after its resume
// (At is when its attempt succeeded).
type TargetEvent struct {
	Type          string
	TenantID      uuid.UUID
	OperationsURL string
	Target        string
	Pause         *TargetPause
	At            time.Time
}
