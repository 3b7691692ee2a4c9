"""Durable workflows survive SIGKILL of their whole OS process, again and again.

A child process (`_durable_child.py`, one "generation") runs durable workflows on one
LMDB ledger, a 3-step sequential one and a graph with a fork whose branches commit on
their own (`NEW` fresh invocations per generation, so each has work to be killed in,
plus every unfinished one of earlier generations); every step records its start
``(invocation, step, generation)`` in a separate effects LMDB before it works. The
parent SIGKILLs the child at a random moment, at least `MIN_KILLS` times, reading the
ledger after each kill, and starts a new generation that resumes every invocation not
completed. No lease has to run out: the killed process is gone, so its claims are
taken over at once (the ledger's dead-owner rule for OS processes).

A step is committed once the ledger's checkpoint holds its delta: in the state, or in
a committed fork branch's result. Invariants:
* a committed step never starts again: once the ledger held step ``s`` of an
  invocation committed (observed after generation ``g`` was killed), no generation
  after ``g`` recorded a start of ``s`` for it. (A step that started but was not
  committed may start again in a later generation: at least once, never more after
  its commit.)
* within a generation, a step of an invocation starts at most once;
* a checkpoint is committed before the next action may start: when a step started,
  the ledger held every step before it committed;
* exactly once per committed step: the delta a completed invocation holds for ``s``
  names the generation of the last recorded start of ``s``, the one run that counted;
* every invocation completes, with every step's delta in its state;
* every ledger record decodes, and at the end none is owned;
* budgets are never given back, nor charged twice: each step takes its budget in a
  commit before it starts (with the previous step's result), so a start in a later
  generation, or after a step it follows, saw strictly less left than the earlier
  one; a completed record keeps what its last start saw (nothing taken after it);
  and an invocation that one generation ran from start to completion spent exactly
  one step per step.

Every failure carries the seed in a note (``ADK_KILL_SEED=<seed>`` replays its kill
times and step durations).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import lmdb
import pytest

from adk_actors.workflows.ledger_lmdb import LmdbLedger

from ._durable_child import (
    BEFORE,
    STEPS,
    committed_steps,
    generation_ids,
    parse_effect,
    workflow_of,
)

ROOT = Path(__file__).resolve().parents[3]
NEW = 16
MIN_KILLS = 50
MAX_GENERATIONS = 4 * MIN_KILLS
"""Generations go on past `MIN_KILLS` kills until the ledger holds `5 * NEW` invocations
and one completed in the generation that created it (on a loaded machine a child does
less before its kill), but never past this many: the checks below then fail."""
KILL_WINDOW = 0.12
"""A kill comes uniformly within this many seconds after the child reports ready."""


def _generation(
    ledger: Path, effects: Path, generation: int, new: int, seed: int
) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.adk_actors.workflows._durable_child"]
    args += [str(ledger), str(effects), str(generation), str(new), str(seed)]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _read_line(child: subprocess.Popen) -> dict:
    line = child.stdout.readline()
    assert line, f"the child ended without a word (exit {child.wait(10)})"
    return json.loads(line)


def _committed_steps(ledger: LmdbLedger) -> dict[str, set[str]]:
    """The committed steps of each invocation (decoding every record: an undecodable
    one fails the test): the keys of its checkpoint's state and of its committed fork
    branches' deltas (every step writes its own name)."""
    committed = {}
    for iid in ledger.invocation_ids(limit=10_000):
        steps = committed_steps(ledger.get(iid).checkpoint)
        assert steps <= set(STEPS[workflow_of(iid)]), (iid, steps)
        committed[iid] = steps
    return committed


@pytest.mark.timeout(180)
def test_sigkilled_generations_never_rerun_a_committed_step(tmp_path):
    seed = int(os.environ.get("ADK_KILL_SEED", random.randrange(1 << 30)))
    try:
        _kill_and_resume(tmp_path, seed)
    except BaseException as failure:
        failure.add_note(f"replay with ADK_KILL_SEED={seed}")
        raise


