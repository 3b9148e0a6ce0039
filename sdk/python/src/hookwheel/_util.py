"""What the call groups share: how Python values are written as the API takes them, and the mark
naming the operation of the OpenAPI document each method calls (which the drift test reads)."""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

OPERATIONS_ATTR: Final = "__hookwheel_operations__"


def operation(operation_id: str) -> Callable[[F], F]:
    """Marks a method as calling the API operation ``operation_id`` (openapi/openapi.yaml)."""

    def mark(fn: F) -> F:
        setattr(fn, OPERATIONS_ATTR, (*getattr(fn, OPERATIONS_ATTR, ()), operation_id))
        return fn

    return mark


class Unset:
    """The value of an argument not given, where None means something (clear, reset)."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = Unset()


def duration(value: _dt.timedelta | str, name: str) -> str:
    """A duration as the API spells it, a Go duration: ``"90s"`` for ``timedelta(seconds=90)``; text as given."""
    if isinstance(value, str):
        return value
    if not isinstance(value, _dt.timedelta):
        raise TypeError(f"{name}: want a timedelta or a Go duration such as '30s', got {type(value).__name__}")
    micro = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if micro % 1_000_000 == 0:
        return f"{micro // 1_000_000}s"
    if micro % 1_000 == 0:
        return f"{micro // 1_000}ms"
    return f"{micro}us"


def rfc3339(value: _dt.datetime | str, name: str) -> str:
    """A time as the API takes it, RFC 3339; a naive datetime is refused, since which zone it means is a guess."""
    if isinstance(value, str):
        return value
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"{name}: want a datetime or RFC 3339 text, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name}: the datetime has no time zone; give one, such as datetime.now(timezone.utc)")
    return value.isoformat()


def day(value: _dt.date | str, name: str) -> str:
    """A UTC day, ``YYYY-MM-DD``: a datetime's UTC day, a date as it is, text as given."""
    if isinstance(value, str):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name}: the datetime has no time zone")
        return value.astimezone(_dt.timezone.utc).date().isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    raise TypeError(f"{name}: want a date or YYYY-MM-DD, got {type(value).__name__}")


def text_id(value: str | uuid.UUID) -> str:
    return str(value)


def label_conditions(labels: Mapping[str, str] | None) -> list[str] | None:
    """Labels as the API's ``label`` parameters, ``key:value`` each, in key order so the same filter makes the same URL."""
    if labels is None:
        return None
    return [f"{k}:{labels[k]}" for k in sorted(labels)]


def body_text(body: str | bytes | Mapping[str, Any] | list[Any] | None, headers: dict[str, str]) -> str | None:
    """A webhook body as the API takes it, text: bytes must be UTF-8; a dict or list is sent as JSON,
    with ``Content-Type: application/json`` unless ``headers`` names a content type."""
    if body is None or isinstance(body, str):
        return body
    if isinstance(body, (bytes, bytearray)):
        try:
            return bytes(body).decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError("body: webhook bodies are text; encode binary data (base64, say)") from err
    if isinstance(body, (Mapping, list)):
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    raise TypeError(f"body: want str, bytes, dict or list, got {type(body).__name__}")


def drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def drop_unset(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not UNSET}
