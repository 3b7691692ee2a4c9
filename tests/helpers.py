"""Small helpers shared by the kernel tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import supervision as sv


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.002) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def wait_dead(pid: sv.Pid, timeout: float = 5.0) -> Any:
    """Wait for `pid` to exit; returns its exit reason (even if it died before the call)."""
    ref = sv.monitor(pid)
    down = sv.receive(timeout, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    if down.reason == "noproc":
        return pid._process.exit_reason
    return down.reason


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run `fn` in a fresh plain thread and return its result (or raise its exception)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    if "error" in box:
        raise box["error"]
    return box.get("value")


class Recorder:
    """A thread-safe event log for ordering assertions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Any] = []

    def add(self, event: Any) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.events)


def global_sdk_provider() -> Any:
    """The OpenTelemetry SDK's `TracerProvider` that is the global one, installed if
    there is none yet (a global provider can be set once per process, and another test
    module may have set it): tests add their span processors to it."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "the global provider is not the SDK's"
    return provider
