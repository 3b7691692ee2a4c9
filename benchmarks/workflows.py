"""Workflow throughput: ours against google-adk's nearest equivalents, side by side.

The same work on both sides, plain synchronous functions that return a small state
delta:

* a 3-step sequential workflow (each step adds one to a counter);
* a 4-branch fork/join (each branch writes its own key and outputs its name; the
  join sees the four outputs keyed by branch);
* a durable 3-step sequential workflow, counting committed steps per second.

Ours: `adk.run_workflow` on a compiled spec (one coordinator process per run under
the workflow supervisor, each step a monitored task, one checkpoint per step: its
result together with the next step's budget), and `adk.workflows.start_durable` +
`wait` on an `LmdbLedger` (create, claim, every checkpoint committed to LMDB before the
engine goes on, finish: 6 write transactions per 3-step run), plus the ledger's own
fenced checkpoint commits per second.
google-adk: its 2.x graph `Workflow` (a chain of `FunctionNode`s; a fan-out into a
`JoinNode`) run by an `InMemoryRunner`, and its (deprecated) `SequentialAgent` /
`ParallelAgent` over `BaseAgent` subclasses whose `_run_async_impl` yields one
state-delta event; a fresh session per run (a google-adk run needs one). Durable:
the same `Workflow` on its `SqliteSessionService` (every node's event and state
delta written to SQLite). google-adk has no fenced ledger: that row compares the
nearest thing, a persisted event per step, not the same guarantee.

Sequential = one run after another; concurrent = 64 at once (16 for durable runs;
ours: threads calling `run_workflow`; google-adk: `run_async` coroutines under
`asyncio.gather`). Before timing, one run of every side is checked to its final
state (and the join's output); every timed round checks that each step function ran
exactly once per step of each run.

google-adk's `build_node`, run for every node of every `Workflow` run, tries
``from ..agents.remote_a2a_agent import RemoteA2aAgent``; without the optional
`a2a-sdk` (the ``google-adk[a2a]`` extra) that import fails and is executed again each
time (16 module executions per 3-step run), which halves the `Workflow` rows. When it
fails, a placeholder module is cached instead (`cache_optional_a2a`), as installing
the extra would, so the peer is measured at its best; the header says so.

Needs google-adk (`make bench` installs it in `.venv-bench`).
Usage: ``python benchmarks/workflows.py [--quick]``
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import importlib.metadata
import itertools
import os
import platform
import secrets
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import AsyncGenerator, Callable
from functools import partial
from types import ModuleType
from typing import Any

from google.adk.agents import BaseAgent, ParallelAgent, SequentialAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event, EventActions
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.workflow import START, JoinNode, Workflow
from google.genai import types
from weather_workload import quiet_options

import adk_actors as adk
import supervision as sv

BRANCHES = 4
STEPS = 3
WIDTH = 64
DURABLE_WIDTH = 16
BRANCH_NAMES = [f"b{n}" for n in range(BRANCHES)]
JOINED = {name: {"branch": name} for name in BRANCH_NAMES}


class Calls:
    """Step-function calls, counted from any thread (``next`` on a count is atomic)."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._seen = 0

    def tick(self) -> None:
        next(self._counter)

    def take(self) -> int:
        """Calls since the last `take` (this read uses one number of the count)."""
        now = next(self._counter)
        taken, self._seen = now - self._seen, now + 1
        return taken


CALLS = Calls()


# -- our side ------------------------------------------------------------------------------


def count_step(state: dict[str, Any]) -> dict[str, Any]:
    """One sequential step's delta."""
    CALLS.tick()
    return {"count": state.get("count", 0) + 1}


def branch_step(name: str) -> Callable[[dict[str, Any]], Any]:
    """A fork branch writes its key and outputs its name."""

    def branch(state: dict[str, Any]) -> Any:
        CALLS.tick()
        return adk.workflows.Output({"branch": name}, {name: 1})

    return branch


def our_sequential() -> adk.workflows.CompiledWorkflow:
    steps = [{"id": f"s{n}", "run": count_step} for n in range(STEPS)]
    return adk.compile_workflow({"id": "bench-seq", "kind": "sequential", "steps": steps})


def our_fork_join() -> adk.workflows.CompiledWorkflow:
    nodes: list[dict[str, Any]] = [
        {"id": "fork", "type": "fork", "branches": BRANCH_NAMES, "join": "join"},
        *({"id": name, "run": branch_step(name)} for name in BRANCH_NAMES),
        {"id": "join", "type": "join"},
    ]
    edges: dict[str, Any] = {name: "join" for name in BRANCH_NAMES}
    edges["join"] = "end"
    spec = {"id": "bench-fork", "kind": "graph", "entry": "fork", "nodes": nodes, "edges": edges}
    return adk.compile_workflow(spec)


