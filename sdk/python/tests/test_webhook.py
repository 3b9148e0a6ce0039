"""verify_webhook against webhooks signed here the way internal/signing signs them (v1 and v1a), and
against headers the Go signer made (sdk/typescript/test/fixtures/go-signed.json and, for an Ed25519 key,
go-signed-ed25519.json)."""

from __future__ import annotations

import base64
import datetime as dt
import email.message
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from hookwheel import (
    WebhookFailure,
    WebhookVerificationError,
    callback_response_body,
    verify_callback,
    verify_webhook,
    verify_webhook_signature,
)
from support import b64url, new_ed25519_key, new_secret, sign

BODY = '{"hello":"world"}'
GO_SIGNED = Path(__file__).resolve().parents[2] / "typescript" / "test" / "fixtures" / "go-signed.json"
GO_SIGNED_ED25519 = GO_SIGNED.with_name("go-signed-ed25519.json")


def refused(reason: WebhookFailure, keys: Any, headers: Any, body: Any, **options: Any) -> WebhookVerificationError:
    with pytest.raises(WebhookVerificationError) as caught:
        verify_webhook(keys, headers, body, **options)
    assert caught.value.reason == reason, str(caught.value)
    return caught.value


def test_accepts_a_webhook_and_returns_its_parsed_body() -> None:
    secret = new_secret()
    assert verify_webhook(secret, sign([secret]), BODY) == {"hello": "world"}


def test_takes_the_body_as_bytes_and_headers_in_any_form() -> None:
    secret = new_secret()
    body = '{"city":"Zürich","emoji":"🚀"}'
    headers = sign([secret], body=body)
    want = {"city": "Zürich", "emoji": "🚀"}
    assert verify_webhook([secret], headers, body.encode()) == want
    assert verify_webhook([secret], headers, bytearray(body.encode())) == want
    assert verify_webhook([secret], headers, memoryview(body.encode())) == want
    assert verify_webhook(secret, list(headers.items()), body) == want
    message = email.message.Message()
    for k, v in headers.items():
        message[k] = v
    assert verify_webhook(secret, message, body) == want
    # Values as lists, as the e2e receiver records them.
    assert verify_webhook(secret, {k: [v] for k, v in headers.items()}, body) == want


def test_reads_headers_in_any_letter_case() -> None:
    secret = new_secret()
    headers = sign([secret])
    verify_webhook(secret, {k.lower(): v for k, v in headers.items()}, BODY)
    verify_webhook(secret, {k.upper(): v for k, v in headers.items()}, BODY)


def test_verifies_the_headers_the_go_signer_made() -> None:
    fx = json.loads(GO_SIGNED.read_text())
    now = fx["signedAt"] + 10
    for secret in fx["secrets"]:
        got = verify_webhook_signature([secret], fx["headers"], fx["body"], now=now)
        assert got.id == fx["headers"]["webhook-id"]
        assert got.timestamp == dt.datetime.fromtimestamp(fx["signedAt"], dt.timezone.utc)
        assert got.text == fx["body"]
    assert verify_webhook(fx["secrets"], fx["headers"], fx["body"], now=now, url=fx["url"]) == {
        "order": 42,
        "note": "café ☕",
    }
    refused(WebhookFailure.JWT_SUBJECT, fx["secrets"], fx["headers"], fx["body"], now=now, url="https://example.com/hooks/order")
    refused(WebhookFailure.NO_MATCHING_SIGNATURE, fx["secrets"], fx["headers"], fx["body"].replace("42", "43"), now=now)
    refused(WebhookFailure.TIMESTAMP_TOO_OLD, fx["secrets"], fx["headers"], fx["body"], now=fx["signedAt"] + 301)


