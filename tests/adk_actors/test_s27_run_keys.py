"""Issue 20 §4 (a run's start made cheaper): one random draw names a run, its invocation
and its opening token; and the run registry's cap counts ended runs without a pass over
every retained run, paused ones still never counted (real registry, real processes)."""

from __future__ import annotations

import uuid

import supervision as sv
from adk_actors.events import Event
from adk_actors.outcomes import Completed, Failed, Paused
from adk_actors.runner.messages import Terminal
from adk_actors.runs.registry import RunRegistry, Stats, Track
from adk_actors.runs.values import new_run_keys
from tests.helpers import wait_until


def test_a_new_runs_ids_are_the_specs_and_none_is_derived_from_another() -> None:
    """The run id is ``run-<uuid4>``; the invocation id and the token are drawn apart
    from it (review of b429e36, finding 2: the invocation id, seen in events and spans,
    was the run id's hex)."""
    keys = [new_run_keys() for _ in range(200)]
    for run_id, invocation_id, token in keys:
        assert run_id.startswith("run-")
        drawn = uuid.UUID(run_id[4:])
        assert drawn.version == 4 and str(drawn) == run_id[4:]  # run-<uuid4>, canonical
        assert invocation_id.startswith("inv-") and uuid.UUID(invocation_id[4:]).version == 4
        assert invocation_id[4:] != drawn.hex and drawn.hex not in token
        assert len(token) == 32 and token != invocation_id[4:]
    assert len({key for keys_ in keys for key in keys_}) == 3 * len(keys)  # all distinct


class _Idle(sv.GenServer):
    """A stand-in run server: the registry only monitors it and shuts it down."""


def _retained(registry: sv.Pid) -> int:
    return int(sv.call(registry, Stats())["retained"])


def test_the_cap_evicts_the_oldest_ended_runs_and_never_a_paused_one() -> None:
    registry = RunRegistry.start(2)
    servers = [_Idle.start() for _ in range(5)]
    paused = Paused(Event.new("runner", "inv-paused"))
    outcomes = [paused, Completed("a"), Failed("b"), Completed("c"), Completed("d")]
    try:
        for number, (server, outcome) in enumerate(zip(servers, outcomes, strict=True)):
            sv.cast(registry, Track(f"run-{number}", server, 60.0, None))
            sv.cast(registry, Terminal(f"run-{number}", server, 60.0, outcome))
        wait_until(lambda: _retained(registry) == 3)  # the paused one and the 2 newest
        wait_until(lambda: not servers[1].is_alive() and not servers[2].is_alive())
        assert servers[0].is_alive() and servers[3].is_alive() and servers[4].is_alive()
        lost = _Idle.start()  # a run whose server dies before its outcome counts as ended
        sv.cast(registry, Track("run-lost", lost, 60.0, None))
        sv.exit(lost, "kill")
        wait_until(lambda: not servers[3].is_alive())  # the oldest ended one made room
        assert _retained(registry) == 3 and servers[0].is_alive() and servers[4].is_alive()
    finally:
        sv.stop(registry)
        for server in servers:
            if server.is_alive():
                sv.stop(server)
