"""The SDK calls every operation of openapi/openapi.yaml, but those it leaves out on purpose, listed here with why.

A new operation in the document fails this test until a method declares it (``@operation``) or it is
added to LEFT_OUT; so does a method naming an operation the document no longer has.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

import hookwheel
from hookwheel._util import OPERATIONS_ATTR

SPEC = Path(__file__).resolve().parents[3] / "openapi" / "openapi.yaml"

_ADMIN = "the operator's admin API (HOOKWHEEL_ADMIN_TOKEN), which the hookwheel command and the dashboard serve"
LEFT_OUT: dict[str, str] = {
    **{
        op: _ADMIN
        for op in (
            "listTenants",
            "createTenant",
            "getTenant",
            "updateTenant",
            "deleteTenant",
            "suspendTenant",
            "resumeTenant",
            "listTenantKeys",
            "createTenantKey",
            "revokeTenantKey",
            "listUsage",
            "listAudit",
            "listInvites",
            "createInvite",
            "revokeInvite",
            "listBreakers",
            "listNodes",
        )
    },
    "signIn": "the dashboard's session, a cookie for a browser; programs use API keys",
    "getSession": "the dashboard's session, a cookie for a browser; programs use API keys",
    "signOut": "the dashboard's session, a cookie for a browser; programs use API keys",
    "listPortalTasks": "the portal page's own call, made with a link's token, not a tenant's key",
    "getPortalTask": "the portal page's own call, made with a link's token, not a tenant's key",
    "healthz": "an operations probe for load balancers and orchestrators, not an API call",
    "readyz": "an operations probe for load balancers and orchestrators, not an API call",
    "metrics": "Prometheus scrapes it; not an API call",
    "getOpenAPI": "the API document itself",
}

_OPERATION_ID = re.compile(r"^\s+operationId:\s*['\"]?([A-Za-z0-9_]+)['\"]?\s*$")


def spec_operations() -> set[str]:
    """The operationIds of the OpenAPI document, read line by line (no YAML parser needed)."""
    ops = [m.group(1) for line in SPEC.read_text().splitlines() if (m := _OPERATION_ID.match(line))]
    assert len(ops) == len(set(ops)), "an operationId is used twice"
    return set(ops)


def sdk_operations() -> dict[str, list[str]]:
    """Every operation a public method or function of the SDK declares, with where."""
    client = hookwheel.Client("http://localhost:1", "hw_k_s")
    owners: list[tuple[str, object]] = [("Client", client)]
    owners += [(name, group) for name, group in vars(client).items() if not name.startswith("_")]
    found: dict[str, list[str]] = {}
    for owner_name, owner in owners:
        for name, member in inspect.getmembers(owner, callable):
            if name.startswith("_"):
                continue
            for op in getattr(member, OPERATIONS_ATTR, ()):
                found.setdefault(op, []).append(f"{owner_name}.{name}")
    for name in hookwheel.__all__:
        for op in getattr(getattr(hookwheel, name), OPERATIONS_ATTR, ()):
            found.setdefault(op, []).append(name)
    return found


def test_the_spec_has_operations() -> None:
    # A scan that finds nothing would make the other tests pass vacuously.
    assert len(spec_operations()) > 50
    assert {"createTask", "listTasks", "getCaller"} <= spec_operations()


def test_every_operation_is_called_or_left_out_with_a_reason() -> None:
    spec = spec_operations()
    covered = set(sdk_operations())
    missing = sorted(spec - covered - set(LEFT_OUT))
    assert not missing, f"operations of openapi.yaml the SDK lacks (add a method with @operation, or to LEFT_OUT): {missing}"


def test_the_sdk_names_only_operations_of_the_spec() -> None:
    unknown = {op: where for op, where in sdk_operations().items() if op not in spec_operations()}
    assert not unknown, f"methods naming operations openapi.yaml does not have: {unknown}"


def test_left_out_lists_only_operations_of_the_spec_the_sdk_does_not_call() -> None:
    spec = spec_operations()
    stale = sorted(set(LEFT_OUT) - spec)
    assert not stale, f"LEFT_OUT names operations openapi.yaml no longer has: {stale}"
    both = sorted(set(LEFT_OUT) & set(sdk_operations()))
    assert not both, f"LEFT_OUT names operations the SDK calls: {both}"
    assert all(reason.strip() for reason in LEFT_OUT.values())


def test_a_new_operation_in_the_spec_is_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "openapi.yaml"
    spec.write_text(SPEC.read_text() + "  /v1/new:\n    get:\n      operationId: getSomethingNew\n")
    monkeypatch.setattr(sys.modules[__name__], "SPEC", spec)
    with pytest.raises(AssertionError, match="getSomethingNew"):
        test_every_operation_is_called_or_left_out_with_a_reason()