def test_verifies_the_headers_the_go_signer_made_with_an_ed25519_key() -> None:
    # A rotation from an HMAC secret to an Ed25519 key pair: a v1a entry from the new key, a v1 entry
    # from the old secret, and an EdDSA JWT from the current (Ed25519) key.
    fx = json.loads(GO_SIGNED_ED25519.read_text())
    now = fx["signedAt"] + 10
    public_key, old_secret = fx["keys"]
    assert public_key.startswith("whpk_") and old_secret.startswith("whsec_")
    for key in fx["keys"]:
        got = verify_webhook_signature([key], fx["headers"], fx["body"], now=now)
        assert got.id == fx["headers"]["webhook-id"]
    assert verify_webhook([public_key], fx["headers"], fx["body"], now=now, url=fx["url"]) == {"order": 42}
    refused(WebhookFailure.JWT_SUBJECT, [public_key], fx["headers"], fx["body"], now=now, url="https://example.com/other")


class TestEd25519:
    def test_accepts_a_v1a_webhook_with_the_public_key(self) -> None:
        key = new_ed25519_key()
        headers = sign([key])
        assert headers["webhook-signature"].startswith("v1a,")
        assert verify_webhook(key.whpk, headers, BODY) == {"hello": "world"}
        assert verify_webhook(key.whpk, headers, BODY, url="https://receiver.example/hook") == {"hello": "world"}

    def test_refuses_a_v1a_webhook_under_another_key_or_tampered(self) -> None:
        key = new_ed25519_key()
        headers = sign([key])
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, new_ed25519_key().whpk, headers, BODY)
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, key.whpk, headers, '{"hello":"World"}')
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, key.whpk, {**headers, "webhook-id": "another"}, BODY)
        sig = base64.b64decode(headers["webhook-signature"][4:])
        flipped = bytes([sig[0] ^ 1]) + sig[1:]
        bad = {**headers, "webhook-signature": "v1a," + base64.b64encode(flipped).decode()}
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, key.whpk, bad, BODY)
        # An HMAC secret never verifies a v1a entry, nor a public key a v1 one.
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, new_secret(), headers, BODY)
        secret = new_secret()
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, key.whpk, sign([secret]), BODY)

    def test_accepts_any_entry_during_a_rotation_between_algorithms(self) -> None:
        key, secret = new_ed25519_key(), new_secret()
        # Rotating from an HMAC secret to an Ed25519 key: the new key's entry first.
        headers = sign([key, secret])
        url = "https://receiver.example/hook"
        verify_webhook(key.whpk, headers, BODY, url=url)
        verify_webhook([secret, key.whpk], headers, BODY, url=url)
        # Holding only the old secret: its entry verifies; the EdDSA JWT of the new key is passed over.
        verify_webhook(secret, headers, BODY)
        refused(WebhookFailure.JWT_SIGNATURE, secret, headers, BODY, url=url)

    def test_refuses_an_eddsa_jwt_its_key_did_not_sign(self) -> None:
        key = new_ed25519_key()
        headers = sign([key], jwt_key=new_ed25519_key())
        refused(WebhookFailure.JWT_SIGNATURE, key.whpk, headers, BODY)

    def test_passes_over_an_hs256_jwt_when_it_holds_only_the_public_key(self) -> None:
        # The server may sign the JWT with an HMAC secret a holder of the public key has not got.
        key, secret = new_ed25519_key(), new_secret()
        headers = sign([key], jwt_key=secret)
        assert verify_webhook(key.whpk, headers, BODY) == {"hello": "world"}
        refused(WebhookFailure.JWT_SIGNATURE, key.whpk, headers, BODY, url="https://receiver.example/hook")

    def test_refuses_keys_that_are_not_public_keys(self) -> None:
        headers = sign([new_ed25519_key()])
        for bad in ("whpk_", "whpk_AAAA", "whpk_" + base64.b64encode(b"\xff" * 32).decode(), "whpk_not base64!"):
            with pytest.raises(ValueError, match="key 0"):
                verify_webhook(bad, headers, BODY)
        with pytest.raises(ValueError, match="private"):
            verify_webhook("whsk_" + base64.b64encode(b"\x01" * 64).decode(), headers, BODY)


