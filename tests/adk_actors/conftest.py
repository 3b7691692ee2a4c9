"""Agent tests run against a fresh application tree each time."""

from __future__ import annotations

import pytest

import adk_actors as adk


@pytest.fixture(autouse=True)
def app():
    adk.start()
    yield
    adk.stop()


@pytest.fixture
def sessions():
    """An in-memory session service of the test's own, closed afterwards (a test file
    may define its own `sessions`)."""
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()
