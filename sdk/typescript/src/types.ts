// Names for the API's schemas, so that callers need not spell
// components["schemas"]["..."]. Every type comes from src/schema.ts, which
// `npm run generate` makes from openapi/openapi.yaml: none is written by hand.
import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];

export type Task = Schemas["Task"];
export type TaskRequest = Schemas["TaskRequest"];
export type TaskStatus = Schemas["TaskStatus"];
export type TaskList = Schemas["TaskList"];
export type HTTPMethod = Schemas["HTTPMethod"];
export type RetryPolicy = Schemas["RetryPolicy"];
export type RescheduleRequest = Schemas["RescheduleRequest"];
export type ReplayRequest = Schemas["ReplayRequest"];
export type ReplayFilter = Schemas["ReplayFilter"];
export type ReplayResult = Schemas["ReplayResult"];
export type ReplayEdit = Schemas["ReplayEdit"];
export type ReplayChange = Schemas["ReplayChange"];
export type ReplayRefusal = Schemas["ReplayRefusal"];
export type CancelFilter = Schemas["CancelFilter"];
export type CancelResult = Schemas["CancelResult"];
export type BatchTaskRequest = Schemas["BatchTaskRequest"];
export type BatchResult = Schemas["BatchResult"];
export type Attempt = Schemas["Attempt"];
export type AttemptOutcome = Schemas["AttemptOutcome"];
export type Schedule = Schemas["Schedule"];
export type ScheduleRequest = Schemas["ScheduleRequest"];
export type ScheduleUpdateRequest = Schemas["ScheduleUpdateRequest"];
export type ScheduleList = Schemas["ScheduleList"];
export type FireTime = Schemas["FireTime"];
export type Caller = Schemas["Caller"];
export type TaskStats = Schemas["TaskStats"];
export type MinuteStats = Schemas["MinuteStats"];
export type Usage = Schemas["TenantUsage"];
export type UsageDay = Schemas["UsageDay"];
export type UsageCounts = Schemas["UsageCounts"];

/** The days of `usage()`: `YYYY-MM-DD`, or a Date read as its UTC day. */
export interface UsageRange {
  from?: Date | string;
  to?: Date | string;
}
export type Topic = Schemas["Topic"];
export type TopicEndpoint = Schemas["TopicEndpoint"];
export type TopicRequest = Schemas["TopicRequest"];
export type TopicList = Schemas["TopicList"];
export type FlowKey = Schemas["FlowKey"];
export type FlowLimit = Schemas["FlowLimit"];
export type FlowLimitRequest = Schemas["FlowLimitRequest"];
export type FlowLimitList = Schemas["FlowLimitList"];
export type PortalLink = Schemas["PortalLink"];
export type PortalLinkRequest = Schemas["PortalLinkRequest"];
export type PortalLinkCreated = Schemas["PortalLinkCreated"];
export type PortalLinkList = Schemas["PortalLinkList"];
export type TargetPause = Schemas["TargetPause"];
export type TargetPauseRequest = Schemas["TargetPauseRequest"];
export type TargetPauseList = Schemas["TargetPauseList"];
export type TenantSettings = Schemas["TenantSettings"];
export type TenantSettingsUpdate = Schemas["TenantSettingsUpdate"];
export type Limits = Schemas["TenantLimits"];
export type Plan = Schemas["Plan"];
export type PlanList = Schemas["PlanList"];
export type Publish = Schemas["Publish"];
export type PublishStatusCounts = Schemas["PublishStatusCounts"];
export type TaskOrPublish = Schemas["TaskOrPublish"];
export type Problem = Schemas["Problem"];
export type FieldError = Schemas["FieldError"];
export type CallbackPayload = Schemas["CallbackPayload"];
export type CallbackResponse = Schemas["CallbackResponse"];
export type SignupMode = Schemas["SignupMode"];
export type SignupCreated = Schemas["SignupCreated"];
export type Tenant = Schemas["Tenant"];

/** The filters of `GET /v1/tasks`, without the paging parameters. */
export type TaskFilter = Omit<NonNullable<operations["listTasks"]["parameters"]["query"]>, "cursor" | "limit">;

/** One page of a list: its items and, unless it is the last, the cursor of the next. */
export interface Page<T> {
  data: T[];
  next_cursor?: string | null;
}
