"""Decoding the API's JSON answers into the dataclasses of ``models``, driven by their type hints."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

T = TypeVar("T")

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: str) -> _dt.datetime:
    """Reads an RFC 3339 time as the server writes it (``Z`` or an offset, up to nanoseconds)."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # datetime keeps microseconds: digits past the sixth are dropped, not rounded.
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    parsed = _dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"time {value!r} has no offset")
    return parsed


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode_model(cls: type[T], data: Any) -> T:
    if not isinstance(data, Mapping):
        raise ValueError(f"{cls.__name__}: want a JSON object, got {type(data).__name__}")
    hints = _hints(typing.cast(type, cls))
    known: set[str] = set()
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        key = f.metadata.get("json", f.name)
        known.add(key)
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}: the answer has no {key}")
            continue
        try:
            kwargs[f.name] = _decode(hints[f.name], data[key])
        except (TypeError, ValueError) as err:
            raise ValueError(f"{cls.__name__}.{key}: {err}") from err
    kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
    return cls(**kwargs)


def _decode(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        if len(args) == 1:
            return _decode(args[0], value)
        return value
    if value is None:
        # A nullable the schema does not mark so, such as a list the server sends as null: its zero.
        if origin is list:
            return []
        if origin is dict:
            return {}
        raise ValueError("is null")
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ValueError("want a list")
        return [_decode(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(hint)
        if not isinstance(value, Mapping):
            raise ValueError("want an object")
        return {k: _decode(item, v) for k, v in value.items()}
    if origin is Literal or hint is Any:
        return value
    if isinstance(hint, type):
        if dataclasses.is_dataclass(hint):
            return decode_model(hint, value)
        if hint is _dt.datetime:
            if not isinstance(value, str):
                raise ValueError("want an RFC 3339 time")
            return parse_time(value)
        if hint is _dt.date:
            if not isinstance(value, str):
                raise ValueError("want a date")
            return _dt.date.fromisoformat(value)
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if hint is int and isinstance(value, bool):
            raise ValueError("want an integer, got a boolean")
        if not isinstance(value, hint):
            raise ValueError(f"want {hint.__name__}, got {type(value).__name__}")
    return value
