"""The API's objects, as the server answers them (openapi/openapi.yaml, served at /openapi.yaml).

Each is a dataclass decoded from the JSON answer: times become timezone-aware ``datetime`` values,
days ``date`` values, ids stay text. A field the SDK does not know yet (a newer server) is kept in
``extra`` rather than dropped, so that a program can read it before the SDK names it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Self, TypeVar

from ._decoding import decode_model

TaskStatus = Literal["scheduled", "dispatching", "retrying", "delivered", "dead", "canceled", "expired"]
AttemptOutcome = Literal["success", "retry", "fail"]
HTTPMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
Scope = Literal[
    "*", "tasks:read", "tasks:write", "schedules:read", "schedules:write", "topics:read", "topics:write",
    "flow-keys:read", "flow-keys:write", "keys:manage", "secrets:manage", "audit:read",
]  # fmt: skip


@dataclass(kw_only=True)
class Model:
    """What every object of the API has: the fields this SDK does not know, kept as sent."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Decodes the object from its JSON form; ValueError when a required field is missing or mistyped."""
        return decode_model(cls, data)


T = TypeVar("T")


@dataclass(kw_only=True)
class Page(Generic[T]):
    """One page of a list: its items and, unless it is the last, the cursor of the next."""

    data: list[T]
    next_cursor: str | None = None


# Problems.


@dataclass(kw_only=True)
class FieldError(Model):
    """One invalid field of a refused request: a JSON path in the body (``retry.max_attempts``) or a parameter."""

    field: str
    message: str


@dataclass(kw_only=True)
class Problem(Model):
    """An error answer, as RFC 9457 problem details; a batch item's refusal is one too."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldError] = field(default_factory=list)


# Tasks.


@dataclass(kw_only=True)
class RetryPolicy(Model):
    """How failed attempts are retried; an absent field takes the tenant's default."""

    max_attempts: int | None = None
    min_backoff: str | None = None
    max_backoff: str | None = None


@dataclass(kw_only=True)
class CallbackResponse(Model):
    """The response a callback reports; ``status_code`` is None when no response came."""

    status_code: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    body_truncated: bool = False

    def body_bytes(self) -> bytes:
        """The first 64 KiB of the response body, decoded from base64 (``body_truncated`` says if there was more)."""
        if self.body == "":
            return b""
        try:
            return base64.b64decode(self.body, validate=True)
        except (binascii.Error, ValueError) as err:
            raise ValueError("the callback's response.body is not standard base64") from err


@dataclass(kw_only=True)
class CallbackPayload(Model):
    """The body of a callback webhook: what the final attempt of a task got."""

    task_id: str
    status: Literal["delivered", "dead", "expired"]
    attempt: int
    error: str | None = None
    response: CallbackResponse


@dataclass(kw_only=True)
class Task(Model):
    """A scheduled webhook and its delivery state."""

    id: str
    status: TaskStatus
    url: str
    method: HTTPMethod
    run_at: _dt.datetime
    created_at: _dt.datetime
    updated_at: _dt.datetime
    attempts: int
    max_attempts: int
    timeout: str
    retry: RetryPolicy
    next_attempt_at: _dt.datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    idempotency_key: str | None = None
    schedule_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    expires_at: _dt.datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    ordering_key: str | None = None
    flow_key: str | None = None
    callback: str | None = None
    failure_callback: str | None = None
    callback_of: str | None = None
    callback_task_id: str | None = None
    report: CallbackPayload | None = None
    topic: str | None = None
    publish_id: str | None = None
    endpoint_name: str | None = None


@dataclass(kw_only=True)
class Attempt(Model):
    """One delivery attempt of a task."""

    attempt: int
    started_at: _dt.datetime
    duration_ms: int
    outcome: AttemptOutcome
    status_code: int | None = None
    error: str | None = None
    response_body: str | None = None
    response_headers: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class PublishStatusCounts(Model):
    """How many of a publish's tasks are in each status."""

    scheduled: int = 0
    dispatching: int = 0
    retrying: int = 0
    delivered: int = 0
    dead: int = 0
    canceled: int = 0
    expired: int = 0


@dataclass(kw_only=True)
class Publish(Model):
    """One publish to a topic: the task made for each endpoint, and how many are in each status."""

    id: str
    topic: str
    created_at: _dt.datetime
    idempotency_key: str | None = None
    task_count: int
    status_counts: PublishStatusCounts
    tasks: list[Task] = field(default_factory=list)


@dataclass(kw_only=True)
class BatchResult(Model):
    """One item's result in a batch: ``task`` (``publish`` for an item with a topic) or ``error``."""

    task: Task | None = None
    publish: Publish | None = None
    replayed: bool = False
    error: Problem | None = None


