package tasks

import (
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The audit log records every change to a tenant's configuration made
// here (topics, flow limits, schedules) and every bulk cancel and replay,
// naming the actor the caller gives: model.KeyActor of the key the call
// was made with (a dashboard session's included), or model.ActorOperator.
// A change is recorded in the transaction that makes it; a bulk change,
// which commits in chunks, once it is over, with how many tasks it took.
// Details hold what identifies the change and never a secret: a URL is
// recorded by its origin alone (a webhook URL's path or query may be its
// credential), and headers and bodies not at all.

// Audit actions written by the Service.
const (
	AuditTopicCreated     = "topic.created"
	AuditTopicUpdated     = "topic.updated"
	AuditTopicDeleted     = "topic.deleted"
	AuditFlowLimitCreated = "flow_limit.created"
	AuditFlowLimitUpdated = "flow_limit.updated"
	AuditFlowLimitDeleted = "flow_limit.deleted"
	AuditScheduleCreated  = "schedule.created"
	AuditScheduleUpdated  = "schedule.updated"
	AuditSchedulePaused   = "schedule.paused"
	AuditScheduleResumed  = "schedule.resumed"
	AuditScheduleDeleted  = "schedule.deleted"
	AuditTasksCanceled    = "tasks.canceled"
	AuditTasksReplayed    = "tasks.replayed"
	// AuditTasksEditReplayed records a bulk replay that edited the tasks.
	AuditTasksEditReplayed = "tasks.edit_replayed"
)

func auditEntry(tenantID uuid.UUID, actor, action string, detail map[string]any) *model.AuditEntry {
	return &model.AuditEntry{TenantID: &tenantID, Actor: actor, Action: action, Detail: detail}
}

// auditOrigin is what the audit log records of a URL: its scheme, host and
// port; "" for one that does not parse.
func auditOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func topicDetail(t *model.Topic) map[string]any {
	endpoints := make([]map[string]any, len(t.Endpoints))
	for i, e := range t.Endpoints {
		endpoints[i] = map[string]any{"target": auditOrigin(e.URL)}
		if e.Name != "" {
			endpoints[i]["name"] = e.Name
		}
	}
	return map[string]any{"topic": t.Name, "endpoints": endpoints}
}

func flowLimitDetail(l *model.FlowLimit) map[string]any {
	return map[string]any{"flow_key": l.Key, "rate": l.Rate, "period": l.Period.String(), "parallelism": l.Parallelism}
}

func scheduleDetail(sc *model.Schedule) map[string]any {
	d := map[string]any{"schedule_id": sc.ID, "cron": sc.Cron, "timezone": sc.Timezone, "paused": sc.Paused,
		"target": auditOrigin(sc.URL)}
	if sc.FlowKey != nil {
		d["flow_key"] = *sc.FlowKey
	}
	return d
}

func timeText(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// filterDetail is the set conditions of a bulk change's filter.
func filterDetail(status *model.TaskStatus, scheduleID, publishID *uuid.UUID, topic, urlPrefix *string,
	labels map[string]string, createdAfter, createdBefore *time.Time) map[string]any {
	d := map[string]any{}
	if status != nil {
		d["status"] = string(*status)
	}
	if scheduleID != nil {
		d["schedule_id"] = *scheduleID
	}
	if publishID != nil {
		d["publish_id"] = *publishID
	}
	if topic != nil {
		d["topic"] = *topic
	}
	if urlPrefix != nil {
		d["url_origin"] = auditOrigin(*urlPrefix)
	}
	if len(labels) > 0 {
		d["labels"] = labels
	}
	if createdAfter != nil {
		d["created_after"] = timeText(createdAfter)
	}
	if createdBefore != nil {
		d["created_before"] = timeText(createdBefore)
	}
	return d
}
