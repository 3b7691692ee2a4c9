"""`each_start_path`: run a test's `DynamicSupervisor.start_child` calls every way.

pytest runs a test on the main thread, where a start without a timeout is a direct
start (the caller runs the child's start itself) with the signal handlers held back
(`deferred_signals`, session 31). With the ``worker_thread`` param every `start_child`
the test body makes from the main thread runs on a fresh thread instead (in a copy of
the caller's context, re-raising what it raised): a direct start with no signal
handling (session 29 review, L4). With the ``call`` param each is a call to the
supervisor's thread (a start with a timeout, here an hour). With the ``awaited`` param
each is `DynamicSupervisor.start_child_async` awaited on an event loop of its own on
the main thread (session 30: asyncio code's start, a call whose reply is handed to the
loop). Calls made elsewhere (a child's init, a server's handler) are left as they are.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Hashable
from typing import Any

import pytest

import supervision as sv
from tests.helpers import in_thread

Start = Callable[[sv.Pid | Hashable, sv.ChildSpec, "float | None"], Any]


def _from_a_worker_thread(original: Start, sup: Any, spec: Any, timeout: Any) -> Any:
    context = contextvars.copy_context()
    return in_thread(lambda: context.run(original, sup, spec, timeout))


def _as_a_call(original: Start, sup: Any, spec: Any, timeout: Any) -> Any:
    return original(sup, spec, _CALL_TIMEOUT if timeout is None else timeout)


def _from_an_event_loop(original: Start, sup: Any, spec: Any, timeout: Any) -> Any:
    return asyncio.run(sv.DynamicSupervisor.start_child_async(sup, spec, timeout))


_CALL_TIMEOUT = 3600.0
"""A start with a timeout is a call; an hour never runs out in a test."""
_ROUTES = {
    "worker_thread": _from_a_worker_thread,
    "call": _as_a_call,
    "awaited": _from_an_event_loop,
}


@pytest.fixture(params=["main_thread", "worker_thread", "call", "awaited"])
def each_start_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    route = _ROUTES.get(request.param)
    if route is not None:
        original = sv.DynamicSupervisor.start_child

        def routed(sup: sv.Pid | Hashable, spec: sv.ChildSpec, timeout: float | None = None) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return original(sup, spec, timeout)  # a child's init, a handler: as they are
            return route(original, sup, spec, timeout)

        monkeypatch.setattr(sv.DynamicSupervisor, "start_child", staticmethod(routed))
    return str(request.param)