def check_sequential(outcome: Any) -> None:
    assert isinstance(outcome, adk.workflows.Completed), outcome
    assert outcome.state == {"count": STEPS}, outcome.state


def check_fork(outcome: Any) -> None:
    assert isinstance(outcome, adk.workflows.Completed), outcome
    assert outcome.state == dict.fromkeys(BRANCH_NAMES, 1), outcome.state
    assert outcome.checkpoint.output == JOINED, outcome.checkpoint.output


def our_run(wf: adk.workflows.CompiledWorkflow) -> Callable[[], None]:
    def run_one() -> None:
        outcome = adk.run_workflow(wf, {})
        assert isinstance(outcome, adk.workflows.Completed), outcome

    return run_one


def our_durable_run(
    wf: adk.workflows.CompiledWorkflow, ledger: adk.workflows.Ledger
) -> Callable[[], None]:
    def run_one() -> None:
        _, ref = adk.workflows.start_durable(wf, {}, ledger=ledger)
        outcome = adk.workflows.wait(ref)
        assert isinstance(outcome, adk.workflows.Completed), outcome

    return run_one


def our_rate(count: int, width: int, run_one: Callable[[], None]) -> float:
    """Runs/s: `count` runs over `width` threads."""
    per_thread = count // width

    def work() -> None:
        for _ in range(per_thread):
            run_one()

    threads = [threading.Thread(target=work) for _ in range(width)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per_thread * width / (time.perf_counter() - started)


def verify_ours(
    sequential: adk.workflows.CompiledWorkflow,
    fork: adk.workflows.CompiledWorkflow,
    ledger: adk.workflows.Ledger,
) -> adk.workflows.Checkpoint:
    """One run of each of our workflows, checked to its final state; returns a
    (completed) checkpoint for the raw ledger row."""
    outcome = adk.run_workflow(sequential, {})
    check_sequential(outcome)
    check_fork(adk.run_workflow(fork, {}))
    iid, ref = adk.workflows.start_durable(sequential, {}, ledger=ledger)
    check_sequential(adk.workflows.wait(ref))
    record = adk.workflows.durable_status(iid, ledger=ledger)
    assert record.phase == "completed" and not record.owned, record
    assert record.checkpoint.state == {"count": STEPS}, record.checkpoint
    assert CALLS.take() == 2 * STEPS + BRANCHES
    return outcome.checkpoint


def ledger_commit_rate(
    ledger: adk.workflows.Ledger, checkpoint: adk.workflows.Checkpoint, commits: int
) -> float:
    """The raw ledger: create, claim, then `commits` fenced checkpoint commits (each a
    committed LMDB write transaction) by one owner."""
    iid = f"inv-bench-{secrets.token_hex(8)}"
    token = secrets.token_hex(32)
    metadata = {"workflow_id": "bench-seq", "workflow_version": 1, "kind": "sequential"}
    ledger.create(iid, metadata, checkpoint)
    ledger.claim(iid, sv.self_pid(), token, time.time(), 30.0)
    started = time.perf_counter()
    for _ in range(commits):
        ledger.checkpoint(iid, token, checkpoint, time.time(), 30.0)
    rate = commits / (time.perf_counter() - started)
    assert ledger.get(iid).revision == commits + 1  # create is 0, claim 1
    return rate


# -- google-adk side -----------------------------------------------------------------------


def cache_optional_a2a() -> bool:
    """Cache a placeholder for google-adk's optional `remote_a2a_agent` module when
    `a2a-sdk` is missing (see the module docstring); True if it did. No node here is a
    `RemoteA2aAgent`, so `build_node`'s ``isinstance`` checks answer as before."""
    name = "google.adk.agents.remote_a2a_agent"
    try:
        importlib.import_module(name)
    except ImportError:
        placeholder = ModuleType(name)
        setattr(placeholder, "RemoteA2aAgent", type("RemoteA2aAgent", (), {}))  # noqa: B010
        sys.modules[name] = placeholder
        return True
    return False


def peer_count_step(ctx: Any, node_input: Any) -> Any:
    """A `FunctionNode`'s body: the same delta, through the node's state."""
    CALLS.tick()
    ctx.state["count"] = ctx.state.get("count", 0) + 1
    return {"count": ctx.state["count"]}


def peer_branch(name: str) -> Callable[..., Any]:
    def branch(ctx: Any, node_input: Any) -> Any:
        CALLS.tick()
        ctx.state[name] = 1
        return {"branch": name}

    branch.__name__ = name  # the node's name, hence the join's key
    return branch


def peer_sequential_workflow() -> Workflow:
    steps = []
    for n in range(STEPS):

        def step(ctx: Any, node_input: Any) -> Any:
            return peer_count_step(ctx, node_input)

        step.__name__ = f"s{n}"
        steps.append(step)
    return Workflow(name="seq", edges=[(START, *steps)])


def peer_fork_workflow() -> Workflow:
    branches = tuple(peer_branch(name) for name in BRANCH_NAMES)
    return Workflow(name="fork", edges=[(START, branches, JoinNode(name="join"))])


class CountAgent(BaseAgent):
    """google-adk's function-backed agent: one event adding one to the counter."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        CALLS.tick()
        delta = {"count": ctx.session.state.get("count", 0) + 1}
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            actions=EventActions(state_delta=delta),
        )


class BranchAgent(BaseAgent):
    """A parallel branch: one event writing its own key."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        CALLS.tick()
        delta = {self.name: 1}
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            actions=EventActions(state_delta=delta),
        )


