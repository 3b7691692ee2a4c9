"""A process killed between a callback's liveness check and the store of its result
holds no state afterwards (review of b429e36, finding 1: a killed admission controller's
state was stored back on the dead process, so what the state held, and its finalizers,
waited for the cyclic collector). The kill is placed in that window with a line tracer
on the callback's thread, so the test does not depend on timing."""

from __future__ import annotations

import inspect
import sys
import threading
import types
from typing import Any

import supervision as sv
from supervision import server_process

_SOURCE, _FIRST = inspect.getsourcelines(server_process.ServerProcess._handle)
STORE_LINE = next(
    _FIRST + offset for offset, line in enumerate(_SOURCE) if "self.state = result.state" in line
)


class Payload:
    """A state the test can see freed."""


class Holder(sv.GenServer):
    """Its "arm" call stops its own thread at the state store, after the liveness check."""

    def init(self, events: tuple[threading.Event, threading.Event]) -> Payload:
        self.in_window, self.killed = events
        return Payload()

    def handle_call(self, request: Any, from_: sv.From, state: Payload) -> sv.Reply:
        if request == "arm":
            caller = sys._getframe(1)
            while caller.f_code.co_name != "_handle":
                caller = caller.f_back  # type: ignore[assignment]
            caller.f_trace = self._at_store
            sys.settrace(lambda *_: None)  # line events reach frames with an f_trace
        return sv.Reply("ok", state)

    def _at_store(self, frame: types.FrameType, event: str, _arg: Any) -> Any:
        if event == "line" and frame.f_lineno == STORE_LINE:
            self.in_window.set()
            self.killed.wait(5)  # the kill lands here: checked alive, not yet stored
            sys.settrace(None)
            frame.f_trace = None
        return self._at_store


def test_a_kill_between_the_liveness_check_and_the_store_leaves_no_state() -> None:
    in_window, killed = threading.Event(), threading.Event()
    pid = Holder.start((in_window, killed))
    process = pid._process
    returned: list[BaseException | str] = []

    def arm() -> None:
        try:
            returned.append(sv.call(pid, "arm", timeout=5))
        except BaseException as exc:  # the caller sees the kill
            returned.append(exc)

    caller = threading.Thread(target=arm)
    caller.start()
    assert in_window.wait(5), "the tracer did not stop the callback at the store"
    sv.exit(pid, "kill")
    killed.set()
    caller.join(5)
    assert not pid.is_alive()
    assert process.state is None  # was the Payload, stored back on the dead process
