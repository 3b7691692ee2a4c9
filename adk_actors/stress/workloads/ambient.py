"""The ``ambient`` stress kind: one trigger whose events each run an agent invocation.

`open` spawns an agent on the scenario's scripted model and registers a trigger for it
(``per_event`` sessions, one attempt per event, a concurrency cap below the load so
the cap is exercised); `run_one` submits one event and awaits its outcome
(`adk.ambient.wait_async`), then deletes the event's session so memory stays bounded.
`close` checks behaviors.md §13's ambient suite: the trigger's peak concurrency never
exceeded its cap, every accepted event reached its terminal, and the trigger's
counters are back to zero; then it unregisters the trigger and stops the agent.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from adk_actors import ambient
from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.ambient.options import MAX_CONCURRENCY, MAX_QUEUE, MAX_TIMEOUT
from adk_actors.runner import Runner
from adk_actors.sessions import InMemorySessionService
from adk_actors.stress.invariants import tally
from adk_actors.stress.records import InvariantResult, Outcome, outcome_of
from adk_actors.stress.scenario import Scenario
from adk_actors.stress.workloads.base import (
    DEFAULT_SETTLE_S,
    INVALID,
    ItemsInFlight,
    invariant,
    remaining,
    settle_seconds,
    wait_until,
)
from providers import ScriptedProvider
from providers.errors import AdkError
from supervision.aio import run_blocking
from supervision.logs import get_logger

DEFAULT_MAX_CONCURRENCY = 8
"""The trigger's cap (behaviors.md §13 runs 100 events through a cap of 8)."""
APP_NAME = "stress_ambient"
USER_ID = "stress-worker"
EVENT_RETENTION_S = 5.0
"""How long a terminal event stays retained (its waiter asks right after `submit`)."""
RUN_RETENTION_S = 1.0
"""How long each attempt's stable run stays queryable after it ended."""
WAIT_GRACE_S = 5.0
"""How long past its deadline an event may take to publish its (timed-out) terminal."""
_log = get_logger("adk_actors.stress")


