"""Targets: the hosts a tenant's webhooks go to, their breakers, and holding a tenant's tasks to one."""

from __future__ import annotations

import builtins

from ._transport import Transport, decode, decode_list
from ._util import drop_none, operation
from .models import TargetList, TargetPause


class Targets:
    """The calls on targets, ``client.targets``; a target is ``https://host:port``, without a path."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("listTargets")
    def list(self) -> TargetList:
        """The targets the tenant's tasks went to on the answering node in the last 10 minutes, with their breakers.

        Each dispatcher node keeps its own, so behind a load balancer this is one node's view.
        """
        answer = self._t.call("GET", "/v1/targets", operation="list targets", repeatable=True)
        return decode(TargetList.from_dict, answer, "list targets")

    @operation("pauseTarget")
    def pause(self, target: str, *, reason: str | None = None) -> TargetPause:
        """Holds the tenant's tasks to ``target`` until it is resumed: they wait, not sent, not counted as attempts.

        A target paused already keeps its pause as it was, which is returned; so it is retried like a read.
        """
        op = f"pause target {target}"
        body = drop_none({"target": target, "reason": reason})
        answer = self._t.call("POST", "/v1/targets/pause", operation=op, repeatable=True, body=body)
        return decode(TargetPause.from_dict, answer, op)

    @operation("resumeTarget")
    def resume(self, target: str) -> TargetPause:
        """Lifts the pause of ``target``, the tenant's or hookwheel's, and returns it as it was; NotFoundError if none."""
        op = f"resume target {target}"
        answer = self._t.call("POST", "/v1/targets/resume", operation=op, repeatable=False, body={"target": target})
        return decode(TargetPause.from_dict, answer, op)

    @operation("listPausedTargets")
    def list_paused(self) -> builtins.list[TargetPause]:
        """The tenant's paused targets, by target, with who paused each and why."""
        answer = self._t.call("GET", "/v1/targets/paused", operation="list paused targets", repeatable=True)
        return decode(lambda b: decode_list(TargetPause.from_dict, b), answer, "list paused targets")
