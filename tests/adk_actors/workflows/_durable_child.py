"""One generation of the SIGKILL test (test_durable_kill.py), as its own OS process.

    python -m tests.adk_actors.workflows._durable_child LEDGER EFFECTS GENERATION NEW SEED

Runs two durable workflows: ``kill-sequential`` (steps ``s0``, ``s1``, ``s2``) and
``kill-fork`` (a graph: ``a``, then a fork of ``b1`` and ``b2``, each branch committed on
its own, then the join ``j``). It resumes every invocation in the ledger that is not
completed (with the workflow its record names) and starts `NEW` fresh ones
(``inv-<generation>-<n>``, even `n` sequential, odd `n` fork, so every generation has
work however far the others got), at most `_IN_FLIGHT` at a time. Each step, as it
starts, appends ``(invocation id, step, generation)`` to the effects LMDB (one key per
start), works a few milliseconds and returns the delta ``{step: generation}``. Before that it
reads the ledger: the value of its effect (JSON) lists the steps it follows (`BEFORE`)
that the ledger did not hold committed yet (``missing``: none, if every checkpoint is
committed before the next action may start) and the step budget left as it started
(``budget``: its own step taken). Prints
``{"ready": true}`` once the application runs, then ``{"done": true, "failures":
[...]}`` when every invocation has completed. The parent SIGKILLs it at random moments
in between.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lmdb

STEPS = {"kill-sequential": ("s0", "s1", "s2"), "kill-fork": ("a", "b1", "b2", "j")}
"""Each workflow's steps: a completed invocation's state holds exactly these keys."""
BEFORE = {"s1": {"s0"}, "s2": {"s0", "s1"}, "b1": {"a"}, "b2": {"a"}, "j": {"a", "b1", "b2"}}
"""The steps that must be committed before a step may start."""
_IN_FLIGHT = 8


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def generation_ids(generation: int, new: int) -> list[str]:
    """The invocations generation `generation` starts."""
    return [f"inv-{generation:03d}-{n:02d}" for n in range(new)]


def workflow_of(iid: str) -> str:
    """Which workflow a fresh invocation runs (by its number's parity)."""
    return "kill-fork" if int(iid.rsplit("-", 1)[1]) % 2 else "kill-sequential"


def effect_key(iid: str, step: str, generation: int) -> bytes:
    return f"{iid}/{step}/{generation}/{uuid.uuid4().hex}".encode()


def parse_effect(key: bytes) -> tuple[str, str, int]:
    iid, step, generation, _ = key.decode().split("/")
    return iid, step, int(generation)


def committed_steps(checkpoint: Any) -> set[str]:
    """The steps a checkpoint holds committed: the keys of its state and of its
    committed fork branches' deltas (every step writes its own name)."""
    from adk_actors.workflows.checkpoint import GraphCursor

    steps = set(checkpoint.state)
    cursor = checkpoint.cursor
    if isinstance(cursor, GraphCursor) and cursor.results:
        for result in cursor.results.values():
            steps |= set(result.delta)
    return steps


def build_specs(
    effects: Any, ledger: Any, generation: int, rng: random.Random
) -> list[dict[str, Any]]:
    """The specs of both workflows, their steps recording starts in `effects`."""
    lock = threading.Lock()

    def action(name: str) -> Any:
        def run(state: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
            iid = context["invocation_id"]
            missing = BEFORE.get(name, set()) - committed_steps(ledger.get(iid).checkpoint)
            value = {"missing": sorted(missing), "budget": context["budgets"]["steps_remaining"]}
            with effects.begin(write=True) as txn:  # the start is on disk before any work
                txn.put(effect_key(iid, name, generation), json.dumps(value).encode())
            with lock:
                pause = rng.uniform(0.002, 0.012)
            time.sleep(pause)
            return {name: generation}

        return run

    sequential = {
        "version": 1,
        "id": "kill-sequential",
        "kind": "sequential",
        "steps": [{"id": name, "run": action(name)} for name in STEPS["kill-sequential"]],
    }
    fork = {
        "version": 1,
        "id": "kill-fork",
        "kind": "graph",
        "entry": "a",
        "nodes": [
            {"id": "a", "run": action("a")},
            {"id": "fork", "type": "fork", "branches": ["b1", "b2"], "join": "j"},
            {"id": "b1", "run": action("b1")},
            {"id": "b2", "run": action("b2")},
            {"id": "j", "type": "join", "run": action("j")},
        ],
        "edges": {"a": "fork", "b1": "j", "b2": "j", "j": "end"},
    }
    return [sequential, fork]


def main(argv: list[str]) -> int:
    import adk_actors as adk
    from adk_actors.workflows import api
    from adk_actors.workflows.durable import resume_durable, start_durable
    from adk_actors.workflows.ledger_lmdb import LmdbLedger
    from adk_actors.workflows.outcomes import Completed
    from providers.errors import AdkError

    ledger_path, effects_path, generation_text, new_text, seed_text = argv
    generation, new = int(generation_text), int(new_text)
    rng = random.Random(int(seed_text) * 1000 + generation)
    effects = lmdb.open(effects_path, map_size=1 << 28, subdir=True)
    adk.start()
    ledger = LmdbLedger(ledger_path, map_size=1 << 26)
    workflows = {
        spec["id"]: adk.compile_workflow(spec)
        for spec in build_specs(effects, ledger, generation, rng)
    }
    known = set(ledger.invocation_ids(limit=10_000))
    todo = [iid for iid in sorted(known) if ledger.get(iid).phase != "completed"]
    todo += generation_ids(generation, new)
    _say({"ready": True, "todo": len(todo)})

    def run(iid: str) -> Any:
        wf = workflows[workflow_of(iid)]
        for _ in range(200):
            try:
                if iid in known:
                    wid = resume_durable(iid, wf, ledger=ledger, timeout=60.0)
                else:
                    _, wid = start_durable(wf, {}, ledger=ledger, invocation_id=iid, timeout=60.0)
                break
            except AdkError as error:
                if error.reason != ("workflow_start_failed", "invocation_owned"):
                    return [iid, "start", repr(error.reason)]
                time.sleep(0.01)  # the previous generation's owner is not gone yet
        else:
            return [iid, "start", "owned"]
        outcome = api.wait(wid, timeout=60.0)
        if not isinstance(outcome, Completed):
            return [iid, "outcome", repr(outcome)[:300]]
        return None

    with ThreadPoolExecutor(_IN_FLIGHT) as pool:
        failures = [failure for failure in pool.map(run, todo) if failure is not None]
    _say({"done": True, "failures": failures})
    ledger.close()
    adk.stop()
    effects.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