class TestSecretRotation:
    def test_accepts_a_webhook_signed_with_both_secrets_holding_either_or_both(self) -> None:
        current, previous = new_secret(), new_secret()
        headers = sign([current, previous])
        url = "https://receiver.example/hook"
        verify_webhook([current, previous], headers, BODY, url=url)
        verify_webhook([previous, current], headers, BODY, url=url)
        verify_webhook([current], headers, BODY, url=url)

    def test_accepts_before_it_holds_the_new_secret_a_webhook_whose_jwt_the_new_one_signed(self) -> None:
        current, previous = new_secret(), new_secret()
        headers = sign([current, previous])
        verify_webhook([previous], headers, BODY)
        # Binding to the URL needs the JWT, so it needs the current secret.
        refused(WebhookFailure.JWT_SIGNATURE, [previous], headers, BODY, url="https://receiver.example/hook")

    def test_refuses_a_jwt_the_secret_of_the_first_entry_does_not_verify(self) -> None:
        current = new_secret()
        headers = sign([current], jwt_key=new_secret())
        refused(WebhookFailure.JWT_SIGNATURE, [current], headers, BODY)

    def test_refuses_a_webhook_signed_with_a_secret_it_does_not_hold(self) -> None:
        refused(WebhookFailure.NO_MATCHING_SIGNATURE, [new_secret(), new_secret()], sign([new_secret()]), BODY)


def test_refuses_a_tampered_body_id_or_timestamp() -> None:
    secret = new_secret()
    headers = sign([secret])
    refused(WebhookFailure.NO_MATCHING_SIGNATURE, secret, headers, '{"hello":"World"}')
    refused(WebhookFailure.NO_MATCHING_SIGNATURE, secret, {**headers, "webhook-id": "another"}, BODY)
    earlier = str(int(headers["webhook-timestamp"]) - 1)
    refused(WebhookFailure.NO_MATCHING_SIGNATURE, secret, {**headers, "webhook-timestamp": earlier}, BODY)


def test_refuses_signature_entries_of_other_versions_or_mangled() -> None:
    secret = new_secret()
    headers = sign([secret])
    mac = headers["webhook-signature"][3:]
    for bad in (f"v2,{mac}", f"v1a,{mac}", mac, f"v1,{mac[:-2]}", "v1,!!!!", ""):
        reason = WebhookFailure.MISSING_HEADER if bad == "" else WebhookFailure.NO_MATCHING_SIGNATURE
        refused(reason, secret, {**headers, "webhook-signature": bad}, BODY)
    # Unknown versions beside a good entry are skipped, as Standard Webhooks says.
    verify_webhook(secret, {**headers, "webhook-signature": f"v2,abcd v1,{mac}"}, BODY)


def test_refuses_a_timestamp_outside_the_tolerance_either_way() -> None:
    secret = new_secret()
    # One instant for signing and verifying: a second ticking between them would move the edges.
    t = int(time.time())
    old = sign([secret], at=t - 301, jwt_claims={"exp": t + 60})
    refused(WebhookFailure.TIMESTAMP_TOO_OLD, secret, old, BODY, now=t)
    verify_webhook(secret, old, BODY, tolerance=400, now=t)
    verify_webhook(secret, old, BODY, tolerance=dt.timedelta(minutes=6), now=dt.datetime.fromtimestamp(t, dt.timezone.utc))
    future = sign([secret], at=t + 301)
    refused(WebhookFailure.TIMESTAMP_TOO_NEW, secret, future, BODY, now=t)
    edge = sign([secret], at=t - 300)
    verify_webhook(secret, edge, BODY, now=t)
    refused(WebhookFailure.INVALID_TIMESTAMP, secret, {**old, "webhook-timestamp": "1e9"}, BODY)


def test_refuses_a_webhook_missing_a_header_naming_it() -> None:
    secret = new_secret()
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        headers = sign([secret])
        del headers[name]
        err = refused(WebhookFailure.MISSING_HEADER, secret, headers, BODY)
        assert name in str(err)