def _kill_and_resume(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ledger_path, effects_path = tmp_path / "ledger", tmp_path / "effects"
    effects_path.mkdir()
    ledger = LmdbLedger(ledger_path, map_size=1 << 26)
    committed_after: dict[tuple[str, str], int] = {}  # (iid, step) -> generation
    completed_after: dict[str, int] = {}  # iid -> the generation after which it was done
    kills, generation, interrupted = 0, 0, 0

    def observe(after: int) -> dict[str, set[str]]:
        committed = _committed_steps(ledger)
        for iid, steps in committed.items():
            for step in steps:
                committed_after.setdefault((iid, step), after)
        for iid in ledger.invocation_ids(["completed"], limit=10_000):
            completed_after.setdefault(iid, after)
        return committed

    def enough_work() -> bool:
        """Work for every check below: `5 * NEW` invocations in the ledger, and one that
        completed in the generation that created it (so every start it had was in that
        generation: the budget check of an uninterrupted invocation)."""
        ids = ledger.invocation_ids(limit=10_000)
        whole = [iid for iid in ids if completed_after.get(iid) == int(iid.split("-")[1])]
        return len(ids) >= 5 * NEW and bool(whole)

    while (kills < MIN_KILLS or not enough_work()) and generation < MAX_GENERATIONS:
        generation += 1
        child = _generation(ledger_path, effects_path, generation, NEW, seed)
        try:
            ready = _read_line(child)
            assert ready["ready"], ready
            time.sleep(rng.uniform(0.0, KILL_WINDOW))
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(30)
        committed = observe(generation)
        unfinished = [
            i for i, steps in committed.items() if len(steps) < len(STEPS[workflow_of(i)])
        ]
        if child.returncode == -signal.SIGKILL and unfinished:
            interrupted += 1

    generation += 1
    final = _generation(ledger_path, effects_path, generation, 0, seed)
    try:
        _read_line(final)
        done = _read_line(final)
        assert final.wait(60) == 0
    finally:
        if final.poll() is None:
            final.kill()
    assert done == {"done": True, "failures": []}
    committed = observe(generation)

    # every invocation in the ledger completed, none owned, every record decodes (an
    # invocation whose generation died before creating its record never existed)
    started = [iid for g in range(1, generation) for iid in generation_ids(g, NEW)]
    ids = ledger.invocation_ids(limit=10_000)
    assert set(ids) <= set(started) and len(ids) >= 5 * NEW
    assert {workflow_of(iid) for iid in ids} == set(STEPS)
    assert ledger.invocation_ids(["completed"], limit=10_000) == ids
    states = {}
    for iid in ids:
        record = ledger.get(iid)
        assert (record.phase, record.owned, record.checkpoint.completed) == (
            "completed",
            False,
            True,
        )
        assert set(record.checkpoint.state) == set(STEPS[workflow_of(iid)])
        states[iid] = record.checkpoint.state
    assert committed == {iid: set(STEPS[workflow_of(iid)]) for iid in ids}

    # no committed step started again; at most one start per step per generation
    env = lmdb.open(str(effects_path), subdir=True, readonly=True, lock=False)
    with env.begin() as txn:
        effects = [
            (parse_effect(bytes(key)), json.loads(bytes(value))) for key, value in txn.cursor()
        ]
    env.close()
    starts = [start for start, _ in effects]
    early = [(start, value["missing"]) for start, value in effects if value["missing"]]
    assert early == [], "steps started before the steps they follow were committed"
    per_generation = Counter(starts)
    assert max(per_generation.values()) == 1
    assert {(iid, step) for iid, step, _ in starts} == {
        (iid, step) for iid in ids for step in STEPS[workflow_of(iid)]
    }
    late = [(iid, step, gen) for iid, step, gen in starts if gen > committed_after[(iid, step)]]
    assert late == [], "committed steps started again"
    # the run that counted is the last one: exactly once per committed step
    last_start: dict[tuple[str, str], int] = {}
    for iid, step, gen in starts:
        last_start[(iid, step)] = max(gen, last_start.get((iid, step), 0))
    counted = {(iid, step): gen for iid, state in states.items() for step, gen in state.items()}
    assert counted == last_start
    assert len(starts) > len(last_start)  # some uncommitted steps did run again
    _check_budgets(ledger, ids, effects, completed_after)
    ledger.close()
    assert kills >= MIN_KILLS and interrupted > 0, (kills, interrupted)


def _check_budgets(
    ledger: LmdbLedger,
    ids: list[str],
    effects: list[tuple[tuple[str, str, int], dict]],
    completed_after: dict[str, int],
) -> None:
    """The budget invariants of the module docstring, from each start's ``budget``."""
    seen: dict[str, list[tuple[int, str, int]]] = {}  # iid -> (generation, step, budget)
    for (iid, step, gen), value in effects:
        seen.setdefault(iid, []).append((gen, step, value["budget"]))
    uninterrupted = 0
    for iid in ids:
        record = ledger.get(iid)
        starts = seen[iid]
        for gen_a, step_a, left_a in starts:
            for gen_b, step_b, left_b in starts:
                later = gen_b > gen_a or (gen_b == gen_a and step_a in BEFORE.get(step_b, ()))
                if later:  # never given back: B was charged after A's charge
                    assert left_b < left_a, (iid, (gen_a, step_a, left_a), (gen_b, step_b, left_b))
        assert record.checkpoint.remaining.steps == min(left for _, _, left in starts), iid
        created = int(iid.split("-")[1])
        if completed_after.get(iid) == created and {gen for gen, _, _ in starts} == {created}:
            uninterrupted += 1
            spent = 1000 - record.checkpoint.remaining.steps
            assert spent == len(STEPS[workflow_of(iid)]), (iid, spent)
    assert uninterrupted > 0
