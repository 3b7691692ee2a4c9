"""A stateful property test of one invocation server under random interleavings.

Hypothesis drives a run (and the runs that resume it) through any order of: the
model answering (a final text, or a call that needs approval, so the run pauses),
resuming a paused run, cancelling, killing the model call's task, and killing
subscribers. Whatever the order, at the end:

* every run has exactly one terminal outcome, the same every time it is asked;
* a run's stream holds its events in order, then exactly one terminal item;
* in the session, every opening of the invocation (the user's message, a resume's
  claim) is followed by exactly one terminal event (final, error or pause), and
  nothing comes after the last one; no ``_adk:open:`` key is left behind;
* every admission permit came back.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import adk_actors as adk
import supervision as sv
from adk_actors import admission

pytestmark = pytest.mark.timeout(600)


class Publish(adk.Tool):
    name = "publish"
    description = "Publish the release."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"published": True}


@dataclass
class _Call:
    """One model call, held until the machine answers it."""

    pid: sv.Pid
    released: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] = field(default_factory=lambda: {"text": "done"})


class InvocationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.calls: queue.Queue[_Call] = queue.Queue()
        self.held: list[_Call] = []
        self.runs: list[str] = []
        self.resumed: set[str] = set()
        self.subscribers: list[sv.Pid] = []

    def _model(self, history: Any, tools: Any) -> dict[str, Any]:
        call = _Call(sv.self_pid())
        self.calls.put(call)
        call.released.wait(20)
        return call.answer

    @initialize()
    def start(self) -> None:
        adk.start()
        self.controller = admission.start_link({"global_limit": 1})
        self.sessions = adk.sessions.InMemorySessionService()
        agent = adk.spawn_agent(
            "Machine", {"provider": adk.ScriptedProvider(fn=self._model)}, tools=[Publish()]
        )
        self.runner = adk.Runner(
            agent, "app", self.sessions, admission_control={"server": self.controller}
        )
        self.sessions.create_session("app", "u", "s")
        self.runs.append(adk.runs.start(self.runner, "u", "s", "go"))

    def _next_call(self) -> _Call | None:
        try:
            call = self.calls.get(timeout=0.3)
        except queue.Empty:
            return None
        self.held.append(call)
        return call

    @rule(pause=st.booleans())
    def answer(self, pause: bool) -> None:
        call = self._next_call()
        if call is not None:
            if pause:
                call.answer = {"tool_calls": [{"name": "publish", "args": {}}]}
            call.released.set()

    @rule(confirmed=st.booleans())
    def resume(self, confirmed: bool) -> None:
        run_id = self.runs[-1]
        outcome = self._outcome_unless_a_call_waits(run_id, timeout=2)
        if outcome is None:
            return  # still running
        if isinstance(outcome, adk.Paused) and run_id not in self.resumed:
            self.resumed.add(run_id)
            self.runs.append(adk.runs.resume(run_id, {"confirmed": confirmed}))

    def _outcome_unless_a_call_waits(self, run_id: str, timeout: float) -> Any:
        """The run's outcome once it ends within `timeout`; None if it has not, or as
        soon as a model call waits for this machine's answer (rules run one at a time,
        so no rule answers it while this one waits: the run cannot pause meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return adk.runs.wait(run_id, timeout=0.02)
            except adk.AdkError:
                if not self.calls.empty() or time.monotonic() >= deadline:
                    return None

    @rule()
    def cancel(self) -> None:
        try:
            adk.runs.cancel(self.runs[-1], "machine")
        except adk.AdkError as error:
            assert error.reason == "already_terminal"

    @rule()
    def kill_model_call(self) -> None:
        call = self._next_call()
        if call is not None:
            sv.exit(call.pid, "kill")
            call.released.set()  # its thread ends; what it returns goes nowhere

    @rule()
    def subscribe_then_die(self) -> None:
        box: list[Any] = []

        def follow() -> None:
            try:
                subscription = adk.runs.subscribe(self.runs[-1])
                box.append(subscription.next(timeout=0.2))
            except adk.AdkError:
                pass  # gone, or nothing yet: the thread exits, and its inbox with it

        thread = threading.Thread(target=follow)
        thread.start()
        thread.join(5)

    def teardown(self) -> None:
        try:
            self._check()
        finally:
            for call in self.held:
                call.released.set()
            while not self.calls.empty():
                self.calls.get().released.set()
            sv.stop(self.controller)
            adk.stop()

    def _check(self) -> None:
        # let every run end: answer whatever is still waiting, resume nothing more
        for run_id in self.runs:
            while True:
                try:
                    outcome = adk.runs.wait(run_id, timeout=0.2)
                    break
                except adk.AdkError:
                    call = self._next_call()
                    if call is not None:
                        call.released.set()
            assert adk.runs.wait(run_id, timeout=5) == outcome  # one terminal, always
            items = list(adk.runs.subscribe(run_id))
            assert isinstance(items[-1], adk.runs.RunTerminal)
            assert items[-1].outcome == outcome
            assert [item.seq for item in items] == list(range(1, len(items) + 1))
            assert not any(isinstance(item, adk.runs.RunTerminal) for item in items[:-1])
        session = self.sessions.get_session("app", "u", "s", include_internal=True)
        _check_lifecycle(session.events)
        assert not any(key.startswith("_adk:open:") for key in session.state)
        status = admission.status(self.controller)
        assert status["active"] == 0 and status["queued"] == 0


def _check_lifecycle(events: Any) -> None:
    """Opening, steps, one terminal; again after a claim; nothing after the last end."""
    is_open = False
    for event in events:
        # the user's message, or a resume's claim (by the runner, not the user)
        opening = event.author == "user" or event.actions.resume is not None
        terminal = event.is_final or event.error is not None or event.actions.pause is not None
        if opening:
            assert not is_open, "a second opening before the end"
            is_open = True
        elif terminal:
            assert is_open, "a terminal with no opening"
            is_open = False
        else:
            assert is_open, "a step outside an open invocation"
    assert not is_open, "an invocation left open"


InvocationMachine.TestCase.settings = settings(
    max_examples=10,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_invocation_server_lifecycle = InvocationMachine.TestCase
