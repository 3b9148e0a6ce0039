"""Portal links: read-only pages of one label's tasks and attempts, for a tenant's own customer."""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterator

from ._transport import Transport, decode, decode_page
from ._util import drop_none, duration, operation, text_id
from .models import Page, PortalLink, PortalLinkCreated


class PortalLinks:
    """The calls on portal links, ``client.portal_links``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("createPortalLink")
    def create(
        self,
        label: str,
        *,
        expires_in: _dt.timedelta | str | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> PortalLinkCreated:
        """A link to a read-only page of the tasks carrying ``label`` (``key:value``) and their attempts.

        Its ``url`` is in this answer only. ``expires_in`` is 1s to 30 days (default an hour). Not
        retried after a 503 or a lost answer: a repeat would make a second link.
        """
        body = drop_none(
            {
                "label": label,
                "expires_in": None if expires_in is None else duration(expires_in, "expires_in"),
                "name": name,
                "description": description,
            }
        )
        op = f"create portal link for {label!r}"
        answer = self._t.call("POST", "/v1/portal-links", operation=op, repeatable=False, body=body)
        return decode(PortalLinkCreated.from_dict, answer, op)

    @operation("listPortalLinks")
    def list(self, *, page_size: int | None = None) -> Iterator[PortalLink]:
        """The links that still open (neither expired nor revoked), newest first, page after page."""
        return self._t.pages(lambda cursor: self.list_page(limit=page_size, cursor=cursor))

    @operation("listPortalLinks")
    def list_page(self, *, limit: int | None = None, cursor: str | None = None) -> Page[PortalLink]:
        """One page of ``GET /v1/portal-links``."""
        answer = self._t.call(
            "GET", "/v1/portal-links", operation="list portal links", repeatable=True, query={"limit": limit, "cursor": cursor}
        )
        return decode(lambda b: decode_page(PortalLink.from_dict, b), answer, "list portal links")

    @operation("revokePortalLink")
    def revoke(self, link_id: str | uuid.UUID) -> PortalLink:
        """Ends a link at once, on every node, and returns it; revoking a revoked link answers the same."""
        op = f"revoke portal link {link_id}"
        answer = self._t.call("DELETE", f"/v1/portal-links/{text_id(link_id)}", operation=op, repeatable=True)
        return decode(PortalLink.from_dict, answer, op)
