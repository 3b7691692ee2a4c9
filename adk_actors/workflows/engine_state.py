"""The engine's run state and what every workflow kind shares: budgets, the cursor,
commits, action contexts, bounded branch pools and branch-delta merges.

`Run` is the mutable state of one engine task. Only the engine's own coroutine
changes it; a commit hands the coordinator the checkpoint of this instant and goes on
only once the coordinator holds it, so an action starts only after every boundary
before it is committed. A durable run's commit is a call the coordinator answers
after the ledger's write; a run without persistence commits into its coordinator's
`CommitCell` (the coordinator does nothing else with a commit: no round trip is
needed). The state dict is replaced, never changed in place, so a checkpoint handed
over stays as it was. `Run.committed` is the last committed checkpoint: a run that
does not complete ends with it, never with state merged since (a delta that was not
committed is not in any checkpoint, so a resume applies it once).

Budgets: every action takes its steps in a commit before it starts (`consume_step`).
A boundary right before the next action commits them with it (`commit(cursor,
take=n)`: the previous step's result and the next step's budget, one checkpoint), so
the action's own `consume_step` finds them taken and commits nothing. Such a
checkpoint means what a budget commit always meant: its cursor's action may have
started, its steps are spent (a resume takes them again for the action it runs
again, never gives them back).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
from msgspec import UNSET

from adk_actors.events import Event
from adk_actors.workflows import actions
from adk_actors.workflows.actions import ActionResult, Done, Failure, TimedOut
from adk_actors.workflows.checkpoint import Checkpoint, Cursor, Remaining
from adk_actors.workflows.errors import state_conflict, tagged
from adk_actors.workflows.launch import Runtime
from adk_actors.workflows.messages import Commit, Emit
from adk_actors.workflows.nested import NestedPause
from adk_actors.workflows.results import Control, normalize
from adk_actors.workflows.spec import MAX_STATE_BYTES, CompiledWorkflow, Merge
from supervision import Pid, aio, cast, self_pid


class CommitCell:
    """A run's last committed checkpoint, owned by its coordinator.

    The coordinator reads it (status, `checkpoint`, every outcome but a completion) and
    closes it at the run's terminal (`close`), under one lock with the engine's
    `commit`: a commit either lands before the close, and so is in the outcome, or is
    refused, and the engine starts nothing more. A run without persistence commits
    here directly, from its engine task; a durable one's coordinator stores each
    checkpoint (`store`) once the ledger has it."""

    __slots__ = ("_checkpoint", "_lock", "_open")

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._lock = threading.Lock()
        self._checkpoint = checkpoint
        self._open = True

    @property
    def checkpoint(self) -> Checkpoint:
        """The last committed checkpoint (the terminal's, once the run ended)."""
        return self._checkpoint

    def commit(self, checkpoint: Checkpoint) -> bool:
        """Commit `checkpoint` unless the run has ended (False: nothing changed)."""
        with self._lock:
            if not self._open:
                return False
            self._checkpoint = checkpoint
            return True

    def close(self) -> Checkpoint:
        """Refuse every later commit; the last committed checkpoint."""
        with self._lock:
            self._open = False
            return self._checkpoint

    def store(self, checkpoint: Checkpoint) -> None:
        """The coordinator's own write (a durable commit, the terminal's checkpoint)."""
        with self._lock:
            self._checkpoint = checkpoint


class EngineSetup(NamedTuple):
    """What the coordinator hands its engine task: `cell` when the engine commits
    into it directly (a run without persistence), else None (commits are calls)."""

    workflow: CompiledWorkflow
    checkpoint: Checkpoint
    runtime: Runtime
    coordinator: Pid
    invocation_id: str | None = None
    cell: CommitCell | None = None


class EngineEnd(NamedTuple):
    """How the engine ended: `kind` ``completed`` (value: the final state),
    ``paused`` (the pause details), ``failed`` (the reason) or ``timed_out``; and
    its checkpoint: completed, the final one (marked complete); otherwise the last
    committed one."""

    kind: str
    value: Any
    checkpoint: Checkpoint


class Ended(Exception):
    """Raised inside the engine to end the run now (`kind` as in `EngineEnd`). A
    completion whose last delta or output is not committed yet carries `end_cursor`,
    the cursor that commits it as finished (`run_engine` commits it only when the
    output schema refuses the result, so the failed checkpoint still holds the delta)."""

    def __init__(self, kind: str, value: Any = None, end_cursor: Cursor | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.value = value
        self.end_cursor = end_cursor


def failed(reason: Any) -> Ended:
    return Ended("failed", reason)


def timed_out() -> Ended:
    return Ended("timed_out")


def settled(result: ActionResult, tag: str, ident: Any) -> Done | NestedPause:
    """A result the run goes on with; raises for the deadline, and for a failure
    tagged ``(tag, ident, reason)`` (``step_failed``, ``node_failed``, ...)."""
    if isinstance(result, TimedOut):
        raise timed_out()
    if isinstance(result, Failure):
        raise failed(tagged(tag, ident, result.reason))
    return result


def refused(control: Control) -> Any:
    """Why a result is refused where it came: its own reason (an ``invalid`` result),
    or the kind of control that step may not return."""
    return control.reason if control.kind == "invalid" else ("invalid_control", control.kind)


def nested_details(details: dict[str, Any], **outer: Any) -> dict[str, Any]:
    """A child workflow's pause details as its parent reports them: the child's node
    becomes ``nested_node_id``; the parent's step/node/fork ids are added."""
    merged = dict(details)
    if "node_id" in details:
        merged["nested_node_id"] = details["node_id"]
    merged.update(outer)
    return merged


class Run:
    """One engine's run: workflow, state, cursor, budgets, output, deadline."""

    def __init__(self, setup: EngineSetup) -> None:
        cp = setup.checkpoint
        self.workflow = setup.workflow
        self.runtime = setup.runtime
        self.coordinator = setup.coordinator
        self.cell = setup.cell
        self.engine = self_pid()
        self.invocation_id = setup.invocation_id
        self.session_id = setup.invocation_id or setup.runtime.execution_id
        self.state: dict[str, Any] = cp.state
        self.cursor: Cursor = cp.cursor
        self.steps = cp.remaining.steps
        self.transfers = cp.remaining.transfers
        self.output: Any = cp.output
        self.deadline = setup.runtime.deadline
        self.committed: Checkpoint = cp  # the last checkpoint the coordinator holds
        self.taken = 0  # steps committed for actions not started yet (`commit(take=)`)

    # -- checkpoints -------------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """The checkpoint of this instant."""
        wf = self.workflow
        return Checkpoint(
            workflow_id=wf.id,
            workflow_version=wf.version,
            kind=wf.kind,
            cursor=self.cursor,
            state=self.state,
            remaining=Remaining(steps=self.steps, transfers=self.transfers),
            output=self.output,
        )

    async def commit(self, cursor: Cursor | None = None, take: int = 0) -> None:
        """Move to `cursor` (if given) and wait until the coordinator committed it.

        `take`: the steps of the actions that start right after this commit, taken in
        it (their `consume_step` then commits nothing). The caller starts nothing else
        in between. When fewer are left, the cursor is committed without them, and
        that `consume_step` fails ``budget_exhausted`` as it would have."""
        if cursor is not None:
            self.cursor = cursor
        taking = 0 < take <= self.steps
        if taking:
            self.steps -= take
        checkpoint = self.checkpoint()
        if self.cell is not None:
            ok = self.cell.commit(checkpoint)
        else:
            ok = await aio.call(self.coordinator, Commit(self.engine, checkpoint), None) == "ok"
        if not ok:  # the run ended meanwhile: nothing more may happen
            raise failed("not_running")
        self.committed = checkpoint
        if taking:
            self.taken += take

    async def consume_step(self, count: int = 1) -> None:
        """Take `count` steps from the budget, committed before the caller's actions
        start (in the last commit's `take`, else in a commit of their own), or fail
        ``budget_exhausted``."""
        if self.taken >= count:
            self.taken -= count
            return
        count -= self.taken
        self.taken = 0
        if self.steps < count:
            raise failed(("budget_exhausted", "steps"))
        self.steps -= count
        await self.commit()

    def merge(self, delta: Mapping[str, Any]) -> None:
        """Apply a (checked, fresh) delta: a shallow update into a new state dict."""
        if not delta:
            return
        merged = {**self.state, **delta}
        if len(msgspec.json.encode(merged)) > MAX_STATE_BYTES:
            raise failed("state_too_large")
        self.state = merged

    def set_output(self, value: Any) -> None:
        self.output = value

    @property
    def last_output(self) -> Any:
        """The last committed output (None before any): a sequential step's input."""
        return None if self.output is UNSET else self.output

    # -- actions -------------------------------------------------------------------------------

    def expired(self) -> bool:
        return self.deadline is not None and self.deadline <= time.monotonic()

    def context(self, step_id: str, input_value: Any) -> dict[str, Any]:
        """An action's context (``attempt`` and the ``cancelled`` signal are added per
        attempt)."""
        wf = self.workflow
        context: dict[str, Any] = {
            "workflow_id": wf.id,
            "kind": wf.kind,
            "step_id": step_id,
            "app_name": actions.APP_NAME,
            "user_id": wf.id,
            "session_id": self.session_id,
            "checkpoint_cursor": msgspec.to_builtins(self.cursor),
            "deadline": self.deadline,
            "input": input_value,
            "budgets": {"steps_remaining": self.steps, "transfers_remaining": self.transfers},
        }
        if self.invocation_id is not None:
            context["invocation_id"] = self.invocation_id
        return context

    def act(
        self,
        step_id: str,
        action: Any,
        policy: Any,
        input_value: Any,
        resume: tuple[Checkpoint, Any] | None = None,
    ) -> Coroutine[Any, Any, ActionResult]:
        """Run an action (the state and context of this instant) under its policy."""
        context = self.context(step_id, input_value)
        return actions.perform(action, policy, self.state, context, self.deadline, resume)

    async def call(self, step_id: str, callback: Any, input_value: Any = None) -> tuple[str, Any]:
        """Run a predicate or router callback once on (state, context), in a task:
        ``("value", v)``, ``("failure", reason)`` or ``("deadline", None)``."""
        state = actions.copy_state(self.state)
        fence = actions.AttemptFence()
        context = {
            **self.context(step_id, input_value),
            "state": state,
            "cancelled": fence.cancelled,
        }
        return await actions.call(callback, (state, context), self.deadline, fence)

    async def decide(self, node_id: str, callback: Any, input_value: Any, tag: str) -> Any:
        """The value of a router, route or loop predicate of graph node `node_id`
        (`call`); raises for the deadline, and ``(tag, node_id, reason)`` for its failure."""
        kind, value = await self.call(node_id, callback, input_value)
        if kind == "deadline":
            raise timed_out()
        if kind == "failure":
            raise failed(tagged(tag, node_id, value))
        return value

    def emit(self, event: Event) -> None:
        cast(self.coordinator, Emit(self.engine, event))


# -- bounded branches ----------------------------------------------------------------------------


def concurrency_limit(own: int, option: int | None) -> int:
    """A parallel workflow's or fork's bound under the ``max_concurrency`` run option:
    the option is a ceiling (the smaller of the two), never a raise."""
    return own if option is None else min(own, option)


class Branches:
    """At most `limit` branch coroutines at once, their results as they come (the
    lowest index first among those done together). Leaving the block cancels every
    branch still running, and so kills its attempt task."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.active: dict[asyncio.Future[Any], Any] = {}

    def full(self) -> bool:
        return len(self.active) >= self.limit

    @property
    def free(self) -> int:
        """How many more branches may start now."""
        return max(0, self.limit - len(self.active))

    def start(self, key: Any, work: Coroutine[Any, Any, Any]) -> None:
        self.active[asyncio.ensure_future(work)] = key

    async def next(self) -> tuple[Any, Any]:
        """The key and result of the next branch to end."""
        done, _ = await asyncio.wait(self.active, return_when=asyncio.FIRST_COMPLETED)
        first = min(done, key=lambda future: self.active[future])
        key = self.active.pop(first)
        return key, first.result()

    async def close(self) -> None:
        active, self.active = list(self.active), {}
        for future in active:
            future.cancel()
        if active:
            await asyncio.gather(*active, return_exceptions=True)

    async def __aenter__(self) -> Branches:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# -- merging branch deltas -----------------------------------------------------------------------


class MergeFailed(Exception):
    """Branch deltas could not merge: `reason` is public."""

    def __init__(self, reason: Any) -> None:
        super().__init__("merge_failed")
        self.reason = reason


async def merge_branches(
    run: Run, merge: Merge, ordered: Sequence[tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """One delta from the branches' deltas, in declared branch order (never completion
    order): ``ordered_last_wins`` folds them; ``reject_conflicts`` refuses unequal
    writes of two branches to one key (equal ones are fine); ``custom`` asks
    ``fn(ordered_deltas, state)`` in a task. Raises `MergeFailed`."""
    if merge.name == "ordered_last_wins":
        merged: dict[str, Any] = {}
        for _branch, delta in ordered:
            merged.update(delta)
        return merged
    if merge.name == "reject_conflicts" or merge.fn is None:
        return _reject_conflicts(ordered)
    pairs = [[branch, delta] for branch, delta in ordered]
    state = actions.copy_state(run.state)
    kind, value = await actions.call(merge.fn, (pairs, state), run.deadline)
    if kind == "deadline":
        raise timed_out()
    if kind == "failure":
        raise MergeFailed(("merge_failed", value))
    control = normalize(value)
    if control.kind == "ok":
        return dict(control.delta)
    if control.kind == "error":
        raise MergeFailed(("merge_failed", control.reason))
    raise MergeFailed("invalid_merge_result")


def _reject_conflicts(ordered: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for branch, delta in ordered:
        for key, value in delta.items():
            if key not in merged:
                merged[key] = value
                owners[key] = branch
            elif merged[key] != value:
                raise MergeFailed(state_conflict([owners[key], branch]))
    return merged
