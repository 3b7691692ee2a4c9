"""A run's server tells its registry of itself from its own `init` (session 30).

Regression for a race found while profiling awaited starts: the caller cast `Track`
after its start returned, so a run that ended, was retained and was let go before the
caller got there (a lagging event loop; a short retention) was tracked again afterwards,
for a server already gone; a `wait` then read ``Failed(("run_actor_exit", "killed"))``
for a run that had completed. Sent by the server itself, `Track` always reaches the
registry before that server's `Terminal`. Real registry (a private one), real runner,
scripted model.
"""

from __future__ import annotations

import itertools
from typing import Any

import adk_actors as adk
import supervision as sv
from adk_actors.outcomes import Failed
from adk_actors.runner.request import RunIdentity
from adk_actors.runs.registry import Known, Lost, RunRegistry
from tests.helpers import wait_until

_numbers = itertools.count()


def _runner(step: dict[str, Any]) -> adk.Runner:
    agent = adk.spawn_agent(
        f"Tracked{next(_numbers)}",
        {"provider": adk.ScriptedProvider(fn=lambda history, tools: step, inline=True)},
    )
    return adk.Runner(agent, "app", adk.sessions.InMemorySessionService())


def _start(runner: adk.Runner, registry: sv.Pid, retention: float) -> tuple[str, sv.Pid]:
    run_id = f"run-s30-{next(_numbers)}"
    identity = RunIdentity(
        run_id=run_id, retention=retention, max_buffered_events=16, registry=registry
    )
    server = runner.start_invocation("u", run_id, "hi", run=identity)
    return run_id, server


def _known(registry: sv.Pid) -> dict[str, Any]:
    return {run_id: (actor, outcome) for run_id, actor, outcome in sv.call(registry, Known())}


def test_a_run_is_tracked_by_its_registry_without_its_starter_telling_it() -> None:
    """A run started straight through the runner (no `adk.runs` call after the start) is
    known to its registry while it runs, and a kill before its terminal is recorded."""
    registry = RunRegistry.start(None)
    try:
        run_id, server = _start(_runner({"text": "late", "delay": 30}), registry, 60.0)
        wait_until(lambda: run_id in _known(registry))
        assert _known(registry)[run_id] == (server, None)  # running: no outcome yet
        sv.exit(server, "kill")
        wait_until(lambda: _known(registry)[run_id][0] is None)
        assert _known(registry)[run_id] == (None, Failed(("run_actor_exit", "killed")))
        assert sv.call(registry, Lost(run_id)) == Failed(("run_actor_exit", "killed"))
    finally:
        sv.stop(registry)
