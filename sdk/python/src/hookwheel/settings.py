"""The tenant's own settings, such as where hookwheel sends its operations events."""

from __future__ import annotations

from ._transport import Transport, decode
from ._util import UNSET, Unset, drop_unset, operation
from .models import TenantSettings


class Settings:
    """The calls on the tenant's settings, ``client.settings``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("getSettings")
    def get(self) -> TenantSettings:
        """The tenant's settings; any key may read them."""
        answer = self._t.call("GET", "/v1/settings", operation="get settings", repeatable=True)
        return decode(TenantSettings.from_dict, answer, "get settings")

    @operation("updateSettings")
    def update(self, *, operations_url: str | None | Unset = UNSET) -> TenantSettings:
        """Changes the settings given (None clears one) and returns them as they are now; needs ``secrets:manage``.

        ``operations_url`` is where hookwheel sends its signed ``target.paused`` and ``target.recovered``
        events, checked as a task's URL is. Setting the same twice leaves them as once, so it is
        retried like a read.
        """
        patch = drop_unset({"operations_url": operations_url})
        answer = self._t.call("PATCH", "/v1/settings", operation="update settings", repeatable=True, body=patch)
        return decode(TenantSettings.from_dict, answer, "update settings")
