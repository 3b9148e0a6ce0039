"""A webhook to schedule, as ``tasks.create``, ``tasks.batch`` and ``topics.publish`` take it."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._util import body_text, drop_none, duration, rfc3339
from .models import HTTPMethod, RetryPolicy

Body = str | bytes | Mapping[str, Any] | list[Any]
"""A webhook body: text, UTF-8 bytes, or a dict or list sent as JSON (with ``Content-Type: application/json``)."""


@dataclass(kw_only=True)
class TaskRequest:
    """A webhook to schedule: to ``url``, or (``topics.publish``, a batch item) to every endpoint of ``topic``.

    Every field left None takes the server's default. Durations are ``timedelta`` values or Go
    durations (``"30s"``, ``"1h30m"``); times are timezone-aware ``datetime`` values or RFC 3339 text.
    """

    url: str | None = None
    topic: str | None = None
    method: HTTPMethod | None = None
    headers: Mapping[str, str] | None = None
    body: Body | None = None
    # When to send it: run_at, or delay after the server's now (exclusive); neither is now.
    run_at: _dt.datetime | str | None = None
    delay: _dt.timedelta | str | None = None
    # When it stops being worth sending: expires_at, or expires_in after the server's now (exclusive).
    expires_at: _dt.datetime | str | None = None
    expires_in: _dt.timedelta | str | None = None
    timeout: _dt.timedelta | str | None = None
    retry: RetryPolicy | Mapping[str, Any] | None = None
    labels: Mapping[str, str] | None = None
    ordering_key: str | None = None
    flow_key: str | None = None
    callback: str | None = None
    failure_callback: str | None = None
    # Makes the create safe to repeat: a repeat with the same key and request returns what the first made.
    # Left None, the SDK sends a random one, so that its own retries store the webhook once.
    idempotency_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields of a newer API this SDK does not name yet, sent as they are."""

    def to_body(self) -> dict[str, Any]:
        """The request as the API's JSON body (``idempotency_key`` included, as a batch item carries it)."""
        headers = dict(self.headers or {})
        text = body_text(self.body, headers)
        out = drop_none(
            {
                "url": self.url,
                "topic": self.topic,
                "method": self.method,
                "headers": headers or None,
                "body": text,
                "run_at": None if self.run_at is None else rfc3339(self.run_at, "run_at"),
                "delay": None if self.delay is None else duration(self.delay, "delay"),
                "expires_at": None if self.expires_at is None else rfc3339(self.expires_at, "expires_at"),
                "expires_in": None if self.expires_in is None else duration(self.expires_in, "expires_in"),
                "timeout": None if self.timeout is None else duration(self.timeout, "timeout"),
                "retry": retry_body(self.retry),
                "labels": None if self.labels is None else dict(self.labels),
                "ordering_key": self.ordering_key,
                "flow_key": self.flow_key,
                "callback": self.callback,
                "failure_callback": self.failure_callback,
                "idempotency_key": self.idempotency_key,
            }
        )
        out.update(self.extra)
        return out


def retry_body(retry: RetryPolicy | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A retry policy as the API takes it; backoffs may be ``timedelta`` values."""
    if retry is None:
        return None
    if isinstance(retry, RetryPolicy):
        fields: Mapping[str, Any] = {
            "max_attempts": retry.max_attempts,
            "min_backoff": retry.min_backoff,
            "max_backoff": retry.max_backoff,
        }
    else:
        fields = retry
    out = dict(fields)
    for name in ("min_backoff", "max_backoff"):
        if out.get(name) is not None:
            out[name] = duration(out[name], f"retry.{name}")
    return drop_none(out)


@dataclass(kw_only=True)
class DeadEdit:
    """What ``tasks.replay_dead`` changes in every task it replays, before replaying it.

    ``url_prefix_from`` and ``url_prefix_to`` go together: a task whose URL starts with the first gets
    the second in its place (and only such tasks match). ``set_headers`` gives headers their values,
    ``remove_headers`` takes them away, by name in any letter case; a task's other headers stay. A task
    the edit would make invalid stays dead and unchanged, counted in the result's ``refused``.
    """

    url_prefix_from: str | None = None
    url_prefix_to: str | None = None
    set_headers: Mapping[str, str] | None = None
    remove_headers: list[str] | None = None

    def to_body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.url_prefix_from is not None or self.url_prefix_to is not None:
            out["url_prefix"] = {"from": self.url_prefix_from or "", "to": self.url_prefix_to or ""}
        if self.set_headers or self.remove_headers:
            out["headers"] = drop_none(
                {
                    "set": dict(self.set_headers) if self.set_headers else None,
                    "remove": list(self.remove_headers) if self.remove_headers else None,
                }
            )
        return out
