package store

// The exact SQL of the statistics statements, for EXPLAIN.
const (
	QueryAddTaskStats       = queryAddTaskStats
	QueryTaskStatsBetween   = queryTaskStatsBetween
	QueryPurgeTaskStats     = queryPurgeTaskStats
	QueryCountTasksByStatus = queryCountTasksByStatus
	CountDueAtMost          = countDueAtMost
)
