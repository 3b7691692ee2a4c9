"""The reactor: a runtime-owned asyncio event loop on its own thread, as a process.

`_ReactorServer` is a GenServer that owns the loop and its thread; it lives under the
kernel's runtime supervisor (see `runtime.py`), so a reactor that dies is restarted.
When it stops, every coroutine still on the loop is cancelled first, so the tasks
running them exit instead of hanging.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from supervision.gen_server import From, GenServer, Reply, Stop, call
from supervision.primitives import send
from supervision.process import self_pid

REACTOR_NAME = "supervision.reactor"
_SHUTDOWN_SECONDS = 5.0

_current_loop: asyncio.AbstractEventLoop | None = None


class _LoopExited(Exception):
    pass


class _ReactorServer(GenServer):
    dispatcher = "thread"

    def init(self, args: Any) -> dict[str, Any]:
        global _current_loop
        loop = asyncio.new_event_loop()
        running = threading.Event()
        owner = self_pid()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(running.set)
            try:
                loop.run_forever()
            finally:
                send(owner, ("reactor_loop_exited",))

        thread = threading.Thread(target=run, name="supervision-reactor", daemon=True)
        thread.start()
        running.wait()
        _current_loop = loop
        return {"loop": loop, "thread": thread}

    def handle_call(self, request: Any, from_: From, state: dict[str, Any]) -> Any:
        if request == "loop":
            return Reply(state["loop"], state)
        return Reply(None, state)

    def handle_info(self, msg: Any, state: dict[str, Any]) -> Any:
        if msg == ("reactor_loop_exited",):
            return Stop("loop_exited", state)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        global _current_loop
        if not isinstance(state, dict):
            return
        loop: asyncio.AbstractEventLoop = state["loop"]
        if _current_loop is loop:
            _current_loop = None
        if loop.is_running():
            future = asyncio.run_coroutine_threadsafe(_cancel_everything(), loop)
            try:
                future.result(_SHUTDOWN_SECONDS)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
        state["thread"].join(_SHUTDOWN_SECONDS)
        if not loop.is_running():
            loop.close()


async def _cancel_everything() -> None:
    me = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not me]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def reactor_loop() -> asyncio.AbstractEventLoop:
    """The running reactor's event loop, starting the kernel runtime if needed."""
    loop = _current_loop
    if loop is not None and loop.is_running():
        return loop
    from supervision.runtime import ensure_runtime

    ensure_runtime()
    loop = call(REACTOR_NAME, "loop", timeout=10.0)
    assert isinstance(loop, asyncio.AbstractEventLoop)
    return loop


class Submitter:
    """Hands coroutines to a loop in batches: one wake-up of the loop per batch, not per
    coroutine (what `run_coroutine_threadsafe` costs)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: deque[
            tuple[Coroutine[Any, Any, Any], Callable[[asyncio.Task[Any]], None]]
        ] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def submit(
        self, coroutine: Coroutine[Any, Any, Any], on_created: Callable[[asyncio.Task[Any]], None]
    ) -> None:
        """Start `coroutine` on the loop soon; `on_created(task)` runs on the loop."""
        with self._lock:
            self._pending.append((coroutine, on_created))
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, deque()
            self._scheduled = False
        for coroutine, on_created in batch:
            on_created(self.loop.create_task(coroutine))


_submitters: dict[asyncio.AbstractEventLoop, Submitter] = {}


def submitter() -> Submitter:
    """The batching submitter of the running reactor's loop."""
    loop = reactor_loop()
    found = _submitters.get(loop)
    if found is None:
        for stale in [key for key in _submitters if key.is_closed()]:
            del _submitters[stale]
        found = _submitters.setdefault(loop, Submitter(loop))
    return found
