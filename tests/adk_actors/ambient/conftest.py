"""Ambient tests run against a fresh application tree each time."""

from __future__ import annotations

import pytest

import adk_actors as adk


@pytest.fixture(autouse=True)
def app():
    adk.start()
    yield
    adk.stop()
