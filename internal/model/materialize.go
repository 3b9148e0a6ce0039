package model

import "time"

// OccurrencePlan is what a materialiser decided for one due schedule: the
// occurrences to make into tasks now, and where the schedule goes on from.
type OccurrencePlan struct {
	// Occurrences become tasks, each due at its occurrence. One already a
	// task (another node got there first) is left alone.
	Occurrences []time.Time
	// Next becomes the schedule's NextRunAt: the first occurrence not
	// materialised. nil stops the schedule (it has no occurrence left).
	Next *time.Time
}

// MaterializeParams selects the schedules a store.DB.MaterializeSchedules pass works on.
type MaterializeParams struct {
	// Partitions are those this node owns; a schedule's partition is the
	// last byte of its id, like a task's.
	Partitions []int16
	// Until: schedules whose NextRunAt is at or before it are due.
	Until time.Time
	// Limit caps the schedules of one pass (one transaction).
	Limit int
	// NotifyUntil: tasks due at or before it are announced on
	// store.DueNotifyChannel on commit (they fall inside the loaded window).
	NotifyUntil time.Time
	// DefaultTasksPerDay is the node's tasks_per_day for tenants whose own
	// limits and plan set none; 0 for none.
	DefaultTasksPerDay int
	// DefaultMaxPendingTasks is the node's max_pending_tasks for tenants
	// whose own limits and plan set none; 0 for none.
	DefaultMaxPendingTasks int
}

// Materialized is what a store.DB.MaterializeSchedules pass did.
type Materialized struct {
	// Created are the tasks created, for the caller to arm (occurrences that
	// were already tasks are not).
	Created []DueTask
	// Skipped counts the occurrences not made tasks because their tenant
	// was at its max_pending_tasks or tasks_per_day; each schedule counts
	// its own.
	Skipped int
}
