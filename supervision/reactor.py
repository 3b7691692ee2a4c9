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
from typing import Any, NamedTuple

from supervision.carried_context import Context
from supervision.errors import KernelError
from supervision.gen_server import From, GenServer, Reply, Stop
from supervision.primitives import send, trap_exit
from supervision.process import LoopProcess, bind_thread, current_process, self_pid
from supervision.protocol import Ok, Refused, describe, log_unexpected
from supervision.signals import Ref

REACTOR_NAME = "supervision.reactor"
_SHUTDOWN_SECONDS = 5.0

_current_loop: asyncio.AbstractEventLoop | None = None


class GetLoop(NamedTuple):
    """Request: the reactor's event loop (the answer is `Ok(loop)`)."""


class _LoopThreadExited(NamedTuple):
    """Sent by the loop thread to its reactor when `run_forever` has returned."""


class _Reactor(NamedTuple):
    """A reactor's state: its loop and the thread running it."""

    loop: asyncio.AbstractEventLoop
    thread: threading.Thread


class _LoopOwner:
    """Watches the reactor process: whenever it exits (even killed, when `terminate`
    cannot run), its loop cancels every coroutine and stops."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def notify_down(self, ref: Any, pid: Any, reason: Any) -> None:
        global _current_loop
        if _current_loop is self.loop:
            _current_loop = None
        try:
            self.loop.call_soon_threadsafe(_begin_shutdown, self.loop)
        except RuntimeError:
            pass  # already closed


def _begin_shutdown(loop: asyncio.AbstractEventLoop) -> None:
    async def shutdown() -> None:
        await _cancel_everything()
        loop.stop()

    loop.create_task(shutdown())


class _ReactorServer(GenServer):
    dispatcher = "thread"

    def init(self, args: Any) -> _Reactor:
        global _current_loop
        trap_exit(True)  # so a shutdown from the runtime supervisor runs terminate
        loop = asyncio.new_event_loop()
        running = threading.Event()
        owner = self_pid()

        def run() -> None:
            asyncio.set_event_loop(loop)
            thread_process = LoopProcess(threading.current_thread())
            bind_thread(thread_process)
            loop.call_soon(running.set)
            try:
                loop.run_forever()
            finally:
                leftover = _submitters.pop(loop, None)
                if leftover is not None:
                    leftover.abandon_all()  # submitted but never started
                loop.close()
                thread_process.exit("normal")
                send(owner, _LoopThreadExited())

        thread = threading.Thread(target=run, name="supervision-reactor", daemon=True)
        thread.start()
        running.wait()
        me = current_process()
        assert me is not None
        me.add_watcher(Ref(), _LoopOwner(loop))
        _current_loop = loop
        return _Reactor(loop, thread)

    def handle_call(self, request: object, from_: From, state: _Reactor) -> Reply:
        match request:
            case GetLoop():
                return Reply(Ok(state.loop), state)
        error = KernelError("invalid_request", f"not a reactor request: {describe(request)}")
        return Reply(Refused(error), state)

    def handle_cast(self, msg: Any, state: _Reactor) -> _Reactor:
        log_unexpected("reactor", "cast", msg)
        return state

    def handle_info(self, msg: Any, state: _Reactor) -> _Reactor | Stop:
        match msg:
            case _LoopThreadExited():
                return Stop("loop_exited", state)
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        global _current_loop
        if not isinstance(state, _Reactor):
            return
        loop = state.loop
        if _current_loop is loop:
            _current_loop = None
        try:
            loop.call_soon_threadsafe(_begin_shutdown, loop)
        except RuntimeError:
            return  # the loop is already closed
        state.thread.join(_SHUTDOWN_SECONDS)


async def _cancel_everything() -> None:
    me = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not me]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The reactor's event loop if a reactor is running now, else None (no waiting).
    `runtime.reactor_loop()` starts the runtime when there is none."""
    loop = _current_loop
    return loop if loop is not None and loop.is_running() else None


class Submitter:
    """Hands coroutines to a loop in batches: one wake-up of the loop per batch, not per
    coroutine (what `run_coroutine_threadsafe` costs). It remembers every submission
    until `finish(key)`, so a reactor that stops can release the ones that never ran."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: deque[
            tuple[Coroutine[Any, Any, Any], Callable[[asyncio.Task[Any]], None], Context | None]
        ] = deque()
        self._tracked: dict[Any, tuple[Coroutine[Any, Any, Any], Callable[[], object]]] = {}
        self._lock = threading.Lock()
        self._scheduled = False

    def submit(
        self,
        key: Any,
        coroutine: Coroutine[Any, Any, Any],
        on_created: Callable[[asyncio.Task[Any]], None],
        on_abandoned: Callable[[], object],
        context: Context | None = None,
    ) -> None:
        """Start `coroutine` on the loop soon; `on_created(task)` runs on the loop, and
        `on_abandoned()` runs if the reactor stops before `finish(key)`. The asyncio
        task runs in `context` (a copy of the loop's current one if None)."""
        with self._lock:
            self._tracked[key] = (coroutine, on_abandoned)
            self._pending.append((coroutine, on_created, context))
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._drain)

    def finish(self, key: Any) -> None:
        with self._lock:
            self._tracked.pop(key, None)

    def abandon_all(self) -> None:
        with self._lock:
            tracked, self._tracked = self._tracked, {}
            self._pending.clear()
        for coroutine, on_abandoned in tracked.values():
            coroutine.close()
            on_abandoned()

    def _drain(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, deque()
            self._scheduled = False
        for coroutine, on_created, context in batch:
            on_created(self.loop.create_task(coroutine, context=context))


_submitters: dict[asyncio.AbstractEventLoop, Submitter] = {}


def submitter_for(loop: asyncio.AbstractEventLoop) -> Submitter:
    """The batching submitter of `loop` (the running reactor's; see `runtime.submitter`)."""
    found = _submitters.get(loop)
    if found is None:
        for stale in [key for key in _submitters if key.is_closed()]:
            del _submitters[stale]
        found = _submitters.setdefault(loop, Submitter(loop))
    return found
