"""Workflow tests run against a fresh application tree each time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import adk_actors as adk


@pytest.fixture(autouse=True)
def app() -> Iterator[None]:
    adk.start()
    yield
    adk.stop()
