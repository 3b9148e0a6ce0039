"""Verifying, on the receiving side, that a request is a webhook hookwheel sent, for this body, recently.

What is checked mirrors internal/signing, which signs them, and the Go and TypeScript SDKs:

- Standard Webhooks: ``webhook-signature`` holds space-separated entries, one per key the tenant
  signs with (several during a rotation): ``v1,<base64>``, the HMAC-SHA256 of
  ``<webhook-id>.<webhook-timestamp>.<body>`` keyed by the decoded part of a ``whsec_`` secret, and
  ``v1a,<base64>``, the Ed25519 signature of the same content, checked with a ``whpk_`` public key.
  Any one entry verifying under any one key is enough; entries of other versions are skipped.
- ``webhook-timestamp`` within the tolerance (5 minutes) of now, either way: an older request may be
  a replay.
- ``Hookwheel-Signature``, when present or when ``url`` is given: a JWT (HS256 with a ``whsec_``
  secret, or EdDSA with a ``whpk_`` key) with ``iss`` ``hookwheel``, ``jti`` the webhook-id, ``exp``
  not past (a minute of clock skew allowed), ``body`` the base64url SHA-256 of the body, and ``sub``
  the URL when one is given. The server signs it with its current key only, whose entry comes first
  in ``webhook-signature``: a JWT none of the keys verifies is held against the webhook only when
  one of them made that first entry (of the JWT's kind), or when ``url`` asks for the JWT. So a
  receiver not yet given the new key of a rotation still verifies, on the entry of the old one.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import enum
import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from . import ed25519
from .models import CallbackPayload

DEFAULT_TOLERANCE: Final = _dt.timedelta(minutes=5)
"""How far ``webhook-timestamp`` may be from the receiver's clock, as Standard Webhooks says."""

_JWT_CLOCK_SKEW: Final = 60
_JWT_ISSUER: Final = "hookwheel"
_SECRET_PREFIX: Final = "whsec_"
_PUBLIC_KEY_PREFIX: Final = "whpk_"
_PRIVATE_KEY_PREFIX: Final = "whsk_"
_TIMESTAMP = re.compile(r"^[0-9]{1,15}$")
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]*$")


class HeaderItems(Protocol):
    """Headers that list themselves as (name, value) pairs: Flask's, an ``email.message.Message``."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


HeaderSource = Mapping[str, Any] | HeaderItems | Iterable[tuple[str, str]]
"""Request headers: a dict (any letter case; a list of values is joined), Flask's, Django's or
Starlette's headers, an ``email.message.Message`` (``http.server``), or (name, value) pairs."""


class WebhookFailure(enum.StrEnum):
    """Why a webhook was refused: ``WebhookVerificationError.reason``."""

    MISSING_HEADER = "missing_header"
    INVALID_TIMESTAMP = "invalid_timestamp"
    TIMESTAMP_TOO_OLD = "timestamp_too_old"
    TIMESTAMP_TOO_NEW = "timestamp_too_new"
    NO_MATCHING_SIGNATURE = "no_matching_signature"
    JWT_MISSING = "jwt_missing"
    JWT_MALFORMED = "jwt_malformed"
    JWT_ALGORITHM = "jwt_algorithm"
    JWT_SIGNATURE = "jwt_signature"
    JWT_ISSUER = "jwt_issuer"
    JWT_ID = "jwt_id"
    JWT_EXPIRED = "jwt_expired"
    JWT_BODY = "jwt_body"
    JWT_SUBJECT = "jwt_subject"
    INVALID_JSON = "invalid_json"
    INVALID_CALLBACK = "invalid_callback"


