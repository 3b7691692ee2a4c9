"""A helper of the session-30 tests of awaited starts (issue 20 §4), no tests of its own.

`gated(agent)` holds every invocation server of `agent` inside its `init` (so inside
its start) until the test releases it: an OpenTelemetry SDK span processor, the real
SDK on the global provider, stops in `on_start` of the server's ``invoke_agent``
span, which the server starts in `init`. A start is then observably in flight: a
test can check that its event loop runs on meanwhile, or cancel the awaiting task
while the start cannot have answered. The hold has a safety limit (`HOLD_LIMIT`), so
a start blocking the loop (the bug these tests catch) is released in the end and
recorded (`Gate.timed_out`) instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

from adk_actors.observability import semconv
from tests.helpers import global_sdk_provider

HOLD_LIMIT = 5.0
"""Seconds a held start waits for its release before it goes on by itself."""


class Gate:
    """Holds the starts of one agent's invocation servers until `release`."""

    def __init__(self) -> None:
        self.entered = threading.Event()  # a start is held
        self._released = threading.Event()
        self.timed_out = False  # a start went on without being released

    def hold(self) -> None:
        self.entered.set()
        if not self._released.wait(HOLD_LIMIT):
            self.timed_out = True

    def release(self) -> None:
        self._released.set()


class _Gates(SpanProcessor):
    """The span processor: holds a span's start while a gate is set for its name."""

    def __init__(self) -> None:
        self.by_span_name: dict[str, Gate] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        gate = self.by_span_name.get(span.name)
        if gate is not None:
            gate.hold()

    def on_end(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


_gates: _Gates | None = None


def _installed() -> _Gates:
    """The processor on the global SDK provider (an SDK provider is set if there is none
    yet: a global provider can be set once per process, another module may have)."""
    global _gates
    if _gates is None:
        provider = global_sdk_provider()
        _gates = _Gates()
        provider.add_span_processor(_gates)
    return _gates


@contextmanager
def gated(agent_name: str) -> Iterator[Gate]:
    """Hold the starts of `agent_name`'s invocation servers in their init while inside."""
    gates = _installed()
    gate = Gate()
    name = semconv.span_name(semconv.INVOKE_AGENT, agent_name)
    gates.by_span_name[name] = gate
    try:
        yield gate
    finally:
        del gates.by_span_name[name]
        gate.release()


async def until(predicate: Callable[[], Any], limit: float = 10.0) -> None:
    """Await on the loop until `predicate()` holds (each check lets the loop run);
    fail the test if it does not within `limit` seconds."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {limit} s")
        await asyncio.sleep(0.005)