class AmbientWorkload:
    """Events through one capped trigger; counters only, never per-event histories."""

    kind = "ambient"

    def __init__(
        self, *, max_concurrency: int = DEFAULT_MAX_CONCURRENCY, settle_s: float = DEFAULT_SETTLE_S
    ) -> None:
        if isinstance(max_concurrency, bool) or not (
            isinstance(max_concurrency, int) and 1 <= max_concurrency <= MAX_CONCURRENCY
        ):
            raise AdkError(
                (INVALID, "max_concurrency"), f"max_concurrency is within 1..{MAX_CONCURRENCY}"
            )
        self._cap = max_concurrency
        self._settle_s = settle_seconds(settle_s)
        self._tag = uuid.uuid4().hex[:8]
        self._trigger = f"stress-ambient-{self._tag}"
        self._agent: str | None = None
        self._event_timeout = 1.0
        self._sessions = InMemorySessionService()
        self._in_flight = ItemsInFlight()
        """Items under way -> their event's ref once accepted (bounded by the concurrency)."""
        self._accepted = 0
        self._duplicates = 0
        self._terminals: Counter[str] = Counter()
        self._refused: Counter[str] = Counter()
        self._unanswered = 0

    async def open(self, scenario: Scenario, provider: ScriptedProvider) -> None:
        name = f"stress_ambient_{self._tag}"
        await run_blocking(spawn_agent, name, {"provider": provider})
        self._agent = name
        runner = Runner(name, APP_NAME, self._sessions)
        load = scenario.concurrency or scenario.max_backlog
        timeout = min(scenario.run_timeout_s, MAX_TIMEOUT)
        self._event_timeout = timeout
        await run_blocking(
            ambient.register_trigger,
            self._trigger,
            runner,
            max_concurrency=self._cap,
            max_queue=max(1, min(load, MAX_QUEUE)),
            event_timeout=timeout,
            retention=EVENT_RETENTION_S,
            run_retention=RUN_RETENTION_S,
            session_policy={"mode": "per_event", "user_id": USER_ID, "prefix": "stress-"},
            retry={"max_attempts": 1, "attempt_timeout": timeout},
        )

    async def run_one(self, index: int, deadline: float) -> Outcome:
        return await self._in_flight.run(lambda key: self._run(key, index, deadline))

    async def _run(self, key: int, index: int, deadline: float) -> Outcome:
        event = {
            "payload": f"Summarize event {index}.",
            "idempotency_key": f"{self._tag}:{key}",
            "timeout": min(max(remaining(deadline), 0.001), self._event_timeout),
        }
        try:
            receipt: ambient.Submitted = await run_blocking(ambient.submit, self._trigger, event)
        except AdkError as error:
            self._refused[str(error.reason)[:64]] += 1
            return Outcome.REJECTED  # refused before anything ran, as the runs kind counts it
        if receipt.duplicate:
            self._duplicates += 1
            return Outcome.FAILED
        self._accepted += 1
        self._in_flight[key] = receipt.ref
        try:
            outcome = await ambient.wait_async(receipt, timeout=remaining(deadline) + WAIT_GRACE_S)
        except AdkError as error:
            self._unanswered += 1
            _log.warning("stress.ambient_unanswered", reason=str(error.reason)[:64])
            await _cancel(receipt.ref)
            return Outcome.FAILED
        self._terminals[type(outcome).__name__] += 1
        await self._forget_session(receipt.ref)
        return outcome_of(outcome)

    async def _forget_session(self, ref: str) -> None:
        """Delete the event's session: a long run must not keep one per event."""
        try:
            view: dict[str, Any] = await run_blocking(ambient.status, ref)
            await run_blocking(
                self._sessions.delete_session, APP_NAME, view["user_id"], view["session_id"]
            )
        except AdkError:
            pass  # no longer retained, or already gone: nothing to free

    async def close(self) -> list[InvariantResult]:
        async def settled() -> bool:
            return not self._in_flight

        await wait_until(settled, self._settle_s)
        left = len(self._in_flight)

        async def idle() -> bool:
            counters = await self._counters()
            return counters is not None and counters["active"] == 0 and counters["queued"] == 0

        await wait_until(idle, self._settle_s)
        counters = await self._counters()
        results = [
            peak_invariant(None if counters is None else counters["peak_active"], self._cap),
            self.complete_invariant(left, counters),
            counters_invariant(counters),
        ]
        await self._teardown()
        return results

    async def _counters(self) -> dict[str, Any] | None:
        try:
            counters: dict[str, Any] = await run_blocking(ambient.trigger_status, self._trigger)
        except AdkError:
            return None
        return counters

    async def _teardown(self) -> None:
        """Cancel what is still under way, unregister the trigger, stop the agent."""
        for ref in list(self._in_flight.values()):
            if ref is not None:
                await _cancel(ref)

        async def unregistered() -> bool:
            try:
                await run_blocking(ambient.unregister_trigger, self._trigger)
            except AdkError as error:
                return bool(error.reason == "not_found")
            return True

        if not await wait_until(unregistered, self._settle_s):
            _log.warning("stress.ambient_trigger_left", trigger=self._trigger)
        if self._agent is not None:
            try:
                await run_blocking(stop_agent, self._agent)
            except AdkError:
                pass  # already gone (a chaos kill, say)
            self._agent = None
        await run_blocking(self._sessions.close)

    def complete_invariant(
        self, in_flight: int, counters: dict[str, Any] | None
    ) -> InvariantResult:
        """Every accepted event reached exactly one terminal, as the trigger counts too."""
        terminals = sum(self._terminals.values())
        trigger_terminal = None if counters is None else counters["terminal"]
        trigger_submitted = None if counters is None else counters["submitted"]
        held = (
            in_flight == 0
            and self._unanswered == 0
            and self._duplicates == 0
            and terminals == self._accepted
            and trigger_submitted == self._accepted
            and trigger_terminal == self._accepted
        )
        outcomes = tally(self._terminals)
        refused = tally(self._refused)
        return invariant(
            "ambient_all_complete",
            held,
            f"{self._accepted} accepted, {terminals} terminals ({outcomes}); the "
            f"trigger counted {trigger_submitted} submitted and {trigger_terminal} terminal; "
            f"{in_flight} still in flight after settling, {self._unanswered} without an "
            f"outcome, {self._duplicates} unexpected duplicates; refused: {refused}",
        )


def peak_invariant(peak: int | None, cap: int) -> InvariantResult:
    """The trigger never ran more events at once than its `max_concurrency`."""
    return invariant(
        "ambient_peak_within_cap",
        peak is not None and peak <= cap,
        f"peak {peak} active events, max_concurrency {cap}",
    )


def counters_invariant(counters: dict[str, Any] | None) -> InvariantResult:
    """Once settled, the trigger holds nothing active or queued."""
    if counters is None:
        return invariant("ambient_counters_zero", False, "the trigger did not answer")
    active, queued = counters["active"], counters["queued"]
    return invariant(
        "ambient_counters_zero",
        active == 0 and queued == 0,
        f"{active} active and {queued} queued after settling",
    )


async def _cancel(ref: str) -> None:
    try:
        await run_blocking(ambient.cancel, ref, "stress_closed")
    except AdkError:
        pass  # it ended meanwhile
