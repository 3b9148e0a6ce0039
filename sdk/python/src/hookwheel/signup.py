"""Signing up, where the server allows it (``HOOKWHEEL_SIGNUP``).

Not a tenant's call, since whoever signs up has no API key yet: functions of their own rather than
methods of a Client.
"""

from __future__ import annotations

from typing import Literal

from ._transport import Transport, decode
from ._util import drop_none, operation
from .client import DEFAULT_TIMEOUT
from .models import SignupCreated

SignupMode = Literal["off", "invite", "open"]


@operation("getSignup")
def signup_mode(base_url: str, *, timeout: float = DEFAULT_TIMEOUT) -> SignupMode:
    """Whether tenants may sign up on the server: ``off``, ``invite`` (with an invite code) or ``open``."""
    transport = Transport(base_url, None, timeout=timeout, retries=3, max_retry_wait=30.0, user_agent=None)
    answer = transport.call("GET", "/v1/signup", operation="get sign-up mode", repeatable=True)

    def mode(body: object) -> SignupMode:
        if not isinstance(body, dict) or body.get("mode") not in ("off", "invite", "open"):
            raise ValueError("want {mode: off | invite | open}")
        return body["mode"]  # type: ignore[no-any-return]

    return decode(mode, answer, "get sign-up mode")


@operation("signUp")
def sign_up(base_url: str, name: str, invite_code: str | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> SignupCreated:
    """Makes a tenant named ``name``; the answer holds the only copies of its API key and signing secret.

    A server with sign-up off answers NotFoundError; a missing, unknown, used or expired invite code
    ForbiddenError (``type`` says which); too many sign-ups from one address RateLimitedError. Never
    retried after a 503 or a lost answer: a repeat would make a second tenant, or find the code used.
    """
    # Only 429 is retried, which the server answers before making anything.
    transport = Transport(base_url, None, timeout=timeout, retries=3, max_retry_wait=30.0, user_agent=None)
    op = f"sign up {name!r}"
    answer = transport.call(
        "POST", "/v1/signup", operation=op, repeatable=False, body=drop_none({"name": name, "invite_code": invite_code})
    )
    return decode(SignupCreated.from_dict, answer, op)
