"""Kernel test fixtures: each test starts from a clean slate and must leave one behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import supervision as sv
from supervision.process import _current
from tests.helpers import wait_until


@pytest.fixture(autouse=True)
def fresh_test_thread_process() -> Iterator[None]:
    """Give the test thread a fresh pseudo-process, and check no server outlives the test."""
    old = getattr(_current, "process", None)
    if old is not None:
        old.exit("normal")
        _current.process = None
    yield
    me = getattr(_current, "process", None)
    if me is not None:
        me.exit("shutdown")  # like a shell exiting: whatever the test start_link-ed stops too
        _current.process = None


@pytest.fixture
def leak_check() -> Iterator[None]:
    """Assert that processes, names, monitors and timers return to their baseline."""
    before = sv.kernel_stats()
    yield
    wait_until(lambda: sv.kernel_stats()["processes"] <= before["processes"], timeout=10)
    after = sv.kernel_stats()
    for key in ("processes", "registered", "monitors", "timers", "links"):
        assert after[key] <= before[key], (key, before, after)
    wait_until(lambda: sv.kernel_stats()["server_threads"] <= before["server_threads"], timeout=10)
