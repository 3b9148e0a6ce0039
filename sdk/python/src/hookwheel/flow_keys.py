"""Flow keys: the rate and parallelism of the tasks naming a key in ``flow_key``, one key per customer, say."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Final

from ._transport import Transport, decode, decode_page, path_segment
from ._util import drop_none, duration, operation
from .models import FlowLimit, Page

DEFAULT_FLOW_KEY: Final = "*"
"""The key whose limits apply, each key apart, to every key without limits of its own."""


class FlowKeys:
    """The calls on flow keys' limits, ``client.flow_keys``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("putFlowLimit")
    def put(
        self,
        key: str,
        *,
        rate: int | None = None,
        period: _dt.timedelta | str | None = None,
        parallelism: int | None = None,
    ) -> FlowLimit:
        """Sets the limits of the tasks whose ``flow_key`` is ``key``, replacing what it had (``PUT /v1/flow-keys/{key}``).

        ``rate`` sends per ``period`` (default a second), ``parallelism`` in flight at once; at least
        one. ``DEFAULT_FLOW_KEY`` sets them for every key without limits of its own. A task over its
        key's limits waits without spending an attempt. Safe to repeat, so it is retried like a read.
        """
        body = drop_none(
            {"rate": rate, "period": None if period is None else duration(period, "period"), "parallelism": parallelism}
        )
        op = f"put flow limit {key!r}"
        answer = self._t.call("PUT", f"/v1/flow-keys/{path_segment(key)}", operation=op, repeatable=True, body=body)
        return decode(FlowLimit.from_dict, answer, op)

    @operation("getFlowLimit")
    def get(self, key: str) -> FlowLimit:
        """The key's own limits; NotFoundError when it has none (its tasks then go by the default's, if set)."""
        op = f"get flow limit {key!r}"
        answer = self._t.call("GET", f"/v1/flow-keys/{path_segment(key)}", operation=op, repeatable=True)
        return decode(FlowLimit.from_dict, answer, op)

    @operation("listFlowLimits")
    def list(self, *, page_size: int | None = None) -> Iterator[FlowLimit]:
        """Every key's limits, in key order, page after page."""
        return self._t.pages(lambda cursor: self.list_page(limit=page_size, cursor=cursor))

    @operation("listFlowLimits")
    def list_page(self, *, limit: int | None = None, cursor: str | None = None) -> Page[FlowLimit]:
        """One page of ``GET /v1/flow-keys``."""
        answer = self._t.call(
            "GET", "/v1/flow-keys", operation="list flow limits", repeatable=True, query={"limit": limit, "cursor": cursor}
        )
        return decode(lambda b: decode_page(FlowLimit.from_dict, b), answer, "list flow limits")

    @operation("deleteFlowLimit")
    def delete(self, key: str) -> FlowLimit:
        """Lifts the key's limits and returns them as they were.

        Not retried after a 503 or a lost answer: had the first try deleted them, a repeat would answer 404.
        """
        op = f"delete flow limit {key!r}"
        answer = self._t.call("DELETE", f"/v1/flow-keys/{path_segment(key)}", operation=op, repeatable=False)
        return decode(FlowLimit.from_dict, answer, op)
