"""Tasks: one-off webhooks to create, follow, list, cancel, move and replay, one at a time or in bulk."""

from __future__ import annotations

import builtins
import datetime as _dt
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._transport import Transport, decode, decode_page
from ._util import body_text, drop_none, duration, label_conditions, operation, rfc3339, text_id
from .errors import ServerError
from .models import (
    Attempt,
    BatchResult,
    CancelResult,
    HTTPMethod,
    Page,
    ReplayResult,
    RetryPolicy,
    Task,
    TaskStatus,
)
from .taskrequest import Body, DeadEdit, TaskRequest

MAX_BATCH = 1000
"""The most tasks one ``batch`` call takes."""


class Tasks:
    """The calls on tasks, ``client.tasks``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("createTask")
    def create(
        self,
        url: str,
        *,
        body: Body | None = None,
        method: HTTPMethod | None = None,
        headers: Mapping[str, str] | None = None,
        delay: _dt.timedelta | str | None = None,
        run_at: _dt.datetime | str | None = None,
        expires_at: _dt.datetime | str | None = None,
        expires_in: _dt.timedelta | str | None = None,
        timeout: _dt.timedelta | str | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        ordering_key: str | None = None,
        flow_key: str | None = None,
        callback: str | None = None,
        failure_callback: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """Schedules a webhook to ``url`` (``POST /v1/tasks``) and returns the task.

        ``delay`` (after the server's now) or ``run_at`` says when; neither is now. Always sent with an
        Idempotency-Key, ``idempotency_key`` or a random one, so that it is retried safely: a repeat with
        the same key returns the task the first request created. See TaskRequest for every field.
        """
        request = TaskRequest(
            url=url,
            body=body,
            method=method,
            headers=headers,
            delay=delay,
            run_at=run_at,
            expires_at=expires_at,
            expires_in=expires_in,
            timeout=timeout,
            retry=retry,
            labels=labels,
            ordering_key=ordering_key,
            flow_key=flow_key,
            callback=callback,
            failure_callback=failure_callback,
            idempotency_key=idempotency_key,
        )
        answer = create_task(self._t, request, "create task")
        return decode(Task.from_dict, answer, "create task")

    @operation("getTask")
    def get(self, task_id: str | uuid.UUID) -> Task:
        """The task as it is now, with its body (``GET /v1/tasks/{id}``)."""
        op = f"get task {task_id}"
        answer = self._t.call("GET", f"/v1/tasks/{text_id(task_id)}", operation=op, repeatable=True)
        return decode(Task.from_dict, answer, op)

    @operation("listTasks")
    def list(
        self,
        *,
        status: TaskStatus | None = None,
        schedule_id: str | uuid.UUID | None = None,
        publish_id: str | uuid.UUID | None = None,
        topic: str | None = None,
        url: str | None = None,
        idempotency_key: str | None = None,
        labels: Mapping[str, str] | None = None,
        callback_of: str | uuid.UUID | None = None,
        created_after: _dt.datetime | str | None = None,
        created_before: _dt.datetime | str | None = None,
        include_body: bool = False,
        page_size: int | None = None,
    ) -> Iterator[Task]:
        """Every task matching all the filters given, newest first, read page after page as the loop goes on.

        ``url`` matches the start of the tasks' URLs; ``labels`` are conditions a task must all meet.
        Tasks come without their bodies unless ``include_body`` (the server then ends a page early
        rather than pass its bound on the bodies of one page; reading goes on all the same).
        """
        query = _task_filter(
            status, schedule_id, publish_id, topic, url, idempotency_key, labels, callback_of, created_after, created_before
        )
        if include_body:
            query["include"] = "body"
        return self._t.pages(lambda cursor: self._list_page(query, page_size, cursor))

    @operation("listTasks")
    def list_page(
        self,
        *,
        status: TaskStatus | None = None,
        schedule_id: str | uuid.UUID | None = None,
        publish_id: str | uuid.UUID | None = None,
        topic: str | None = None,
        url: str | None = None,
        idempotency_key: str | None = None,
        labels: Mapping[str, str] | None = None,
        callback_of: str | uuid.UUID | None = None,
        created_after: _dt.datetime | str | None = None,
        created_before: _dt.datetime | str | None = None,
        include_body: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Task]:
        """One page of ``GET /v1/tasks``; pass the previous page's ``next_cursor`` as ``cursor``."""
        query = _task_filter(
            status, schedule_id, publish_id, topic, url, idempotency_key, labels, callback_of, created_after, created_before
        )
        if include_body:
            query["include"] = "body"
        return self._list_page(query, limit, cursor)

    def _list_page(self, query: dict[str, Any], limit: int | None, cursor: str | None) -> Page[Task]:
        answer = self._t.call(
            "GET", "/v1/tasks", operation="list tasks", repeatable=True, query={**query, "limit": limit, "cursor": cursor}
        )
        return decode(lambda b: decode_page(Task.from_dict, b), answer, "list tasks")

    @operation("cancelTask")
    def cancel(self, task_id: str | uuid.UUID) -> Task:
        """Cancels a scheduled or retrying task and returns it (``DELETE /v1/tasks/{id}``).

        ConflictError once it is being sent or finished. Not retried after a 503 or a lost answer: had
        the first try canceled it, a repeat would answer 409.
        """
        op = f"cancel task {task_id}"
        answer = self._t.call("DELETE", f"/v1/tasks/{text_id(task_id)}", operation=op, repeatable=False)
        return decode(Task.from_dict, answer, op)

    @operation("cancelTasks")
    def cancel_many(
        self,
        *,
        status: TaskStatus | None = None,
        schedule_id: str | uuid.UUID | None = None,
        publish_id: str | uuid.UUID | None = None,
        topic: str | None = None,
        created_after: _dt.datetime | str | None = None,
        created_before: _dt.datetime | str | None = None,
    ) -> int:
        """Cancels every scheduled or retrying task matching all the filters (at least one) and says how many.

        A repeat cancels what is left, so it is retried like a read.
        """
        body = drop_none(
            {
                "status": status,
                "schedule_id": None if schedule_id is None else text_id(schedule_id),
                "publish_id": None if publish_id is None else text_id(publish_id),
                "topic": topic,
                "created_after": None if created_after is None else rfc3339(created_after, "created_after"),
                "created_before": None if created_before is None else rfc3339(created_before, "created_before"),
            }
        )
        if not body:
            raise ValueError("cancel_many: give at least one filter; cancel every task by status= instead")
        answer = self._t.call("POST", "/v1/tasks/cancel", operation="cancel tasks", repeatable=True, body=body)
        return decode(CancelResult.from_dict, answer, "cancel tasks").canceled

    @operation("rescheduleTask")
    def reschedule(
        self,
        task_id: str | uuid.UUID,
        *,
        run_at: _dt.datetime | str | None = None,
        delay: _dt.timedelta | str | None = None,
    ) -> Task:
        """Moves a scheduled or retrying task to ``run_at``, or ``delay`` after the server's now (``PATCH /v1/tasks/{id}``)."""
        if (run_at is None) == (delay is None):
            raise ValueError("reschedule: give exactly one of run_at and delay")
        body = {"run_at": rfc3339(run_at, "run_at")} if run_at is not None else {"delay": duration(delay, "delay")}  # type: ignore[arg-type]
        op = f"reschedule task {task_id}"
        answer = self._t.call("PATCH", f"/v1/tasks/{text_id(task_id)}", operation=op, repeatable=False, body=body)
        return decode(Task.from_dict, answer, op)

    @operation("replayTask")
    def replay(
        self,
        task_id: str | uuid.UUID,
        *,
        url: str | None = None,
        method: HTTPMethod | None = None,
        headers: Mapping[str, str] | None = None,
        body: Body | None = None,
        labels: Mapping[str, str] | None = None,
        callback: str | None = None,
        failure_callback: str | None = None,
    ) -> Task:
        """Sends a dead or delivered task again, due now (``POST /v1/tasks/{id}/replay``).

        Each field given replaces the task's own first (``headers`` and ``labels`` as a whole; ``""``
        removes a callback). Never retried after a 503 or a lost answer: the first try may have
        replayed it, and a repeat would send the webhook once more.
        """
        # A dict body adds Content-Type only to headers given: without them the task keeps its own.
        edit_headers = dict(headers) if headers is not None else None
        text = body_text(body, edit_headers if edit_headers is not None else {})
        edit = drop_none(
            {
                "url": url,
                "method": method,
                "headers": edit_headers,
                "body": text,
                "labels": None if labels is None else dict(labels),
                "callback": callback,
                "failure_callback": failure_callback,
            }
        )
        op = f"replay task {task_id}"
        answer = self._t.call("POST", f"/v1/tasks/{text_id(task_id)}/replay", operation=op, repeatable=False, body=edit)
        return decode(Task.from_dict, answer, op)

    @operation("replayTasks")
    def replay_dead(
        self,
        *,
        url: str | None = None,
        schedule_id: str | uuid.UUID | None = None,
        publish_id: str | uuid.UUID | None = None,
        topic: str | None = None,
        labels: Mapping[str, str] | None = None,
        created_after: _dt.datetime | str | None = None,
        created_before: _dt.datetime | str | None = None,
        dry_run: bool = False,
        edit: DeadEdit | None = None,
    ) -> ReplayResult:
        """Replays every dead task matching all the filters (``POST /v1/tasks/replay``), or with ``dry_run`` counts them.

        With ``edit``, changes each first. Only a dry run is retried after a 503 or a lost answer; a
        real one called again replays only the tasks that died since.
        """
        if labels is not None and not labels:
            raise ValueError("replay_dead: labels is empty: leave it None for no label condition")
        body = drop_none(
            {
                "url": url,
                "schedule_id": None if schedule_id is None else text_id(schedule_id),
                "publish_id": None if publish_id is None else text_id(publish_id),
                "topic": topic,
                "labels": None if labels is None else dict(labels),
                "created_after": None if created_after is None else rfc3339(created_after, "created_after"),
                "created_before": None if created_before is None else rfc3339(created_before, "created_before"),
                "dry_run": True if dry_run else None,
                "edit": None if edit is None else edit.to_body(),
            }
        )
        answer = self._t.call("POST", "/v1/tasks/replay", operation="replay dead tasks", repeatable=dry_run, body=body)
        return decode(ReplayResult.from_dict, answer, "replay dead tasks")

    @operation("listTaskAttempts")
    def attempts(self, task_id: str | uuid.UUID) -> builtins.list[Attempt]:
        """Every delivery attempt of the task, oldest first, read from as many pages as it takes."""
        return list(self.list_attempts(task_id))

    @operation("listTaskAttempts")
    def list_attempts(self, task_id: str | uuid.UUID, *, page_size: int | None = None) -> Iterator[Attempt]:
        """The task's delivery attempts, oldest first, read page after page as the loop goes on."""
        return self._t.pages(lambda cursor: self.attempts_page(task_id, limit=page_size, cursor=cursor))

    @operation("listTaskAttempts")
    def attempts_page(self, task_id: str | uuid.UUID, *, limit: int | None = None, cursor: str | None = None) -> Page[Attempt]:
        """One page of ``GET /v1/tasks/{id}/attempts``."""
        op = f"list attempts of task {task_id}"
        answer = self._t.call(
            "GET",
            f"/v1/tasks/{text_id(task_id)}/attempts",
            operation=op,
            repeatable=True,
            query={"limit": limit, "cursor": cursor},
        )
        return decode(lambda b: decode_page(Attempt.from_dict, b), answer, op)

    @operation("createTasksBatch")
    def batch(self, items: Iterable[TaskRequest | Mapping[str, Any]]) -> builtins.list[BatchResult]:
        """Schedules up to MAX_BATCH webhooks in one call (``POST /v1/tasks/batch``): one result per item, in order.

        Each item is stored or refused on its own (``error``, a Problem). Items without an
        ``idempotency_key`` get a random one, so that the call is retried safely.
        """
        tasks = []
        for item in items:
            body = item.to_body() if isinstance(item, TaskRequest) else dict(item)
            # With a key on every item, a repeat of the whole call creates nothing new.
            body["idempotency_key"] = body.get("idempotency_key") or str(uuid.uuid4())
            tasks.append(body)
        op = f"create {len(tasks)} tasks"
        answer = self._t.call("POST", "/v1/tasks/batch", operation=op, repeatable=True, body={"tasks": tasks})
        results = decode(lambda b: [BatchResult.from_dict(r) for r in b["data"]], answer, op)
        if len(results) != len(tasks):
            raise ServerError(answer.status, title="unexpected answer", detail=f"{len(results)} results for {len(tasks)} items", operation=op)
        return results


def create_task(transport: Transport, request: TaskRequest, op: str) -> Any:
    """Sends ``request`` to ``POST /v1/tasks`` with its idempotency key or a random one; the answer is a task or a publish."""
    body = request.to_body()
    key = body.pop("idempotency_key", None) or str(uuid.uuid4())
    # Safe to retry: the key makes the server store a repeat once.
    return transport.call("POST", "/v1/tasks", operation=op, repeatable=True, body=body, headers={"Idempotency-Key": key})


def _task_filter(
    status: TaskStatus | None,
    schedule_id: str | uuid.UUID | None,
    publish_id: str | uuid.UUID | None,
    topic: str | None,
    url: str | None,
    idempotency_key: str | None,
    labels: Mapping[str, str] | None,
    callback_of: str | uuid.UUID | None,
    created_after: _dt.datetime | str | None,
    created_before: _dt.datetime | str | None,
) -> dict[str, Any]:
    return {
        "status": status,
        "schedule_id": None if schedule_id is None else text_id(schedule_id),
        "publish_id": None if publish_id is None else text_id(publish_id),
        "topic": topic,
        "url": url,
        "idempotency_key": idempotency_key,
        "label": label_conditions(labels),
        "callback_of": None if callback_of is None else text_id(callback_of),
        "created_after": None if created_after is None else rfc3339(created_after, "created_after"),
        "created_before": None if created_before is None else rfc3339(created_before, "created_before"),
    }