def peer_sequential_agent() -> SequentialAgent:
    return SequentialAgent(name="seq", sub_agents=[CountAgent(name=f"s{n}") for n in range(STEPS)])


def peer_parallel_agent() -> ParallelAgent:
    return ParallelAgent(name="par", sub_agents=[BranchAgent(name=name) for name in BRANCH_NAMES])


_users = itertools.count()
_MESSAGE = types.Content(role="user", parts=[types.Part(text="go")])


async def peer_one(runner: Runner) -> tuple[str, str, list[Event]]:
    """One run in a fresh session, consumed to its last event."""
    user = f"u{next(_users)}"
    session = await runner.session_service.create_session(app_name="bench", user_id=user)
    events = [
        event
        async for event in runner.run_async(
            user_id=user, session_id=session.id, new_message=_MESSAGE
        )
    ]
    assert events and events[-1].error_code is None, events[-1:]
    return user, session.id, events


def peer_rate(count: int, width: int, runner: Runner) -> float:
    """Runs/s: `count` runs, `width` coroutines at a time under `asyncio.gather`."""

    async def main() -> None:
        for start in range(0, count, width):
            await asyncio.gather(*(peer_one(runner) for _ in range(min(width, count - start))))

    started = time.perf_counter()
    asyncio.run(main())
    return count / (time.perf_counter() - started)


async def peer_final(runner: Runner) -> tuple[dict[str, Any], list[Event]]:
    """One run: the session's state read back from its service, and the run's events
    (each of which the service also stored, after the user's message)."""
    user, session_id, events = await peer_one(runner)
    done = await runner.session_service.get_session(
        app_name="bench", user_id=user, session_id=session_id
    )
    assert done is not None
    assert [event.id for event in done.events[1:]] == [event.id for event in events]
    return done.state, events


def verify_peers(
    seq_wf: Runner, fork_wf: Runner, seq_agent: Runner, par_agent: Runner, durable: Runner
) -> None:
    """One run of each peer, checked to its final state (and the join's output)."""

    async def main() -> None:
        for runner in (seq_wf, seq_agent, durable):
            state, events = await peer_final(runner)
            assert state == {"count": STEPS}, state
            assert len(events) == STEPS, events  # one event per step, after the user's
        state, events = await peer_final(par_agent)
        assert state == dict.fromkeys(BRANCH_NAMES, 1), state
        assert len(events) == BRANCHES, events  # no join: the ParallelAgent has none
        state, events = await peer_final(fork_wf)
        assert state == dict.fromkeys(BRANCH_NAMES, 1), state
        assert len(events) == BRANCHES + 1 and events[-1].output == JOINED, events[-1]

    asyncio.run(main())
    assert CALLS.take() == 3 * STEPS + 2 * BRANCHES


# -- report --------------------------------------------------------------------------------


def measure(rounds: int, runs: int, steps: int, sides: list[Callable[[], float]]) -> list[float]:
    """Each side's best rate over `rounds`. The sides take turns, the first one changing
    each round, each after a `gc.collect()`; every measured round must have called its
    step functions exactly `steps` times per run."""
    best = [0.0] * len(sides)
    for round_ in range(rounds):
        for offset in range(len(sides)):
            index = (round_ + offset) % len(sides)
            gc.collect()
            rate = sides[index]()
            calls = CALLS.take()
            assert calls == runs * steps, (index, calls, runs * steps)
            best[index] = max(best[index], rate)
    return best


