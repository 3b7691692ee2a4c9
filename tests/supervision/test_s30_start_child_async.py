"""`DynamicSupervisor.start_child_async`: a start that asyncio code awaits (session 30).

A start from an event loop's thread cannot be a direct start (a child's init never runs
on a running loop), and the blocking call form parks the loop until the supervisor's
thread has started the child. The awaited form is the same call with its reply handed to
the loop. These cases pin what only it has: the loop runs on while a child starts, a
cancelled await leaves the child with the supervisor, and the call's errors and context
carry over. The whole DynamicSupervisor suite also runs through it (the ``awaited``
param of `each_start_path`).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

import supervision as sv
from tests.helpers import wait_until

WAIT = 5.0
_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


class Gated(sv.GenServer):
    """Its init waits until the gate is open (and fails the start if it never opens);
    it records the request id it was started under."""

    def init(self, args: tuple[threading.Event, list[str]]) -> Any:
        gate, seen = args
        seen.append(_request_id.get())
        if not gate.wait(WAIT):
            raise RuntimeError("the gate never opened")
        return None


def _gated(child_id: str, gate: threading.Event, seen: list[str]) -> sv.ChildSpec:
    return sv.ChildSpec(child_id, lambda: Gated.start_link((gate, seen)), restart="temporary")


@pytest.fixture
def dyn() -> Any:
    sup = sv.DynamicSupervisor.start(max_children=2)
    yield sup
    sv.stop(sup)


def test_the_loop_runs_on_while_the_supervisor_starts_a_child(dyn):
    """The child's init waits for a coroutine on the caller's own loop: a start that
    parked the loop would never see the gate open (the init would fail the start)."""
    gate, seen = threading.Event(), []
    order: list[str] = []

    async def opener() -> None:
        await asyncio.to_thread(wait_until, lambda: seen)  # the init is under way
        order.append("opened")
        gate.set()

    async def main() -> sv.Pid | None:
        opening = asyncio.ensure_future(opener())
        pid = await sv.DynamicSupervisor.start_child_async(dyn, _gated("g", gate, seen))
        order.append("started")
        await opening
        return pid

    pid = asyncio.run(main())
    assert order == ["opened", "started"]
    assert pid is not None and pid.is_alive()
    assert [row.pid for row in sv.DynamicSupervisor.which_children(dyn)] == [pid]


def test_the_child_starts_in_the_awaiting_coroutines_context(dyn):
    gate, seen = threading.Event(), []
    gate.set()

    async def main() -> None:
        _request_id.set("req-7")
        await sv.DynamicSupervisor.start_child_async(dyn, _gated("g", gate, seen))

    asyncio.run(main())
    assert seen == ["req-7"]


def test_a_cancelled_await_leaves_the_child_with_the_supervisor(dyn):
    """As with a call whose caller left: the start goes on, and the child it starts is
    recorded like any other."""
    gate, seen = threading.Event(), []

    async def main() -> None:
        start = asyncio.ensure_future(
            sv.DynamicSupervisor.start_child_async(dyn, _gated("g", gate, seen))
        )
        await asyncio.to_thread(wait_until, lambda: seen)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start

    asyncio.run(main())
    gate.set()
    wait_until(lambda: len(sv.DynamicSupervisor.which_children(dyn)) == 1)
    (row,) = sv.DynamicSupervisor.which_children(dyn)
    assert row.pid is not None and row.pid.is_alive()


def test_a_timeout_is_call_timeout_and_the_start_still_completes(dyn):
    gate, seen = threading.Event(), []

    async def main() -> None:
        with pytest.raises(sv.CallTimeout):
            await sv.DynamicSupervisor.start_child_async(dyn, _gated("g", gate, seen), 0.05)

    asyncio.run(main())
    gate.set()
    wait_until(lambda: len(sv.DynamicSupervisor.which_children(dyn)) == 1)


def test_refusals_are_the_calls_own(dyn):
    gate = threading.Event()
    gate.set()

    async def main() -> None:
        for child_id in ("a", "b"):
            await sv.DynamicSupervisor.start_child_async(dyn, _gated(child_id, gate, []))
        with pytest.raises(sv.MaxChildrenReached):
            await sv.DynamicSupervisor.start_child_async(dyn, _gated("c", gate, []))
        with pytest.raises(sv.SupervisorError) as refused:
            await sv.DynamicSupervisor.start_child_async(dyn, "not a spec")  # type: ignore[arg-type]
        assert refused.value.reason[0] == "invalid_child_spec"

    asyncio.run(main())
    assert len(sv.DynamicSupervisor.which_children(dyn)) == 2


def test_a_failed_init_is_the_starts_error_and_records_nothing(dyn):
    class Failing(sv.GenServer):
        def init(self, args: Any) -> Any:
            raise ValueError("no")

    spec = sv.ChildSpec("f", lambda: Failing.start_link(None), restart="temporary")

    async def main() -> None:
        with pytest.raises(sv.SupervisorError):
            await sv.DynamicSupervisor.start_child_async(dyn, spec)

    asyncio.run(main())
    assert sv.DynamicSupervisor.which_children(dyn) == []


def test_a_dead_supervisor_is_noproc():
    sup = sv.DynamicSupervisor.start()
    sv.stop(sup)

    async def main() -> None:
        with pytest.raises(sv.ProcessExit) as exited:
            await sv.DynamicSupervisor.start_child_async(sup, _gated("g", threading.Event(), []))
        assert exited.value.reason == "noproc"

    asyncio.run(main())
