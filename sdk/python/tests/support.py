"""What the offline tests share: a local HTTP server standing in for the API, and signing as hookwheel signs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hookwheel import ed25519


@dataclass
class Recorded:
    """One request as the fake API got it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What the fake API answers: a status, headers, and a JSON body (or raw bytes); ``drop`` closes the
    connection without answering, as a crashed server or a reset would."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    drop: bool = False


Responder = Callable[[Recorded], Reply]


class FakeAPI:
    """An HTTP server on 127.0.0.1 that records every request and answers with ``respond``.

    ``respond`` may be a function of the request, or a list of replies given out in turn (the last
    one repeated).
    """

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._respond: Responder = lambda _: Reply(404, {"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no route"})
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                url = urllib.parse.urlsplit(self.path)
                rec = Recorded(
                    method=self.command,
                    path=url.path,
                    query=urllib.parse.parse_qs(url.query, keep_blank_values=True),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with api._lock:
                    api.requests.append(rec)
                    reply = api._respond(rec)
                if reply.drop:
                    self.close_connection = True
                    return
                payload = reply.raw if reply.raw is not None else (b"" if reply.body is None else json.dumps(reply.body).encode())
                self.send_response(reply.status)
                content_type = "application/json"
                if reply.raw is not None:
                    content_type = "text/html"
                elif reply.status >= 400:
                    content_type = "application/problem+json"
                headers = {"Content-Type": content_type, **reply.headers}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def respond(self, respond: Responder | list[Reply]) -> None:
        if isinstance(respond, list):
            replies = list(respond)

            def next_reply(_: Recorded) -> Reply:
                return replies.pop(0) if len(replies) > 1 else replies[0]

            self._respond = next_reply
        else:
            self._respond = respond

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def problem(status: int, title: str, detail: str, **more: Any) -> dict[str, Any]:
    return {"type": more.pop("type", "about:blank"), "title": title, "status": status, "detail": detail, **more}


def task_json(task_id: str = "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41", **fields: Any) -> dict[str, Any]:
    """A task as the server answers one."""
    task = {
        "id": task_id,
        "status": "scheduled",
        "url": "https://example.com/hooks/order",
        "method": "POST",
        "run_at": "2026-11-22T10:00:00.123456789Z",
        "created_at": "2026-11-22T09:30:00.412Z",
        "updated_at": "2026-11-22T09:30:00.412Z",
        "attempts": 0,
        "max_attempts": 10,
        "timeout": "30s",
        "retry": {"max_attempts": 10, "min_backoff": "1s", "max_backoff": "1h"},
        "next_attempt_at": "2026-11-22T10:00:00Z",
        "last_status_code": None,
        "last_error": None,
        "idempotency_key": None,
    }
    task.update(fields)
    return task


# Signing, as internal/signing signs: one entry per key, the JWT with the first.


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"))


def b64url(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True)
class Ed25519Key:
    """A test signing key: its seed, and its public key as a receiver is given it (``whpk_``)."""

    seed: bytes

    @property
    def public(self) -> bytes:
        return ed25519_public_key(self.seed)

    @property
    def whpk(self) -> str:
        return "whpk_" + base64.b64encode(self.public).decode()

    def sign(self, message: bytes) -> bytes:
        return ed25519_sign(self.seed, message)


def new_ed25519_key() -> Ed25519Key:
    return Ed25519Key(os.urandom(32))


def _expand(seed: bytes) -> tuple[int, bytes]:
    digest = hashlib.sha512(seed).digest()
    scalar = int.from_bytes(digest[:32], "little")
    scalar = (scalar & ((1 << 254) - 8)) | (1 << 254)
    return scalar, digest[32:]


def ed25519_public_key(seed: bytes) -> bytes:
    """RFC 8032 5.1.5: the public key of a 32-byte seed (signing lives in the tests only)."""
    scalar, _ = _expand(seed)
    return ed25519.encode_point(ed25519._double_scalar_mult(scalar, ed25519.BASE, 0, ed25519._IDENTITY))


def ed25519_sign(seed: bytes, message: bytes) -> bytes:
    """RFC 8032 5.1.6: the signature of ``message`` with the key of ``seed``."""
    scalar, prefix = _expand(seed)
    public = ed25519_public_key(seed)
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % ed25519.L
    r_encoded = ed25519.encode_point(ed25519._double_scalar_mult(r, ed25519.BASE, 0, ed25519._IDENTITY))
    k = int.from_bytes(hashlib.sha512(r_encoded + public + message).digest(), "little") % ed25519.L
    return r_encoded + ((r + k * scalar) % ed25519.L).to_bytes(32, "little")


def sign(
    keys: list[str | Ed25519Key],
    *,
    webhook_id: str = "01a2021f-503b-7651-aff3-c59e9afa4a43",
    url: str = "https://receiver.example/hook",
    body: str | bytes = '{"hello":"world"}',
    at: int | None = None,
    jwt_header: dict[str, Any] | None = None,
    jwt_claims: dict[str, Any] | None = None,
    jwt_key: str | Ed25519Key | None = None,
) -> dict[str, str]:
    """The headers of a webhook signed with ``keys`` (``whsec_`` secrets make ``v1`` entries, Ed25519 keys
    ``v1a``), the JWT with ``jwt_key`` or the first key; ``jwt_claims`` overrides claims (None removes one)."""
    at = int(time.time()) if at is None else at
    body_bytes = body.encode() if isinstance(body, str) else body
    content = f"{webhook_id}.{at}.".encode() + body_bytes
    entries = []
    for key in keys:
        if isinstance(key, Ed25519Key):
            entries.append("v1a," + base64.b64encode(key.sign(content)).decode())
        else:
            entries.append("v1," + base64.b64encode(hmac.new(secret_key(key), content, hashlib.sha256).digest()).decode())
    signer = jwt_key if jwt_key is not None else keys[0]
    header = jwt_header or {"alg": "EdDSA" if isinstance(signer, Ed25519Key) else "HS256", "typ": "JWT"}
    claims: dict[str, Any] = {
        "iss": "hookwheel",
        "sub": url,
        "jti": webhook_id,
        "iat": at,
        "exp": at + 300,
        "body": b64url(hashlib.sha256(body_bytes).digest()),
    }
    for name, value in (jwt_claims or {}).items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    signing_input = f"{b64url(json.dumps(header))}.{b64url(json.dumps(claims))}"
    if isinstance(signer, Ed25519Key):
        jwt_sig = signer.sign(signing_input.encode())
    else:
        jwt_sig = hmac.new(secret_key(signer), signing_input.encode(), hashlib.sha256).digest()
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(at),
        "webhook-signature": " ".join(entries),
        "Hookwheel-Signature": f"{signing_input}.{b64url(jwt_sig)}",
    }
