// Package model holds hookwheel's domain types (tasks, attempts, tenants,
// schedules, limits, partitions) and the rules that belong to them alone. It
// knows nothing of Postgres, Redis or HTTP, so everything above the store can
// share these types and test their rules without a database.
package model

import "errors"

// ErrNotFound is returned when a row does not exist or belongs to another tenant.
var ErrNotFound = errors.New("not found")

// ErrGrantorUnusable refuses a key created by a key that has been revoked or
// has expired since it was checked.
var ErrGrantorUnusable = errors.New("the creating key is revoked or expired")

// ErrUnchanged is returned by a change function (store.DB.UpdateSigningSecrets)
// that has nothing to write: the store leaves the row as it is.
var ErrUnchanged = errors.New("unchanged")

// ErrConflict is returned when a task is not in a state that allows the change.
var ErrConflict = errors.New("conflict")

// ErrPlanInUse refuses to delete a plan that some tenant is on.
var ErrPlanInUse = errors.New("the plan is in use")

// ErrNoSuchPlan refuses to give a tenant a plan that does not exist.
var ErrNoSuchPlan = errors.New("no such plan")