def machine_facts(a2a_placeholder: bool) -> list[str]:
    a2a = "placeholder for the missing a2a-sdk" if a2a_placeholder else "a2a-sdk installed"
    return [
        f"date     {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"cpus     {os.cpu_count()}",
        f"python   {platform.python_implementation()} {platform.python_version()}",
        f"platform {platform.platform()}",
        f"peer     google-adk {importlib.metadata.version('google-adk')} ({a2a})",
        "load     " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]


def row(label: str, ours: float, peers: list[float]) -> str:
    """One table line: ours, each peer, then ours / each peer."""
    cells = "".join(f"{peer:>16,.0f}" for peer in peers)
    ratios = "".join(f"{ours / peer:>15.2f}x" for peer in peers)
    return f"  {label:32s}{ours:>10,.0f}{cells}{ratios}"


def header(*columns: str) -> str:
    widths = (10, *(16,) * (len(columns) - 1))
    cells = "".join(f"{name:>{width}s}" for name, width in zip(columns, widths, strict=True))
    return "  " + " " * 32 + cells


def main() -> None:
    options = quiet_options((__doc__ or "").splitlines()[0])
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # Sequential/ParallelAgent
    count, durable_count, rounds, commits = (
        (128, 64, 1, 500) if options.quick else (1_024, 96, 3, 10_000)
    )
    a2a_placeholder = cache_optional_a2a()
    print(f"# workflows benchmark  {datetime.date.today()}")
    for fact in machine_facts(a2a_placeholder):
        print(fact)
    adk.start()
    directory = tempfile.mkdtemp(prefix="adk-bench-workflows-")
    ledger = adk.workflows.LmdbLedger(os.path.join(directory, "ledger"))
    sqlite = SqliteSessionService(os.path.join(directory, "peer.db"))
    sequential, fork = our_sequential(), our_fork_join()
    seq_wf = InMemoryRunner(node=peer_sequential_workflow(), app_name="bench")
    fork_wf = InMemoryRunner(node=peer_fork_workflow(), app_name="bench")
    seq_agent = InMemoryRunner(agent=peer_sequential_agent(), app_name="bench")
    par_agent = InMemoryRunner(agent=peer_parallel_agent(), app_name="bench")
    durable_wf = Runner(node=peer_sequential_workflow(), app_name="bench", session_service=sqlite)
    checkpoint = verify_ours(sequential, fork, ledger)
    verify_peers(seq_wf, fork_wf, seq_agent, par_agent, durable_wf)

    print(f"\nworkflows/s, {count:,} runs, best of {rounds}")
    print(header("ours", "adk Workflow", "adk Seq/ParAgt") + "    vs Workflow  vs Seq/ParAgt")
    cases = (
        ("3-step", sequential, seq_wf, seq_agent, STEPS),
        ("4-fork/join", fork, fork_wf, par_agent, BRANCHES),
    )
    for name, ours_wf, peer_wf, peer_agent, steps in cases:
        for label, width in (("sequential", 1), (f"{WIDTH}-way concurrent", WIDTH)):
            rates = measure(
                rounds,
                count,
                steps,
                [
                    partial(our_rate, count, width, our_run(ours_wf)),
                    partial(peer_rate, count, width, peer_wf),
                    partial(peer_rate, count, width, peer_agent),
                ],
            )
            print(row(f"{name}, {label}", rates[0], rates[1:]))

    print(f"\ndurable steps/s (3 x runs/s), {durable_count:,} 3-step runs, best of {rounds}")
    print(header("ours LMDB", "adk WF SQLite") + "          ratio")
    for label, width in (("sequential", 1), (f"{DURABLE_WIDTH}-way concurrent", DURABLE_WIDTH)):
        runs_per_s = measure(
            rounds,
            durable_count,
            STEPS,
            [
                partial(our_rate, durable_count, width, our_durable_run(sequential, ledger)),
                partial(peer_rate, durable_count, width, durable_wf),
            ],
        )
        ours, peer = (STEPS * rate for rate in runs_per_s)
        print(row(f"3-step, {label}", ours, [peer]))
    gc.collect()
    raw = max(ledger_commit_rate(ledger, checkpoint, commits) for _ in range(rounds))
    print(f"  ledger checkpoint commits/s (one owner, {commits:,} commits): {raw:,.0f}")
    ledger.close()
    adk.stop()
    shutil.rmtree(directory, ignore_errors=True)
    print("\nload after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
