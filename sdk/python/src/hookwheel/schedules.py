"""Schedules: recurring webhooks, the same request sent at every occurrence of a cron expression."""

from __future__ import annotations

import builtins
import datetime as _dt
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from ._transport import Transport, decode, decode_list, decode_page
from ._util import UNSET, Unset, body_text, drop_none, drop_unset, duration, operation, text_id
from .models import FireTime, HTTPMethod, Page, RetryPolicy, Schedule
from .taskrequest import Body, retry_body


class Schedules:
    """The calls on schedules, ``client.schedules``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("createSchedule")
    def create(
        self,
        cron: str,
        url: str,
        *,
        timezone: str | None = None,
        method: HTTPMethod | None = None,
        headers: Mapping[str, str] | None = None,
        body: Body | None = None,
        timeout: _dt.timedelta | str | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        ordering_key: str | None = None,
        flow_key: str | None = None,
        callback: str | None = None,
        failure_callback: str | None = None,
        paused: bool = False,
    ) -> Schedule:
        """Creates a schedule sending the request at every occurrence of ``cron`` in ``timezone`` (default UTC).

        ``cron`` is 5 fields, 6 with seconds first, a descriptor (``@daily``) or ``@every <duration>``.
        Not retried after a 503 or a lost answer: the API takes no idempotency key for schedules, and
        a repeat of a create that went through would make a second one.
        """
        all_headers = dict(headers or {})
        text = body_text(body, all_headers)
        request = drop_none(
            {
                "cron": cron,
                "url": url,
                "timezone": timezone,
                "method": method,
                "headers": all_headers or None,
                "body": text,
                "timeout": None if timeout is None else duration(timeout, "timeout"),
                "retry": retry_body(retry),
                "labels": None if labels is None else dict(labels),
                "ordering_key": ordering_key,
                "flow_key": flow_key,
                "callback": callback,
                "failure_callback": failure_callback,
                "paused": True if paused else None,
            }
        )
        answer = self._t.call("POST", "/v1/schedules", operation="create schedule", repeatable=False, body=request)
        return decode(Schedule.from_dict, answer, "create schedule")

    @operation("getSchedule")
    def get(self, schedule_id: str | uuid.UUID) -> Schedule:
        """The schedule as it is now, with its next occurrence."""
        op = f"get schedule {schedule_id}"
        answer = self._t.call("GET", f"/v1/schedules/{text_id(schedule_id)}", operation=op, repeatable=True)
        return decode(Schedule.from_dict, answer, op)

    @operation("listSchedules")
    def list(self, *, include_body: bool = False, page_size: int | None = None) -> Iterator[Schedule]:
        """Every schedule, newest first, page after page; without their bodies unless ``include_body``."""
        return self._t.pages(lambda cursor: self.list_page(include_body=include_body, limit=page_size, cursor=cursor))

    @operation("listSchedules")
    def list_page(self, *, include_body: bool = False, limit: int | None = None, cursor: str | None = None) -> Page[Schedule]:
        """One page of ``GET /v1/schedules``."""
        query = {"include": "body" if include_body else None, "limit": limit, "cursor": cursor}
        answer = self._t.call("GET", "/v1/schedules", operation="list schedules", repeatable=True, query=query)
        return decode(lambda b: decode_page(Schedule.from_dict, b), answer, "list schedules")

    @operation("pauseSchedule")
    def pause(self, schedule_id: str | uuid.UUID) -> Schedule:
        """Stops the schedule and cancels its occurrences not yet sent. Pausing a paused one changes nothing."""
        return self._post(schedule_id, "pause")

    @operation("resumeSchedule")
    def resume(self, schedule_id: str | uuid.UUID) -> Schedule:
        """Restarts a paused schedule from its next occurrence after now (the missed ones are not sent)."""
        return self._post(schedule_id, "resume")

    def _post(self, schedule_id: str | uuid.UUID, action: str) -> Schedule:
        op = f"{action} schedule {schedule_id}"
        answer = self._t.call("POST", f"/v1/schedules/{text_id(schedule_id)}/{action}", operation=op, repeatable=True)
        return decode(Schedule.from_dict, answer, op)

    @operation("updateSchedule")
    def update(
        self,
        schedule_id: str | uuid.UUID,
        *,
        cron: str | Unset = UNSET,
        timezone: str | None | Unset = UNSET,
        url: str | Unset = UNSET,
        method: HTTPMethod | None | Unset = UNSET,
        headers: Mapping[str, str | None] | None | Unset = UNSET,
        body: Body | None | Unset = UNSET,
        timeout: _dt.timedelta | str | None | Unset = UNSET,
        retry: Mapping[str, Any] | None | Unset = UNSET,
        labels: Mapping[str, str | None] | None | Unset = UNSET,
        ordering_key: str | None | Unset = UNSET,
        flow_key: str | None | Unset = UNSET,
        callback: str | None | Unset = UNSET,
        failure_callback: str | None | Unset = UNSET,
        paused: bool | None | Unset = UNSET,
    ) -> Schedule:
        """Changes the schedule in place with a JSON merge patch (``PATCH /v1/schedules/{id}``).

        A field given replaces the schedule's; None resets it to a create's default; a field not
        given is kept. ``headers``, ``labels`` and ``retry`` merge entry by entry (an entry None
        removes it). A new ``cron`` or ``timezone`` recomputes ``next_run_at`` from now. A merge patch
        leaves the schedule the same however often it is applied, so the call is retried like a read.
        """
        patch: dict[str, Any] = drop_unset(
            {
                "cron": cron,
                "timezone": timezone,
                "url": url,
                "method": method,
                "headers": None if headers is None or isinstance(headers, Unset) else dict(headers),
                "timeout": timeout if timeout is None or isinstance(timeout, Unset) else duration(timeout, "timeout"),
                "retry": retry if retry is None or isinstance(retry, Unset) else _retry_patch(retry),
                "labels": None if labels is None or isinstance(labels, Unset) else dict(labels),
                "ordering_key": ordering_key,
                "flow_key": flow_key,
                "callback": callback,
                "failure_callback": failure_callback,
                "paused": paused,
            }
        )
        if isinstance(headers, Unset):
            del patch["headers"]
        if isinstance(labels, Unset):
            del patch["labels"]
        if not isinstance(body, Unset):
            patch["body"] = None if body is None else body_text(body, {})
        op = f"update schedule {schedule_id}"
        answer = self._t.call(
            "PATCH",
            f"/v1/schedules/{text_id(schedule_id)}",
            operation=op,
            repeatable=True,
            body=patch,
            content_type="application/merge-patch+json",
        )
        return decode(Schedule.from_dict, answer, op)

    @operation("deleteSchedule")
    def delete(self, schedule_id: str | uuid.UUID) -> Schedule:
        """Deletes the schedule, cancels its occurrences not yet sent, and returns it as it was.

        Not retried after a 503 or a lost answer: had the first try deleted it, a repeat would answer 404.
        """
        op = f"delete schedule {schedule_id}"
        answer = self._t.call("DELETE", f"/v1/schedules/{text_id(schedule_id)}", operation=op, repeatable=False)
        return decode(Schedule.from_dict, answer, op)

    @operation("nextScheduleTimes")
    def next(self, schedule_id: str | uuid.UUID, count: int | None = None) -> builtins.list[FireTime]:
        """The next ``count`` (default 10, at most 100) occurrences after now, those of a resume now when paused."""
        op = f"next times of schedule {schedule_id}"
        answer = self._t.call(
            "GET", f"/v1/schedules/{text_id(schedule_id)}/next", operation=op, repeatable=True, query={"count": count}
        )
        return decode(lambda b: decode_list(FireTime.from_dict, b), answer, op)


def _retry_patch(retry: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(retry)
    for name in ("min_backoff", "max_backoff"):
        if out.get(name) is not None:
            out[name] = duration(out[name], f"retry.{name}")
    return out