class TestHookwheelSignature:
    NOW = int(time.time())

    @pytest.mark.parametrize(
        ("name", "jwt", "reason"),
        [
            ("alg none", {"jwt_header": {"alg": "none", "typ": "JWT"}}, WebhookFailure.JWT_ALGORITHM),
            ("alg HS512", {"jwt_header": {"alg": "HS512", "typ": "JWT"}}, WebhookFailure.JWT_ALGORITHM),
            ("another secret", {"jwt_key": new_secret()}, WebhookFailure.JWT_SIGNATURE),
            ("another issuer", {"jwt_claims": {"iss": "someone"}}, WebhookFailure.JWT_ISSUER),
            ("another jti", {"jwt_claims": {"jti": "another"}}, WebhookFailure.JWT_ID),
            ("expired", {"jwt_claims": {"exp": NOW - 120}}, WebhookFailure.JWT_EXPIRED),
            ("expired a minute ago", {"jwt_claims": {"exp": NOW - 60}}, WebhookFailure.JWT_EXPIRED),
            ("no exp", {"jwt_claims": {"exp": None}}, WebhookFailure.JWT_EXPIRED),
            ("exp as text", {"jwt_claims": {"exp": str(NOW + 300)}}, WebhookFailure.JWT_EXPIRED),
            ("another body", {"jwt_claims": {"body": b64url(hashlib.sha256(b"other").digest())}}, WebhookFailure.JWT_BODY),
            (
                "a padded body hash",
                {"jwt_claims": {"body": base64.b64encode(hashlib.sha256(BODY.encode()).digest()).decode()}},
                WebhookFailure.JWT_BODY,
            ),
        ],
    )
    def test_refuses_a_bad_token(self, name: str, jwt: dict[str, Any], reason: WebhookFailure) -> None:
        secret = new_secret()
        refused(reason, secret, sign([secret], at=self.NOW, **jwt), BODY, now=self.NOW)

    def test_allows_a_minute_of_clock_skew_on_exp(self) -> None:
        secret = new_secret()
        verify_webhook(secret, sign([secret], at=self.NOW, jwt_claims={"exp": self.NOW - 55}), BODY, now=self.NOW)

    def test_refuses_a_token_that_is_not_a_jwt(self) -> None:
        secret = new_secret()
        headers = sign([secret])
        h, c, s = headers["Hookwheel-Signature"].split(".")
        for bad in ("garbage", f"{h}.{c}", f"{h}.{c}.{s}.x", f"{h}.!!.{s}", f"{b64url('[1]')}.{c}.{s}", f"{h}.{c}."):
            refused(WebhookFailure.JWT_MALFORMED, secret, {**headers, "Hookwheel-Signature": bad}, BODY)

    def test_checks_sub_against_the_url_when_one_is_given_and_then_requires_the_token(self) -> None:
        secret = new_secret()
        headers = sign([secret], url="https://receiver.example/hook?a=1")
        verify_webhook(secret, headers, BODY, url="https://receiver.example/hook?a=1")
        refused(WebhookFailure.JWT_SUBJECT, secret, headers, BODY, url="https://receiver.example/other")
        without_jwt = {k: v for k, v in headers.items() if k != "Hookwheel-Signature"}
        verify_webhook(secret, without_jwt, BODY)
        refused(WebhookFailure.JWT_MISSING, secret, without_jwt, BODY, url="https://receiver.example/hook?a=1")


def test_returns_none_for_an_empty_body_and_refuses_a_body_that_is_not_json() -> None:
    secret = new_secret()
    assert verify_webhook(secret, sign([secret], body=""), "") is None
    refused(WebhookFailure.INVALID_JSON, secret, sign([secret], body="plain text"), "plain text")
    got = verify_webhook_signature(secret, sign([secret], body="plain text"), "plain text")
    assert got.body == b"plain text"
    assert got.text == "plain text"


