"""The ``approvals`` stress kind: a run pauses for a human approval and is resumed once.

`open` spawns an agent whose one tool needs approval (``require_confirmation``) on a
scripted model with the scenario's latency: it calls the tool, then answers
``Published.`` or ``Refused.`` from the tool's response. `run_one` starts a stable run,
awaits its `Paused` outcome, resumes it (approving even items, denying odd ones),
awaits the resumed run's terminal, checks a second resume is refused, and deletes the
session. `close` checks that every paused run was resumed exactly once and reached
one terminal that respects the decision, that the tool ran once per approval, and
that no approval is left pending.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from adk_actors import runs
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.outcomes import Completed, Paused
from adk_actors.runner import Runner
from adk_actors.sessions import InMemorySessionService
from adk_actors.stress.invariants import tally
from adk_actors.stress.latency import draw_delay
from adk_actors.stress.records import InvariantResult, Outcome, outcome_of
from adk_actors.stress.scenario import Model, Scenario
from adk_actors.stress.workloads.base import (
    DEFAULT_SETTLE_S,
    ItemsInFlight,
    invariant,
    remaining,
    settle_seconds,
    wait_until,
)
from adk_actors.tools import Tool, ToolContext
from providers import Content, ScriptedProvider
from providers.content import FunctionResponsePart
from providers.errors import AdkError
from providers.outputs import ToolDeclaration
from supervision.aio import run_blocking
from supervision.logs import get_logger

APP_NAME = "stress_approvals"
USER_ID = "stress-approver"
TOOL_NAME = "stress_publish"
APPROVED_TEXT = "Published."
REFUSED_TEXT = "Refused."
RUN_RETENTION_S = 2.0
"""How long each run stays queryable after it ended (the paused one too: a resume
after that finds the pause in the session)."""
MAX_PENDING_SCAN = 500
"""At most this many leftover pauses are counted at close (the Runner's own bound)."""
WAIT_GRACE_S = 5.0
"""How long past its deadline a run may take to report its outcome."""
_SECOND_RESUME_REFUSALS = ("already_resumed", "no_paused_invocation", "run_not_paused")
_log = get_logger("adk_actors.stress")


class _Publish(Tool):
    """The tool a human must approve; counts its executions (never their arguments)."""

    name = TOOL_NAME
    description = "Publish one stress item."
    parameters = {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    }
    require_confirmation = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.executions = 0

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        with self._lock:
            self.executions += 1
        return {"published": args["item"]}


class _Model:
    """The scripted model: call the tool for a user's message, then answer from the
    tool's response; every answer after a latency drawn from the scenario's model."""

    def __init__(self, model: Model, seed: int) -> None:
        self._model = model
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, history: Sequence[Content], tools: Sequence[ToolDeclaration]) -> Any:
        with self._lock:
            delay = draw_delay(self._model.latency, self._rng)
        last = history[-1]
        responses = [part for part in last.parts if isinstance(part, FunctionResponsePart)]
        if not responses:
            item = last.text_value()[:64]
            return {"tool_calls": [{"name": TOOL_NAME, "args": {"item": item}}], "delay": delay}
        refused = any(_rejected(part.response) for part in responses)
        return {"text": REFUSED_TEXT if refused else APPROVED_TEXT, "delay": delay}


def _rejected(response: dict[str, Any]) -> bool:
    error = response.get("error")
    return isinstance(error, dict) and error.get("kind") == "tool_confirmation_rejected"


