"""The package as users get it: its exports, its type marker, and the README's examples."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

import hookwheel
from support import new_secret, sign

PACKAGE = Path(hookwheel.__file__).parent
README = PACKAGE.parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_every_export_exists_and_the_package_is_typed() -> None:
    for name in hookwheel.__all__:
        assert hasattr(hookwheel, name), name
    assert (PACKAGE / "py.typed").is_file()


def test_the_package_imports_nothing_outside_the_standard_library() -> None:
    import sys

    allowed = set(sys.stdlib_module_names) | {"hookwheel"}
    for source in PACKAGE.glob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in allowed, f"{source.name} imports {root}"


def test_the_readme_examples_are_valid_python() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 5, "README.md has its examples"
    for i, block in enumerate(blocks):
        compile(block, f"README.md python block {i}", "exec")


def test_the_readme_flask_receiver_accepts_a_signed_webhook_and_refuses_others(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flask")
    (receiver,) = [b for b in python_blocks() if "Flask(" in b]
    secret = new_secret()
    monkeypatch.setenv("HOOKWHEEL_SIGNING_SECRET", secret)
    namespace: dict[str, object] = {"__name__": "readme_receiver"}
    exec(compile(receiver, "README.md receiver", "exec"), namespace)
    app = namespace["app"]
    http = app.test_client()  # type: ignore[attr-defined]
    body = '{"order": 42}'
    assert http.post("/hooks/order", data=body, headers=sign([secret], body=body)).status_code == 204
    assert http.post("/hooks/order", data=body, headers=sign([new_secret()], body=body)).status_code == 401
    assert http.post("/hooks/order", data=body).status_code == 401


def test_the_package_type_checks_strictly() -> None:
    mypy = pytest.importorskip("mypy.api")
    # No cache: nothing written into the source tree.
    out, err, status = mypy.run(["--strict", "--python-version", "3.11", "--cache-dir", os.devnull, str(PACKAGE)])
    assert status == 0, out + err