def test_raises_valueerror_not_a_verification_error_for_a_bad_key_or_a_parsed_body() -> None:
    secret = new_secret()
    headers = sign([secret])
    for bad_keys in ("whsec_not base64!", "whsec_", []):
        with pytest.raises(ValueError):
            verify_webhook(bad_keys, headers, "{}")
    with pytest.raises(TypeError):
        verify_webhook(secret, headers, {"hello": "world"})  # type: ignore[arg-type]


def test_accepts_a_secret_without_its_whsec_prefix() -> None:
    secret = new_secret()
    verify_webhook(secret.removeprefix("whsec_"), sign([secret]), BODY)


def test_refuses_options_that_would_switch_the_timestamp_check_off() -> None:
    secret = new_secret()
    old = sign([secret], at=1_000_000_000)
    bad: list[dict[str, Any]] = [
        {"tolerance": math.nan},
        {"tolerance": math.inf},
        {"tolerance": -1},
        {"now": math.nan},
        {"now": dt.datetime(2026, 1, 1)},
    ]
    for options in bad:
        with pytest.raises(ValueError):
            verify_webhook(secret, old, BODY, **options)


class TestVerifyCallback:
    DELIVERED = json.dumps(
        {
            "task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
            "status": "delivered",
            "attempt": 2,
            "error": None,
            "response": {"status_code": 200, "headers": {"Content-Type": "text/plain"}, "body": "/wBvaw==", "body_truncated": False},
            "added_later": True,
        }
    )

    def test_returns_the_payload_of_a_signed_callback_and_the_responses_bytes(self) -> None:
        secret = new_secret()
        payload = verify_callback(secret, sign([secret], body=self.DELIVERED), self.DELIVERED)
        assert payload.task_id == "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41"
        assert payload.status == "delivered"
        assert payload.attempt == 2
        assert payload.response.status_code == 200
        assert payload.extra == {"added_later": True}, "fields it does not know are kept"
        assert callback_response_body(payload) == bytes([0xFF, 0, 0x6F, 0x6B])

    def test_reads_a_callback_of_a_death_with_no_response(self) -> None:
        secret = new_secret()
        body = json.dumps(
            {
                "task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
                "status": "dead",
                "attempt": 10,
                "error": "no response within the 30s timeout",
                "response": {"status_code": None, "headers": {}, "body": "", "body_truncated": False},
            }
        )
        payload = verify_callback(secret, sign([secret], body=body), body)
        assert payload.status == "dead"
        assert payload.response.status_code is None
        assert payload.error == "no response within the 30s timeout"
        assert callback_response_body(payload) == b""

    def test_reads_an_expiry_before_any_attempt_and_refuses_attempt_0_of_any_other_status(self) -> None:
        secret = new_secret()

        def expiry(status: str) -> str:
            return json.dumps(
                {
                    "task_id": "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
                    "status": status,
                    "attempt": 0,
                    "error": "expired before attempt 1 could start",
                    "response": {"status_code": None, "headers": {}, "body": "", "body_truncated": False},
                }
            )

        body = expiry("expired")
        assert verify_callback(secret, sign([secret], body=body), body).attempt == 0
        dead = expiry("dead")
        with pytest.raises(WebhookVerificationError) as caught:
            verify_callback(secret, sign([secret], body=dead), dead)
        assert caught.value.reason == WebhookFailure.INVALID_CALLBACK

    def test_refuses_a_forged_callback_and_a_signed_body_that_is_not_a_callback(self) -> None:
        secret = new_secret()
        with pytest.raises(WebhookVerificationError) as caught:
            verify_callback(new_secret(), sign([secret], body=self.DELIVERED), self.DELIVERED)
        assert caught.value.reason == WebhookFailure.NO_MATCHING_SIGNATURE
        for body in ('{"hello":"world"}', '{"task_id":"x","status":"retrying","attempt":1,"response":{"body":""}}', ""):
            with pytest.raises(WebhookVerificationError) as caught:
                verify_callback(secret, sign([secret], body=body), body)
            assert caught.value.reason == WebhookFailure.INVALID_CALLBACK
