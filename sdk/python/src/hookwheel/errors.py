"""The API's refusals as exceptions, one class per kind of status, carrying the problem+json fields.

Every 4xx and 5xx answer of the API is ``application/problem+json`` (RFC 9457): ``type``, ``title``,
``status``, ``detail``, and for a validation error the invalid fields in ``errors``. A program catches
the class that matters to it (``NotFoundError``, ``ConflictError``...) or ``HookwheelError`` for all.
"""

from __future__ import annotations

import email.utils
import http
import re
import time
from collections.abc import Mapping
from typing import Any

from .models import FieldError, Problem


class HookwheelError(Exception):
    """An answer of the API other than the success the call expects.

    An answer that is not problem details (a proxy's HTML error page, say) still becomes one, with
    ``type`` ``about:blank``, the status's reason as ``title`` and the start of the body as ``detail``.
    """

    status: int
    """The HTTP status code."""
    type: str
    """A URI naming the kind of problem, such as ``insufficient-scope``; ``about:blank`` when the status says it all."""
    title: str
    """A short summary of the kind of problem."""
    detail: str
    """What went wrong with this call, for a human."""
    instance: str | None
    """A URI naming this occurrence of the problem, when the server gave one."""
    errors: list[FieldError]
    """The invalid fields of a refused request; empty otherwise."""
    retry_after: float | None
    """How long the server asked to wait before trying again (its ``Retry-After``), in seconds."""
    operation: str
    """What was called, such as ``get task 0190f…``."""
    problem: Problem | None
    """The problem details as the server sent them; None when the body was not problem details."""

    def __init__(
        self,
        status: int,
        *,
        type: str = "about:blank",
        title: str = "",
        detail: str = "",
        instance: str | None = None,
        errors: list[FieldError] | None = None,
        retry_after: float | None = None,
        operation: str = "",
        problem: Problem | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.title = title or f"HTTP {status}"
        self.detail = detail
        self.instance = instance
        self.errors = list(errors or [])
        self.retry_after = retry_after
        self.operation = operation
        self.problem = problem
        super().__init__(self._message())

    def _message(self) -> str:
        message = f"{self.status} {self.title}"
        if self.operation:
            message = f"{self.operation}: {message}"
        if self.errors:
            # The fields say precisely what the detail of a validation error sums up.
            message += ": " + "; ".join(f"{e.field}: {e.message}" for e in self.errors)
        elif self.detail and self.detail != self.title:
            message += f": {self.detail}"
        if self.retry_after is not None:
            message += f"; retry after {self.retry_after:g}s"
        return message


class InvalidRequestError(HookwheelError):
    """400, 413 or 422: the request itself is wrong; ``errors`` names the fields when the server did."""


class UnauthorizedError(HookwheelError):
    """401: the API key is missing, malformed, revoked or unknown."""


class ForbiddenError(HookwheelError):
    """403: the API key lacks the scope the call needs (``type`` says which refusal)."""


class NotFoundError(HookwheelError):
    """404: no such object, or another tenant's."""


class ConflictError(HookwheelError):
    """409: the object is not in a state that allows the call, such as canceling a task being sent."""


class RateLimitedError(HookwheelError):
    """429: over a rate limit or quota; ``retry_after`` says when to come back."""


class ServerError(HookwheelError):
    """A 5xx answer, or an answer the SDK could not read."""


_BY_STATUS: dict[int, type[HookwheelError]] = {
    400: InvalidRequestError,
    413: InvalidRequestError,
    422: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitedError,
}


def error_class(status: int) -> type[HookwheelError]:
    """The exception class of an answer's status."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if 400 <= status < 500:
        return HookwheelError
    return ServerError


def problem_error(problem: Problem, *, operation: str = "", retry_after: float | None = None) -> HookwheelError:
    """The exception of one problem, such as a batch item's refusal."""
    return error_class(problem.status)(
        problem.status,
        type=problem.type,
        title=problem.title,
        detail=problem.detail,
        instance=problem.instance,
        errors=problem.errors,
        retry_after=retry_after,
        operation=operation,
        problem=problem,
    )


def response_error(
    status: int,
    reason: str,
    body: Any,
    headers: Mapping[str, str],
    *,
    operation: str = "",
    now: float | None = None,
) -> HookwheelError:
    """The exception of an unsuccessful answer: its problem details, else its status and the start of its body.

    ``body`` is the answer decoded from JSON when it was JSON, else its text.
    """
    reason = reason or _phrase(status)
    retry_after = None
    if status in (429, 503):
        retry_after = parse_retry_after(_get(headers, "Retry-After"), now=now)
    if isinstance(body, Mapping):
        try:
            problem = Problem.from_dict(body)
        except ValueError:
            problem = None
        if problem is not None:
            # The answer's own status wins over what its body claims.
            problem.status = status
            return problem_error(problem, operation=operation, retry_after=retry_after)
        title = body.get("title")
        detail = body.get("detail")
        return error_class(status)(
            status,
            type=str(body.get("type") or "about:blank"),
            title=title if isinstance(title, str) else reason,
            detail=detail if isinstance(detail, str) else "",
            retry_after=retry_after,
            operation=operation,
        )
    text = body.strip() if isinstance(body, str) else ""
    if len(text) > 500:
        text = text[:500] + "…"
    return error_class(status)(
        status,
        title=reason or f"HTTP {status}",
        detail=text,
        retry_after=retry_after,
        operation=operation,
    )


_SECONDS = re.compile(r"^\d+$")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Reads a ``Retry-After`` header (RFC 9110 10.2.3): delay-seconds or an HTTP date, as seconds from now.

    None when absent or unreadable; a date in the past is no wait at all.
    """
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.match(text):
        return float(int(text))
    if not re.search(r"[A-Za-z]", text):
        return None
    try:
        at = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        return None
    return max(0.0, at.timestamp() - (time.time() if now is None else now))


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _get(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None