@dataclass(kw_only=True)
class CancelResult(Model):
    canceled: int


@dataclass(kw_only=True)
class ReplayRefusal(Model):
    """Why a bulk replay with an edit left tasks dead: the edit would have made them invalid."""

    reason: str
    count: int
    task_ids: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ReplayChange(Model):
    """What an edit changes in one task, in the sample of a dry run."""

    id: str
    url_before: str
    url_after: str
    headers_set: dict[str, str] = field(default_factory=dict)
    headers_removed: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ReplayResult(Model):
    """How many dead tasks a bulk replay matched and replayed (and, with an edit, changed and refused)."""

    matched: int
    replayed: int
    changed: int | None = None
    refused: int | None = None
    refusals: list[ReplayRefusal] = field(default_factory=list)
    sample: list[ReplayChange] = field(default_factory=list)


# Schedules.


@dataclass(kw_only=True)
class Schedule(Model):
    """A recurring webhook."""

    id: str
    cron: str
    timezone: str
    paused: bool
    next_run_at: _dt.datetime | None = None
    last_run_at: _dt.datetime | None = None
    skipped_occurrences: int = 0
    last_skipped_at: _dt.datetime | None = None
    url: str
    method: HTTPMethod
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    timeout: str
    retry: RetryPolicy
    labels: dict[str, str] = field(default_factory=dict)
    ordering_key: str | None = None
    flow_key: str | None = None
    callback: str | None = None
    failure_callback: str | None = None
    created_at: _dt.datetime
    updated_at: _dt.datetime


@dataclass(kw_only=True)
class FireTime(Model):
    """One coming occurrence of a schedule, in its time zone and in UTC."""

    local: _dt.datetime
    utc: _dt.datetime


# Topics and flow keys.


@dataclass(kw_only=True)
class TopicEndpoint(Model):
    """One URL of a topic, with an optional name its tasks carry as ``endpoint_name``."""

    url: str
    name: str | None = None


@dataclass(kw_only=True)
class Topic(Model):
    """A named set of endpoint URLs that webhooks are published to."""

    name: str
    description: str = ""
    endpoints: list[TopicEndpoint] = field(default_factory=list)
    created_at: _dt.datetime
    updated_at: _dt.datetime


@dataclass(kw_only=True)
class FlowLimit(Model):
    """The rate and parallelism of the tasks with one flow key; 0 leaves that side unlimited."""

    key: str
    rate: int
    period: str
    parallelism: int
    created_at: _dt.datetime
    updated_at: _dt.datetime


# Portal links, targets, settings.


@dataclass(kw_only=True)
class PortalLink(Model):
    """A link to a read-only page of one label's tasks, without its token."""

    id: str
    label: str
    name: str = ""
    description: str = ""
    created_at: _dt.datetime
    created_by: str
    expires_at: _dt.datetime
    revoked_at: _dt.datetime | None = None


@dataclass(kw_only=True)
class PortalLinkCreated(PortalLink):
    """A created portal link with its URL, shown only in this answer."""

    url: str


@dataclass(kw_only=True)
class TargetPause(Model):
    """One of the tenant's paused targets, paused by the tenant or by hookwheel."""

    target: str
    paused_at: _dt.datetime
    paused_by: Literal["tenant", "hookwheel"]
    reason: str = ""
    since: _dt.datetime | None = None
    last_error: str | None = None


@dataclass(kw_only=True)
class Target(Model):
    """A target as the tenant sees it on the answering node: its breaker and the tenant's sends."""

    target: str
    state: Literal["closed", "half-open", "open"]
    next_probe_at: _dt.datetime | None = None
    in_flight: int
    waiting: int
    attempts: int
    failures: int
    since: _dt.datetime
    last_used_at: _dt.datetime


@dataclass(kw_only=True)
class TargetList(Model):
    """The tenant's targets on the node that answered (the nil UUID for an API-only node)."""

    node: str
    data: list[Target] = field(default_factory=list)


@dataclass(kw_only=True)
class TenantSettings(Model):
    """The tenant's own settings; ``operations_url`` None: hookwheel's operations events go nowhere."""

    operations_url: str | None = None


# The caller, its keys, secrets, audit log, limits and usage.


@dataclass(kw_only=True)
class APIKey(Model):
    """An API key, without its secret."""

    id: str
    name: str = ""
    scopes: list[Scope] = field(default_factory=list)
    created_at: _dt.datetime
    created_by: str
    expires_at: _dt.datetime | None = None
    revoked_at: _dt.datetime | None = None
    last_used_at: _dt.datetime | None = None


@dataclass(kw_only=True)
class APIKeyCreated(APIKey):
    """A created key with its only copy, ``hw_<key id>_<secret>``."""

    api_key: str


