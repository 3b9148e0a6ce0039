"""Sending one call to the API: the request, its retries, and the reading of its answer.

A call is retried when that cannot do anything twice. A 429 is retried whatever the call, since the
API answers 429 (rate limit, quota) before acting. A 503, or a request that got no answer, only when
the call is ``repeatable``: reads, creations carrying an Idempotency-Key, and changes a repeat leaves
as the first left them. The wait before a retry is the answer's ``Retry-After`` when it has one, else
an exponential backoff with jitter; a server asking for longer than ``max_retry_wait`` gets no retry
(its error comes back at once, carrying ``retry_after``).
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ServerError, response_error
from .models import Page

__version__ = "0.1.0"

T = TypeVar("T")

Query = Mapping[str, str | int | bool | Sequence[str] | None]

# The first wait of the backoff used when the server gives no Retry-After.
_MIN_RETRY_WAIT = 0.25


class HookwheelConnectionError(ConnectionError):
    """No answer came from the server (refused, reset, timed out, name not found), after any retries."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: Any


class Transport:
    """Sends requests to one server with one credential; shared by every part of a Client."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float,
        retries: int,
        max_retry_wait: float,
        user_agent: str | None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base URL {base_url!r}: want an http or https URL such as http://localhost:8080")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.retries = max(0, retries)
        self.max_retry_wait = max_retry_wait
        ua = f"hookwheel-python/{__version__}"
        self.user_agent = f"{user_agent} {ua}" if user_agent else ua
        # Redirects are not followed: the API answers none, and following one would resend the key.
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self._opener = urllib.request.build_opener(*handlers)
        self._sleep: Callable[[float], None] = time.sleep

    def call(
        self,
        method: str,
        path: str,
        *,
        operation: str,
        repeatable: bool,
        query: Query | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        expect: Sequence[int] = (200, 201),
    ) -> Response:
        """Sends one call, retried as the module says, and returns its answer or raises its HookwheelError."""
        url = self.base_url + path
        if query:
            url += "?" + encode_query(query)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        request_headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self._token:
            request_headers["Authorization"] = f"Bearer {self._token}"
        if data is not None:
            request_headers["Content-Type"] = content_type
        request_headers.update(headers or {})

        tries = 0
        while True:
            tries += 1
            retries_left = tries <= self.retries
            try:
                answer = self._send(method, url, data, request_headers)
            except HookwheelConnectionError as err:
                if not (repeatable and retries_left and _retryable_transport_error(err.__cause__)):
                    raise HookwheelConnectionError(f"{operation}: {err}") from err.__cause__
                self._sleep(self._backoff(tries))
                continue
            if answer.status in expect:
                return answer
            error = response_error(answer.status, "", answer.body, answer.headers, operation=operation)
            retryable = answer.status == 429 or (answer.status == 503 and repeatable)
            if not retryable or not retries_left:
                raise error
            if error.retry_after is not None and error.retry_after > self.max_retry_wait:
                # Coming back earlier than asked would only be refused again.
                raise error
            wait = error.retry_after if error.retry_after is not None else self._backoff(tries)
            self._sleep(wait)

    def pages(self, fetch: Callable[[str | None], Page[T]]) -> Iterator[T]:
        """Every item of the pages ``fetch`` returns, from the first to the one without a next cursor."""
        cursor: str | None = None
        while True:
            page = fetch(cursor)
            yield from page.data
            following = page.next_cursor or None
            if following is None:
                return
            if following == cursor:
                # A page that hands back its own cursor would be read for ever.
                raise ServerError(200, title="unexpected answer", detail=f"the server answered cursor {following!r} with itself")
            cursor = following

    def _send(self, method: str, url: str, data: bytes | None, headers: Mapping[str, str]) -> Response:
        request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
        try:
            with self._opener.open(request, timeout=self.timeout) as reply:
                return Response(reply.status, _header_map(reply.headers), _read_body(reply.read(), reply.headers))
        except urllib.error.HTTPError as reply:
            with reply:
                raw = reply.read()
            return Response(reply.code, _header_map(reply.headers), _read_body(raw, reply.headers))
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            cause = err.reason if isinstance(err, urllib.error.URLError) and isinstance(err.reason, BaseException) else err
            raise HookwheelConnectionError(str(cause)) from cause

    def _backoff(self, tries: int) -> float:
        ceiling = min(_MIN_RETRY_WAIT * 2.0 ** min(tries - 1, 30), self.max_retry_wait)
        # Half fixed, half random: clients refused together do not come back together.
        return ceiling / 2 + random.random() * ceiling / 2


def _retryable_transport_error(err: BaseException | None) -> bool:
    # A certificate the client does not trust stays untrusted however often it is asked.
    return not isinstance(err, ssl.SSLCertVerificationError)


def _header_map(headers: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in headers.items():
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _read_body(raw: bytes, headers: Any) -> Any:
    content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    text = raw.decode("utf-8", errors="replace")
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text
    return text


def encode_query(query: Query) -> str:
    """The query string of ``query``: None values left out, booleans as true/false, lists as repeated names."""
    pairs: list[tuple[str, str]] = []
    for name, value in query.items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((name, "true" if value else "false"))
        elif isinstance(value, (str, int)):
            pairs.append((name, str(value)))
        else:
            pairs.extend((name, str(v)) for v in value)
    return urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


def path_segment(value: str) -> str:
    """``value`` escaped as one path segment (flow keys hold ``:``, ``@``, ``+`` and ``=``; ``*`` is a key)."""
    # As JavaScript's encodeURIComponent escapes, which the server is known to read back.
    return urllib.parse.quote(str(value), safe="-_.!~*'()")


def decode(cls: Callable[[Any], T], answer: Response, operation: str) -> T:
    """The answer's body decoded by ``cls``; a body it cannot decode is a ServerError, not a crash."""
    try:
        return cls(answer.body)
    except (ValueError, TypeError, KeyError) as err:
        raise ServerError(answer.status, title="unexpected answer", detail=str(err), operation=operation) from err


def decode_page(decode_item: Callable[[Any], T], body: Any) -> Page[T]:
    """A page of a list answer, ``{"data": [...], "next_cursor": ...}``."""
    if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
        raise ValueError("want a list answer, {data, next_cursor}")
    cursor = body.get("next_cursor")
    return Page(data=[decode_item(item) for item in body["data"]], next_cursor=cursor if isinstance(cursor, str) and cursor else None)


def decode_list(decode_item: Callable[[Any], T], body: Any) -> list[T]:
    """The items of an answer that is one list, ``{"data": [...]}``."""
    return decode_page(decode_item, body).data


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None
