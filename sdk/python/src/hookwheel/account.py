"""The tenant's credentials and their history: API keys, webhook signing secrets, and the audit log."""

from __future__ import annotations

import builtins
import datetime as _dt
from collections.abc import Iterator, Sequence

from ._transport import Transport, decode, decode_list, decode_page, path_segment
from ._util import drop_none, duration, operation, rfc3339
from .models import APIKey, APIKeyCreated, AuditEntry, Page, Scope, SigningSecret, SigningSecretCreated


class Keys:
    """The tenant's API keys, ``client.keys`` (a key with ``keys:manage``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("listKeys")
    def list(self) -> builtins.list[APIKey]:
        """Every key of the tenant, revoked and expired ones included, newest first; never their secrets."""
        answer = self._t.call("GET", "/v1/keys", operation="list keys", repeatable=True)
        return decode(lambda b: decode_list(APIKey.from_dict, b), answer, "list keys")

    @operation("createKey")
    def create(
        self,
        *,
        name: str | None = None,
        scopes: Sequence[Scope] | None = None,
        expires_at: _dt.datetime | str | None = None,
    ) -> APIKeyCreated:
        """Creates a key with ``scopes`` (default every scope); its ``api_key`` is in this answer only.

        To rotate a key: create the new one, deploy it, then revoke the old one. Not retried after a
        503 or a lost answer: a repeat would make a second key.
        """
        body = drop_none(
            {
                "name": name,
                "scopes": None if scopes is None else list(scopes),
                "expires_at": None if expires_at is None else rfc3339(expires_at, "expires_at"),
            }
        )
        answer = self._t.call("POST", "/v1/keys", operation="create key", repeatable=False, body=body)
        return decode(APIKeyCreated.from_dict, answer, "create key")

    @operation("revokeKey")
    def revoke(self, key_id: str) -> APIKey:
        """Revokes a key (the calling one included) by its id, the part between ``hw_`` and the second ``_``.

        Revoking a revoked key answers the same, so it is retried like a read.
        """
        op = f"revoke key {key_id}"
        answer = self._t.call("DELETE", f"/v1/keys/{path_segment(key_id)}", operation=op, repeatable=True)
        return decode(APIKey.from_dict, answer, op)


class SigningSecrets:
    """The secrets that sign the tenant's webhooks, ``client.signing_secrets`` (a key with ``secrets:manage``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("listSigningSecrets")
    def list(self) -> builtins.list[SigningSecret]:
        """The secrets signing webhooks now, current first, then those in a rotation's grace period."""
        answer = self._t.call("GET", "/v1/signing-secrets", operation="list signing secrets", repeatable=True)
        return decode(lambda b: decode_list(SigningSecret.from_dict, b), answer, "list signing secrets")

    @operation("rotateSigningSecret")
    def rotate(self, *, grace: _dt.timedelta | str | None = None, algorithm: str | None = None) -> SigningSecretCreated:
        """Makes a new current signing secret, shown in this answer only.

        For ``grace`` (default 24h, at most 168h) the previous secrets keep signing too. ``algorithm``
        ``"ed25519"`` asks for an Ed25519 key (``v1a`` signatures, verified with its public ``whpk_``
        key) where the server offers it. Not retried after a 503 or a lost answer: a repeat would
        rotate twice.
        """
        body = drop_none({"grace": None if grace is None else duration(grace, "grace"), "algorithm": algorithm})
        answer = self._t.call(
            "POST", "/v1/signing-secrets/rotate", operation="rotate signing secret", repeatable=False, body=body
        )
        return decode(SigningSecretCreated.from_dict, answer, "rotate signing secret")


class Audit:
    """The tenant's audit log, ``client.audit`` (a key with ``audit:read``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("listTenantAudit")
    def list(self, *, page_size: int | None = None) -> Iterator[AuditEntry]:
        """Changes to the tenant's configuration and credentials, newest first, page after page."""
        return self._t.pages(lambda cursor: self.list_page(limit=page_size, cursor=cursor))

    @operation("listTenantAudit")
    def list_page(self, *, limit: int | None = None, cursor: str | None = None) -> Page[AuditEntry]:
        """One page of ``GET /v1/audit``."""
        answer = self._t.call(
            "GET", "/v1/audit", operation="list audit log", repeatable=True, query={"limit": limit, "cursor": cursor}
        )
        return decode(lambda b: decode_page(AuditEntry.from_dict, b), answer, "list audit log")