@dataclass(kw_only=True)
class CallerTenant(Model):
    id: str
    name: str


@dataclass(kw_only=True)
class Caller(Model):
    """The calling tenant and the API key the call was made with."""

    tenant: CallerTenant
    key: APIKey


@dataclass(kw_only=True)
class SigningSecret(Model):
    """A secret (or key) that signs the tenant's webhooks now; its value is never shown again."""

    id: str
    created_at: _dt.datetime
    expires_at: _dt.datetime | None = None
    current: bool
    algorithm: str | None = None
    public_key: str | None = None


@dataclass(kw_only=True)
class SigningSecretCreated(Model):
    """A new current signing secret, with its only copy of the value."""

    id: str
    signing_secret: str | None = None
    created_at: _dt.datetime
    grace_ends_at: _dt.datetime
    algorithm: str | None = None
    public_key: str | None = None


@dataclass(kw_only=True)
class AuditEntry(Model):
    """One change to the tenant's configuration or credentials."""

    id: str
    tenant_id: str | None = None
    actor: str
    action: str
    detail: dict[str, Any] = field(default_factory=dict)
    at: _dt.datetime


@dataclass(kw_only=True)
class TargetLimits(Model):
    dispatch_rate: float | None = None
    dispatch_concurrency: int | None = None


@dataclass(kw_only=True)
class Limits(Model):
    """A tenant's or a plan's rate limits and quotas; None: not set (see the API reference for how they layer)."""

    api_rate: float | None = None
    api_burst: int | None = None
    max_pending_tasks: int | None = None
    max_schedules: int | None = None
    max_timeout: str | None = None
    dispatch_rate: float | None = None
    dispatch_concurrency: int | None = None
    targets: dict[str, TargetLimits] = field(default_factory=dict)
    tasks_per_day: int | None = None
    deliveries_per_day: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The limits as the API takes them: the fields set, and nothing for those left None."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or value is None:
                continue
            if f.name == "targets":
                if value:
                    out["targets"] = {host: {k: v for k, v in dataclasses.asdict(t).items() if v is not None} for host, t in value.items()}
                continue
            out[f.name] = value
        return out


@dataclass(kw_only=True)
class LimitsView(Model):
    """The limits that apply to the caller, its plan, and how much of the pending-task quota is used."""

    plan: str | None = None
    limits: Limits
    pending_tasks: int


@dataclass(kw_only=True)
class Plan(Model):
    """A named set of limits that tenants are put on."""

    name: str
    limits: Limits
    created_at: _dt.datetime
    updated_at: _dt.datetime


@dataclass(kw_only=True)
class MinuteStats(Model):
    start: _dt.datetime
    attempts: int
    delivered: int
    retried: int
    dead: int
    lateness_p50_ms: float | None = None
    lateness_p99_ms: float | None = None


@dataclass(kw_only=True)
class StatusCounts(Model):
    scheduled: int = 0
    dispatching: int = 0
    retrying: int = 0
    delivered: int = 0
    dead: int = 0
    canceled: int = 0
    expired: int = 0


@dataclass(kw_only=True)
class TaskStats(Model):
    """What the tenant's webhooks did minute by minute, and how many tasks are in each status now."""

    window: str
    minutes: list[MinuteStats] = field(default_factory=list)
    tasks_by_status: StatusCounts
    status_count_limit: int


@dataclass(kw_only=True)
class UsageCounts(Model):
    tasks_created: int
    deliveries: int
    attempts: int
    failed_attempts: int
    bytes_sent: int
    bytes_received: int


@dataclass(kw_only=True)
class UsageDay(UsageCounts):
    date: _dt.date


@dataclass(kw_only=True)
class DailyLimits(Model):
    tasks_per_day: int | None = None
    deliveries_per_day: int | None = None


@dataclass(kw_only=True)
class Usage(Model):
    """What the tenant used on each UTC day of a range, the totals, and the daily limits now."""

    from_: _dt.date = field(metadata={"json": "from"})
    to: _dt.date
    days: list[UsageDay] = field(default_factory=list)
    totals: UsageCounts
    plan: str | None = None
    limits: DailyLimits


# Sign-up.


@dataclass(kw_only=True)
class Tenant(Model):
    """A tenant and its settings."""

    id: str
    name: str
    created_at: _dt.datetime
    status: str = "active"
    plan: str | None = None
    retry: RetryPolicy | None = None
    limits: Limits | None = None
    effective_limits: Limits | None = None
    retention: str | None = None
    operations_url: str | None = None
    target_allow_cidrs: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class SignupCreated(Model):
    """A signed-up tenant with the only copies of its API key and signing secret."""

    tenant: Tenant
    api_key: str
    signing_secret: str


