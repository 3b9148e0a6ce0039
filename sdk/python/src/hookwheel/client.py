"""The client of one hookwheel server, acting as one tenant: its call groups and the calls about the caller."""

from __future__ import annotations

import datetime as _dt
import ssl
from typing import Final

from ._transport import Transport, decode
from ._util import day, duration, operation
from .account import Audit, Keys, SigningSecrets
from .flow_keys import FlowKeys
from .models import Caller, LimitsView, TaskStats, Usage
from .plans import Plans
from .portal_links import PortalLinks
from .schedules import Schedules
from .settings import Settings
from .targets import Targets
from .tasks import Tasks
from .topics import Topics

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds each try of a call may take (connecting, sending, reading the answer)."""
DEFAULT_RETRIES: Final = 3
"""How many times a call is retried after its first try, at most."""
DEFAULT_MAX_RETRY_WAIT: Final = 30.0
"""The longest wait before one retry, in seconds; a server asking for longer is not waited for."""


class Client:
    """Calls one hookwheel server as one tenant. Safe to share between threads; make one and keep it.

    >>> hw = Client("http://localhost:8080", "hw_...")
    >>> task = hw.tasks.create(url="https://example.com/hook", body={"order": 42}, delay="10m")

    Calls are retried on 429 answers, and on 503 answers and lost answers when doing them twice is
    harmless (reads; task creates, which always carry an Idempotency-Key; puts, merge patches,
    pauses, revokes and bulk cancels), waiting what ``Retry-After`` asks, else an exponential backoff
    from 250 ms, at most ``max_retry_wait``. ``retries=0`` turns retries off.
    """

    tasks: Tasks
    schedules: Schedules
    topics: Topics
    flow_keys: FlowKeys
    portal_links: PortalLinks
    targets: Targets
    settings: Settings
    keys: Keys
    signing_secrets: SigningSecrets
    audit: Audit
    plans: Plans
    """The operator's plans: admin calls, for a Client made with the admin token as its ``api_key``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        user_agent: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``base_url`` is where the API is served (``http://localhost:8080``); ``api_key`` is ``hw_<key id>_<secret>``.

        ``user_agent`` goes before the SDK's own, so that the server's logs name the calling program;
        ``ssl_context`` replaces the default certificate checks (a private CA, say).
        """
        if not api_key:
            raise ValueError("no API key (hw_<key id>_<secret>)")
        self._t = Transport(
            base_url,
            api_key,
            timeout=timeout,
            retries=retries,
            max_retry_wait=max_retry_wait,
            user_agent=user_agent,
            ssl_context=ssl_context,
        )
        self.tasks = Tasks(self._t)
        self.schedules = Schedules(self._t)
        self.topics = Topics(self._t)
        self.flow_keys = FlowKeys(self._t)
        self.portal_links = PortalLinks(self._t)
        self.targets = Targets(self._t)
        self.settings = Settings(self._t)
        self.keys = Keys(self._t)
        self.signing_secrets = SigningSecrets(self._t)
        self.audit = Audit(self._t)
        self.plans = Plans(self._t)

    def __repr__(self) -> str:
        # Never the key.
        return f"Client({self._t.base_url!r})"

    @operation("getCaller")
    def me(self) -> Caller:
        """The calling tenant and API key; every valid key may call it, which makes it the way to check a key."""
        return decode(Caller.from_dict, self._t.call("GET", "/v1/me", operation="who am I", repeatable=True), "who am I")

    @operation("getStats")
    def stats(self, window: _dt.timedelta | str | None = None) -> TaskStats:
        """Per-minute delivery statistics over ``window`` (whole minutes up to 24h; default 1h), and tasks by status now."""
        query = {"window": None if window is None else duration(window, "window")}
        answer = self._t.call("GET", "/v1/stats", operation="get stats", repeatable=True, query=query)
        return decode(TaskStats.from_dict, answer, "get stats")

    @operation("getUsage")
    def usage(self, from_: _dt.date | str | None = None, to: _dt.date | str | None = None) -> Usage:
        """What the tenant used on each UTC day from ``from_`` to ``to``, both included (at most 400 days).

        Default: from the first of the current month to today. A datetime counts as its UTC day.
        """
        query = {
            "from": None if from_ is None else day(from_, "from_"),
            "to": None if to is None else day(to, "to"),
        }
        answer = self._t.call("GET", "/v1/usage", operation="get usage", repeatable=True, query=query)
        return decode(Usage.from_dict, answer, "get usage")

    @operation("getLimits")
    def limits(self) -> LimitsView:
        """The rate limits and quotas that apply to the caller, its plan, and its pending tasks now."""
        answer = self._t.call("GET", "/v1/limits", operation="get limits", repeatable=True)
        return decode(LimitsView.from_dict, answer, "get limits")
