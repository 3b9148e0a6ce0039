package store

import (
	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// QueryListTasks and QueryListTenants are the exact SQL of ListTasks and
// ListTenants, for EXPLAIN; ListTasksArgs the parameters ListTasks passes.
const (
	QueryListTasks   = queryListTasks
	QueryListTenants = queryListTenants
)

func ListTasksArgs(tenantID uuid.UUID, f model.TaskFilter) []any { return listTasksArgs(tenantID, f) }

// LikePrefix is likePrefix, the LIKE pattern of a URL prefix filter.
func LikePrefix(prefix string, chars int) string { return *likePrefix(&prefix, chars) }
