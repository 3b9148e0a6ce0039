"""The operator's plans, named sets of limits tenants are put on.

These are admin calls: make the Client with the installation's admin token (``HOOKWHEEL_ADMIN_TOKEN``)
as its ``api_key``.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from ._transport import Transport, decode, decode_list, path_segment
from ._util import operation
from .models import Limits, Plan


class Plans:
    """The calls on plans, ``client.plans`` (admin token)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("putPlan")
    def put(self, name: str, limits: Limits | Mapping[str, Any]) -> Plan:
        """Creates the plan, or replaces its limits as a whole: an absent limit takes the node's default, 0 lifts it.

        Safe to repeat, so it is retried like a read.
        """
        body = limits.to_dict() if isinstance(limits, Limits) else dict(limits)
        op = f"put plan {name!r}"
        answer = self._t.call("PUT", f"/v1/admin/plans/{path_segment(name)}", operation=op, repeatable=True, body=body)
        return decode(Plan.from_dict, answer, op)

    @operation("getPlan")
    def get(self, name: str) -> Plan:
        """The plan; NotFoundError when there is none."""
        op = f"get plan {name!r}"
        answer = self._t.call("GET", f"/v1/admin/plans/{path_segment(name)}", operation=op, repeatable=True)
        return decode(Plan.from_dict, answer, op)

    @operation("listPlans")
    def list(self) -> builtins.list[Plan]:
        """Every plan, by name."""
        answer = self._t.call("GET", "/v1/admin/plans", operation="list plans", repeatable=True)
        return decode(lambda b: decode_list(Plan.from_dict, b), answer, "list plans")

    @operation("deletePlan")
    def delete(self, name: str) -> None:
        """Deletes the plan; ConflictError while tenants are on it. Not retried after a 503 or a lost answer."""
        self._t.call(
            "DELETE", f"/v1/admin/plans/{path_segment(name)}", operation=f"delete plan {name!r}", repeatable=False, expect=(204,)
        )