class WebhookVerificationError(Exception):
    """A request that is not a webhook hookwheel sent (or not recently, or not for this body or URL).

    ``reason`` says which check failed; the message says it for a person. Answer such a request 400
    or 401 and do nothing with it.
    """

    def __init__(self, reason: WebhookFailure, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class VerifiedWebhook:
    """A verified webhook."""

    id: str
    """``webhook-id``: the task id, the same on every attempt; deduplicate on it."""
    timestamp: _dt.datetime
    """``webhook-timestamp``: when this attempt was signed."""
    body: bytes
    """The body, exactly as received."""

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (task bodies are text)."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON; None for an empty body."""
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class _Key:
    kind: Literal["v1", "v1a"]
    key: bytes


def verify_webhook(
    keys: str | Sequence[str],
    headers: HeaderSource,
    body: bytes | bytearray | memoryview | str,
    *,
    url: str | None = None,
    tolerance: _dt.timedelta | float = DEFAULT_TOLERANCE,
    now: _dt.datetime | float | None = None,
) -> Any:
    """Verifies a webhook from hookwheel and returns its body parsed as JSON (None for an empty body).

    ``keys`` is the tenant's signing secret (``whsec_...``) or Ed25519 public key (``whpk_...``), or
    several during a rotation: a webhook signed with any of them is accepted. ``body`` must be the raw
    body as received, not a re-serialized parse of it. ``url``, the URL the task names, also requires
    the Hookwheel-Signature JWT to name it, so that a webhook captured on its way to another receiver
    of the same tenant is refused here. ``tolerance`` (a timedelta or seconds) bounds how old or new
    ``webhook-timestamp`` may be; ``now`` replaces the clock (for tests).

    Raises WebhookVerificationError when a check fails (``invalid_json`` for a body that verifies but
    is not JSON: use verify_webhook_signature for those), ValueError for a key that is not one.
    """
    verified = verify_webhook_signature(keys, headers, body, url=url, tolerance=tolerance, now=now)
    try:
        return verified.json()
    except ValueError as err:
        raise WebhookVerificationError(
            WebhookFailure.INVALID_JSON, "the webhook's signature is valid but its body is not JSON"
        ) from err


def verify_callback(
    keys: str | Sequence[str],
    headers: HeaderSource,
    body: bytes | bytearray | memoryview | str,
    *,
    url: str | None = None,
    tolerance: _dt.timedelta | float = DEFAULT_TOLERANCE,
    now: _dt.datetime | float | None = None,
) -> CallbackPayload:
    """Verifies a callback webhook (a task's ``callback`` or ``failure_callback``) and returns its payload.

    As verify_webhook, then the body must be a callback's: ``task_id``, a ``status`` of delivered,
    dead or expired, an attempt number (0 only for an expiry before any attempt) and a ``response``;
    ``invalid_callback`` otherwise. Fields the SDK does not know are kept in ``extra``. The callback's
    webhook-id is the callback task's own id, not the reported task's (``task_id``).
    """
    payload = verify_webhook(keys, headers, body, url=url, tolerance=tolerance, now=now)
    try:
        callback = CallbackPayload.from_dict(payload)
        if not isinstance(callback.response.body, str):
            raise ValueError("response.body is not text")
    except (ValueError, TypeError) as err:
        raise WebhookVerificationError(
            WebhookFailure.INVALID_CALLBACK,
            "the webhook's signature is valid but its body is not a callback's (task_id, status, attempt, response)",
        ) from err
    valid_attempt = callback.attempt >= 1 or (callback.status == "expired" and callback.attempt == 0)
    if callback.status not in ("delivered", "dead", "expired") or not valid_attempt:
        raise WebhookVerificationError(
            WebhookFailure.INVALID_CALLBACK,
            f"the callback's status {callback.status!r} and attempt {callback.attempt} are not a final attempt's",
        )
    return callback


def callback_response_body(payload: CallbackPayload) -> bytes:
    """The bytes of the response a callback reports (its first 64 KiB: ``body_truncated`` says if there was more)."""
    return payload.response.body_bytes()


def verify_webhook_signature(
    keys: str | Sequence[str],
    headers: HeaderSource,
    body: bytes | bytearray | memoryview | str,
    *,
    url: str | None = None,
    tolerance: _dt.timedelta | float = DEFAULT_TOLERANCE,
    now: _dt.datetime | float | None = None,
) -> VerifiedWebhook:
    """Verifies a webhook from hookwheel without interpreting its body; see the module for the checks."""
    key_list = _parse_keys(keys)
    body_bytes = _body_bytes(body)
    now_seconds = _now_seconds(now)
    tolerance_seconds = _tolerance_seconds(tolerance)

    webhook_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signature = _header(headers, "webhook-signature")
    missing = [
        name
        for name, value in (("webhook-id", webhook_id), ("webhook-timestamp", timestamp), ("webhook-signature", signature))
        if not value
    ]
    if missing or webhook_id is None or timestamp is None or signature is None:
        raise WebhookVerificationError(WebhookFailure.MISSING_HEADER, f"missing header {', '.join(missing)}")

    if not _TIMESTAMP.match(timestamp):
        raise WebhookVerificationError(
            WebhookFailure.INVALID_TIMESTAMP, f"webhook-timestamp {timestamp!r} is not Unix seconds"
        )
    signed_at = int(timestamp)
    if signed_at < now_seconds - tolerance_seconds:
        raise WebhookVerificationError(
            WebhookFailure.TIMESTAMP_TOO_OLD,
            f"webhook-timestamp is {now_seconds - signed_at}s old, more than the {tolerance_seconds:g}s allowed",
        )
    if signed_at > now_seconds + tolerance_seconds:
        raise WebhookVerificationError(
            WebhookFailure.TIMESTAMP_TOO_NEW,
            f"webhook-timestamp is {signed_at - now_seconds}s ahead of now, more than the {tolerance_seconds:g}s allowed",
        )

    content = f"{webhook_id}.{timestamp}.".encode() + body_bytes
    entries = [_parse_entry(e) for e in signature.split(" ")]
    # Which entry each key verifies matters below: the first is the current key's.
    matched = [i for i, entry in enumerate(entries) if entry is not None and _entry_verifies(entry, key_list, content)]
    if not matched:
        raise WebhookVerificationError(
            WebhookFailure.NO_MATCHING_SIGNATURE, "no webhook-signature entry matches the body under any of the keys"
        )
    first_entry = entries[0] if matched[0] == 0 else None

    token = _header(headers, "hookwheel-signature")
    if not token:
        if url is not None:
            raise WebhookVerificationError(
                WebhookFailure.JWT_MISSING, "missing header Hookwheel-Signature, needed to check the URL"
            )
    else:
        _verify_jwt(
            token,
            key_list,
            webhook_id=webhook_id,
            body=body_bytes,
            now_seconds=now_seconds,
            url=url,
            ours_first=None if first_entry is None else first_entry[0],
        )
    return VerifiedWebhook(
        id=webhook_id, timestamp=_dt.datetime.fromtimestamp(signed_at, _dt.timezone.utc), body=body_bytes
    )


def _parse_keys(keys: str | Sequence[str]) -> list[_Key]:
    key_list = [keys] if isinstance(keys, str) else list(keys)
    if not key_list:
        raise ValueError("verify_webhook: no signing secret or public key given")
    return [_parse_key(k, i) for i, k in enumerate(key_list)]


def _parse_key(key: str, index: int) -> _Key:
    # The index, never the key, says which one is wrong.
    if not isinstance(key, str):
        raise TypeError(f"verify_webhook: key {index} is a {type(key).__name__}, not text")
    if key.startswith(_PRIVATE_KEY_PREFIX):
        raise ValueError(f"verify_webhook: key {index} is a private signing key (whsk_); give its public key, whpk_")
    if key.startswith(_PUBLIC_KEY_PREFIX):
        raw = _b64decode(key[len(_PUBLIC_KEY_PREFIX) :])
        if raw is None or not ed25519.is_public_key(raw):
            raise ValueError(f'verify_webhook: key {index} is not "whpk_" followed by the base64 of an Ed25519 public key')
        return _Key("v1a", raw)
    raw = _b64decode(key.removeprefix(_SECRET_PREFIX))
    if not raw:
        raise ValueError(f'verify_webhook: key {index} is not "whsec_" followed by standard base64')
    return _Key("v1", raw)


def _parse_entry(entry: str) -> tuple[Literal["v1", "v1a"], bytes] | None:
    version, sep, encoded = entry.partition(",")
    if not sep or version not in ("v1", "v1a"):
        return None
    raw = _b64decode(encoded)
    if raw is None:
        return None
    return ("v1" if version == "v1" else "v1a", raw)


def _entry_verifies(entry: tuple[str, bytes], keys: list[_Key], content: bytes) -> bool:
    kind, sig = entry
    for key in keys:
        if key.kind != kind:
            continue
        if kind == "v1":
            # Constant time: how long a refusal takes tells nothing of how much of a forged MAC was right.
            if hmac.compare_digest(hmac.new(key.key, content, hashlib.sha256).digest(), sig):
                return True
        elif ed25519.verify(key.key, content, sig):
            return True
    return False


def _verify_jwt(
    token: str,
    keys: list[_Key],
    *,
    webhook_id: str,
    body: bytes,
    now_seconds: int,
    url: str | None,
    ours_first: Literal["v1", "v1a"] | None,
) -> None:
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise WebhookVerificationError(WebhookFailure.JWT_MALFORMED, "Hookwheel-Signature is not a JWT (three base64url parts)")
    enc_header, enc_claims, enc_sig = parts
    header = _jwt_json(enc_header)
    claims = _jwt_json(enc_claims)
    sig = _b64url_decode(enc_sig)
    if header is None or claims is None or sig is None:
        raise WebhookVerificationError(
            WebhookFailure.JWT_MALFORMED, "Hookwheel-Signature is not a JWT (its parts are not base64url JSON)"
        )
    # Only the two algorithms hookwheel signs with: a token naming another ("none", or RS256 to be
    # checked against a public key) is refused before anything else.
    alg = header.get("alg")
    if alg == "HS256":
        kind: Literal["v1", "v1a"] = "v1"
    elif alg == "EdDSA":
        kind = "v1a"
    else:
        raise WebhookVerificationError(
            WebhookFailure.JWT_ALGORITHM, f'Hookwheel-Signature alg is {json.dumps(alg)}, want "HS256" or "EdDSA"'
        )
    signing_input = f"{enc_header}.{enc_claims}".encode("ascii")
    verified = any(
        hmac.compare_digest(hmac.new(k.key, signing_input, hashlib.sha256).digest(), sig)
        if kind == "v1"
        else ed25519.verify(k.key, signing_input, sig)
        for k in keys
        if k.kind == kind
    )
    if not verified:
        if url is None and ours_first != kind:
            # Signed with a current key the receiver does not hold (a rotation it has not caught up
            # with): the entry of a key it holds stands alone, as it would without the header.
            return
        raise WebhookVerificationError(WebhookFailure.JWT_SIGNATURE, "Hookwheel-Signature is not signed by any of the keys")

    if claims.get("iss") != _JWT_ISSUER:
        raise WebhookVerificationError(
            WebhookFailure.JWT_ISSUER, f'Hookwheel-Signature iss is {json.dumps(claims.get("iss"))}, want "{_JWT_ISSUER}"'
        )
    if claims.get("jti") != webhook_id:
        raise WebhookVerificationError(WebhookFailure.JWT_ID, "Hookwheel-Signature jti is not the webhook-id")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp + _JWT_CLOCK_SKEW <= now_seconds:
        raise WebhookVerificationError(WebhookFailure.JWT_EXPIRED, "Hookwheel-Signature has expired")
    body_sum = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode("ascii")
    if claims.get("body") != body_sum:
        raise WebhookVerificationError(WebhookFailure.JWT_BODY, "Hookwheel-Signature body hash does not match the body")
    if url is not None and claims.get("sub") != url:
        raise WebhookVerificationError(
            WebhookFailure.JWT_SUBJECT,
            f"Hookwheel-Signature sub is {json.dumps(claims.get('sub'))}, not the URL {json.dumps(url)}",
        )


def _header(headers: HeaderSource, name: str) -> str | None:
    values: list[str] = []
    pairs: Iterable[tuple[str, Any]] = headers.items() if isinstance(headers, Mapping) or hasattr(headers, "items") else headers
    for key, value in pairs:
        if key.lower() != name:
            continue
        if isinstance(value, (list, tuple)):
            values.extend(str(v) for v in value)
        elif value is not None:
            values.append(str(value))
    return " ".join(values) if values else None


def _body_bytes(body: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise TypeError(
        f"verify_webhook: body must be the raw body, bytes or text, not a parsed {type(body).__name__}"
    )


def _now_seconds(now: _dt.datetime | float | None) -> int:
    if now is None:
        return int(time.time())
    if isinstance(now, _dt.datetime):
        if now.tzinfo is None:
            raise ValueError("verify_webhook: now is a naive datetime; give it a time zone")
        return math.floor(now.timestamp())
    # NaN would make every comparison false and accept a webhook of any age.
    if not isinstance(now, (int, float)) or isinstance(now, bool) or not math.isfinite(now):
        raise ValueError("verify_webhook: now is not a valid time")
    return math.floor(now)


def _tolerance_seconds(tolerance: _dt.timedelta | float) -> float:
    seconds = tolerance.total_seconds() if isinstance(tolerance, _dt.timedelta) else tolerance
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError("verify_webhook: tolerance must be a finite duration, at least 0")
    return float(seconds)


def _b64decode(text: str) -> bytes | None:
    """Standard, padded base64, as Go's base64.StdEncoding writes it; None when it is not that."""
    if len(text) % 4:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _b64url_decode(text: str) -> bytes | None:
    """Unpadded base64url, as JWTs are written; None when it is not that."""
    if not _BASE64URL.match(text) or len(text) % 4 == 1:
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _jwt_json(part: str) -> dict[str, Any] | None:
    raw = _b64url_decode(part)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