class ApprovalsWorkload:
    """Pause, resume once (approve or deny), terminal; counters only."""

    kind = "approvals"

    def __init__(self, *, settle_s: float = DEFAULT_SETTLE_S) -> None:
        self._settle_s = settle_seconds(settle_s)
        self._tag = uuid.uuid4().hex[:8]
        self._agent: str | None = None
        self._tool = _Publish()
        self._sessions = InMemorySessionService()
        self._runner: Runner | None = None
        self._in_flight = ItemsInFlight()
        """Items under way -> the run to cancel at close (bounded by the concurrency)."""
        self._started = 0
        self._paused = 0
        self._resumed = 0
        self._approved = 0
        self._approved_completed = 0
        self._terminals: Counter[str] = Counter()
        self._refused: Counter[str] = Counter()
        self._unpaused: Counter[str] = Counter()
        self._bypassed = 0
        self._resume_failures = 0
        self._double_resumes = 0
        self._wrong_decisions = 0
        self._unanswered = 0

    async def open(self, scenario: Scenario, provider: ScriptedProvider) -> None:
        """`provider` answers with text only; this kind needs a tool call first, so it
        runs its own scripted model with the same latency distribution."""
        model = ScriptedProvider(fn=_Model(scenario.model, scenario.seed))
        name = f"stress_approvals_{self._tag}"
        await run_blocking(spawn_agent, name, {"provider": model}, [self._tool])
        self._agent = name
        self._runner = Runner(name, APP_NAME, self._sessions)

    async def run_one(self, index: int, deadline: float) -> Outcome:
        return await self._in_flight.run(lambda key: self._run(key, index, deadline))

    async def _run(self, key: int, index: int, deadline: float) -> Outcome:
        runner = self._runner
        if runner is None:
            raise AdkError("workload_not_open", "open the approvals workload first")
        session_id = f"stress-{self._tag}-{key}"
        try:
            paused_id: str = await run_blocking(
                runs.start,
                runner,
                USER_ID,
                session_id,
                f"Publish item {index}.",
                retention=RUN_RETENTION_S,
            )
        except AdkError as error:
            self._refused[str(error.reason)[:64]] += 1
            return Outcome.REJECTED  # refused before anything ran, as the runs kind counts it
        self._started += 1
        self._in_flight[key] = paused_id
        try:
            return await self._resume(key, index, paused_id, deadline)
        finally:
            await self._forget_session(session_id)

    async def _resume(self, key: int, index: int, paused_id: str, deadline: float) -> Outcome:
        first = await self._wait(paused_id, deadline)
        if not isinstance(first, Paused):
            if first is not None:
                self._unpaused[type(first).__name__] += 1
                self._bypassed += isinstance(first, Completed)
            return outcome_of(first)
        self._paused += 1
        approve = index % 2 == 0
        try:
            resumed_id: str = await run_blocking(self._resume_call, paused_id, approve)
        except AdkError as error:
            self._resume_failures += 1
            _log.warning("stress.approval_resume_failed", reason=str(error.reason)[:64])
            return Outcome.FAILED
        self._resumed += 1
        self._approved += approve
        self._in_flight[key] = resumed_id
        final = await self._wait(resumed_id, deadline)
        if final is None:
            return Outcome.FAILED
        self._terminals[type(final).__name__] += 1
        await self._resume_again(paused_id, approve)
        if isinstance(final, Completed):
            self._approved_completed += approve
            expected = APPROVED_TEXT if approve else REFUSED_TEXT
            if final.output != expected:
                self._wrong_decisions += 1
                return Outcome.FAILED
        return outcome_of(final)

    def _resume_call(self, run_id: str, approve: bool) -> str:
        return runs.resume(run_id, {"confirmed": approve}, runner=self._runner, user_id=USER_ID)

    async def _wait(self, run_id: str, deadline: float) -> Any:
        """The run's outcome, or None (counted, the run cancelled) when it gave none in
        time."""
        try:
            return await runs.wait_async(run_id, timeout=remaining(deadline) + WAIT_GRACE_S)
        except AdkError as error:
            self._unanswered += 1
            _log.warning("stress.approval_unanswered", reason=str(error.reason)[:64])
            await _cancel(run_id)
            return None

    async def _resume_again(self, paused_id: str, approve: bool) -> None:
        """A continuation is single-use: a second resume must be refused."""
        try:
            await run_blocking(self._resume_call, paused_id, approve)
        except AdkError as error:
            if error.reason not in _SECOND_RESUME_REFUSALS:  # not a second claim either
                _log.warning("stress.approval_second_resume", reason=str(error.reason)[:64])
            return
        self._double_resumes += 1

    async def _forget_session(self, session_id: str) -> None:
        """Delete the item's session once it has ended: a long run must not keep one
        per item (a session still holding a pause stays, for `close` to find)."""
        runner = self._runner
        if runner is None:
            return
        try:
            paused = await run_blocking(runner.paused_invocations, USER_ID, session_id)
            if not paused:
                await run_blocking(self._sessions.delete_session, APP_NAME, USER_ID, session_id)
        except AdkError:
            pass  # the service was closed meanwhile

    async def close(self) -> list[InvariantResult]:
        async def settled() -> bool:
            return not self._in_flight

        await wait_until(settled, self._settle_s)
        left = len(self._in_flight)
        pending = await self._pending_sessions()
        results = [self.resumed_invariant(left), self.pending_invariant(pending)]
        await self._teardown()
        return results

    async def _pending_sessions(self) -> int | None:
        """Pauses left in the sessions (at most `MAX_PENDING_SCAN` counted)."""
        runner = self._runner
        if runner is None:
            return None
        try:
            pending: list[Any] = await run_blocking(runner.pending, USER_ID, limit=MAX_PENDING_SCAN)
        except AdkError:
            return None
        return len(pending)

    async def _teardown(self) -> None:
        for run_id in list(self._in_flight.values()):
            if run_id is not None:
                await _cancel(run_id)
        if self._agent is not None:
            try:
                await run_blocking(stop_agent, self._agent)
            except AdkError:
                pass  # already gone (a chaos kill, say)
            self._agent = None
        self._runner = None
        await run_blocking(self._sessions.close)

    def resumed_invariant(self, in_flight: int) -> InvariantResult:
        """Every paused run was resumed exactly once and its resumption reached one
        terminal that respects the decision; the tool ran for every approved run that
        completed and never beyond the approvals (a denial never runs it)."""
        terminals = sum(self._terminals.values())
        executions = self._tool.executions
        held = (
            in_flight == 0
            and self._paused == self._resumed
            and terminals == self._resumed
            and self._resume_failures == 0
            and self._double_resumes == 0
            and self._bypassed == 0
            and self._wrong_decisions == 0
            and self._unanswered == 0
            and self._approved_completed <= executions <= self._approved
        )
        outcomes = tally(self._terminals)
        unpaused = tally(self._unpaused)
        return invariant(
            "approvals_resumed_once",
            held,
            f"{self._started} started, {self._paused} paused, {self._resumed} resumed "
            f"({self._approved} approved, {self._approved_completed} of them completed), "
            f"{terminals} terminals ({outcomes}); tool ran {executions} times; "
            f"{in_flight} in flight after settling, "
            f"{self._resume_failures} resumes refused, {self._double_resumes} second "
            f"resumes accepted, {self._bypassed} completed without a pause, "
            f"{self._wrong_decisions} answers against the decision, {self._unanswered} "
            f"without an outcome; ended before pausing: {unpaused}",
        )

    def pending_invariant(self, pending_sessions: int | None) -> InvariantResult:
        """No approval is left waiting for a human."""
        pending = self._paused - self._resumed
        return invariant(
            "approvals_none_pending",
            pending == 0 and pending_sessions == 0,
            f"{pending} paused runs never resumed; {pending_sessions} sessions still "
            "hold a paused invocation",
        )


async def _cancel(run_id: str) -> None:
    try:
        await run_blocking(runs.cancel, run_id, "stress_closed")
    except AdkError:
        pass  # it ended (or paused) meanwhile
