from __future__ import annotations

from collections.abc import Iterator

import pytest

import hookwheel
from support import FakeAPI


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


@pytest.fixture
def waits() -> list[float]:
    """The waits before retries, recorded instead of slept, so that the retry tests take no time."""
    return []


@pytest.fixture
def client(api: FakeAPI, waits: list[float]) -> hookwheel.Client:
    c = hookwheel.Client(api.url, "hw_testkey_secret", timeout=5)
    c._t._sleep = waits.append
    return c
