"""`adk.start` tunes CPython's young-generation threshold while the tree runs, and
`adk.stop` puts Python's back; an application's own thresholds are never touched
(issue 16's tracing overhead: the collector, not the spans, was most of it)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import adk_actors as adk
from adk_actors import app as application_tree
from adk_actors import collector
from providers.errors import AdkError


@pytest.fixture(autouse=True)
def app() -> Iterator[None]:
    """Overrides the package's fixture: each test starts the tree itself, from Python's
    default thresholds, and leaves them so."""
    adk.stop()
    gc.set_threshold(*collector.PYTHON_THRESHOLDS)
    yield
    adk.stop()
    gc.set_threshold(*collector.PYTHON_THRESHOLDS)


def test_start_raises_the_young_threshold_and_stop_restores_pythons() -> None:
    adk.start()
    assert gc.get_threshold() == (collector.DEFAULT_YOUNG_THRESHOLD, collector.MIDDLE_THRESHOLD, 10)
    adk.stop()
    assert gc.get_threshold() == collector.PYTHON_THRESHOLDS


def test_a_chosen_young_threshold_is_applied() -> None:
    adk.start(gc_young_threshold=50_000)
    assert gc.get_threshold() == (50_000, collector.MIDDLE_THRESHOLD, 10)
    adk.stop()
    assert gc.get_threshold() == collector.PYTHON_THRESHOLDS


def test_none_leaves_the_collector_alone() -> None:
    adk.start(gc_young_threshold=None)
    assert gc.get_threshold() == collector.PYTHON_THRESHOLDS
    assert application_tree.running()


def test_an_applications_own_thresholds_are_kept_through_start_and_stop() -> None:
    gc.set_threshold(2_000, 20, 5)
    adk.start()
    assert gc.get_threshold() == (2_000, 20, 5)
    adk.stop()
    assert gc.get_threshold() == (2_000, 20, 5)


def test_thresholds_changed_while_running_are_not_overwritten_by_stop() -> None:
    adk.start()
    gc.set_threshold(3_000, 10, 10)  # the application decides otherwise meanwhile
    adk.stop()
    assert gc.get_threshold() == (3_000, 10, 10)


def test_a_start_of_a_running_tree_does_not_tune() -> None:
    adk.start(gc_young_threshold=None)
    adk.start()  # already running: the first start decided
    assert gc.get_threshold() == collector.PYTHON_THRESHOLDS


@pytest.mark.parametrize("bad", [0, -1, collector.MAX_YOUNG_THRESHOLD + 1, True, 1.5, "10000"])
def test_a_bad_threshold_is_refused_before_anything_starts(bad: object) -> None:
    with pytest.raises(AdkError) as raised:
        adk.start(gc_young_threshold=bad)  # type: ignore[arg-type]
    assert raised.value.reason == "invalid_gc_young_threshold"
    assert not application_tree.running()
    assert gc.get_threshold() == collector.PYTHON_THRESHOLDS


def test_the_limits_are_accepted() -> None:
    adk.start(gc_young_threshold=collector.MAX_YOUNG_THRESHOLD)
    assert gc.get_threshold()[0] == collector.MAX_YOUNG_THRESHOLD
    adk.stop()
    adk.start(gc_young_threshold=1)
    assert gc.get_threshold()[0] == 1
