"""The workflow engine: the coroutine task that interprets a compiled workflow.

`run_engine` runs as a `Task` owned by the coordinator (on the kernel's reactor, so a
waiting engine holds no thread). It starts from a checkpoint (a fresh one, or a resume
point: committed steps are never run again), runs actions through `actions.perform`
(each attempt a monitored task of its own), and commits a checkpoint at every
deterministic boundary before the next action starts: each step, iteration, transfer
and graph node, each with the budget of the action that starts next (`Run.commit`'s
`take`; only an action with no boundary before it commits its budget alone). The
last result of a run that completes is in its completed checkpoint. It returns an
`EngineEnd`; the coordinator turns it into the outcome.

This module holds sequential, parallel, loop and transfer workflows; graphs are
`engine_graph`. Budgets: every step, branch, member, loop body (and graph node,
router, loop node, fork branch) takes one step, committed before it runs; a parallel
workflow takes one per branch up front; every accepted transfer takes one transfer.

A run that does not complete ends with its last committed checkpoint (`Run.committed`),
never with a delta merged after it: nothing checked after a merge can leave that delta
in a failed, timed-out or cancelled checkpoint while its cursor still points before it.
A completion whose last delta is not committed yet (the last step's, a `Stop`, a
parallel merge, a transfer member's result, an exhausted loop's) commits it as a
finished cursor only when the output schema refuses the result, so that failed
checkpoint holds the delta and a resume runs nothing again.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from msgspec import UNSET

from adk_actors.events import Event, EventActions
from adk_actors.workflows.actions import Failure, TimedOut
from adk_actors.workflows.checkpoint import (
    Cursor,
    LoopCursor,
    ParallelCursor,
    SequentialCursor,
    TransferCursor,
    completed_checkpoint,
)
from adk_actors.workflows.engine_graph import run_graph
from adk_actors.workflows.engine_state import (
    Branches,
    Ended,
    EngineEnd,
    EngineSetup,
    MergeFailed,
    Run,
    concurrency_limit,
    failed,
    merge_branches,
    nested_details,
    refused,
    settled,
    timed_out,
)
from adk_actors.workflows.errors import action_chosen_id, exception_reason, safe_id, tagged
from adk_actors.workflows.nested import NestedPause
from adk_actors.workflows.spec import (
    ActionStep,
    LoopData,
    ParallelData,
    SequentialData,
    TransferData,
    schema_failure,
)
from providers import content

__all__ = ["EngineEnd", "EngineSetup", "run_engine"]


async def run_engine(setup: EngineSetup) -> EngineEnd:
    """Run the workflow from `setup.checkpoint` to its end (the engine task's body)."""
    run = Run(setup)
    try:
        if run.expired():  # a past deadline starts nothing
            raise timed_out()
        end = await _KINDS[run.workflow.kind](run)
    except Ended as ended:
        end = ended
    except Exception as error:
        end = failed(("engine_exception", exception_reason("adk_workflow_engine", "run", error)))
    if end.kind == "completed":
        value = run.output if run.output is not UNSET else run.state
        problem = schema_failure(run.workflow.output_validator, value)
        if problem is None:
            return EngineEnd(
                "completed", run.state, completed_checkpoint(run.checkpoint(), run.state)
            )
        end = await _refused_output(run, end, problem)
    return EngineEnd(end.kind, end.value, run.committed)


async def _refused_output(run: Run, end: Ended, problem: tuple[Any, ...]) -> Ended:
    """The output schema refused a completed run: commit its finished cursor (so the
    failed checkpoint holds the last delta and a resume runs nothing again), then fail."""
    try:
        if end.end_cursor is not None:
            await run.commit(end.end_cursor)
    except Ended as ended:  # the run ended meanwhile: the coordinator's terminal stands
        return ended
    return failed(("output_schema_validation_failed", schema_reason(problem)))


def schema_reason(problem: tuple[Any, ...]) -> tuple[Any, ...]:
    """A schema failure with its path as a list (a JSON array in any record)."""
    tag, path, constraint = problem
    return (tag, list(path), constraint)


def completed(end_cursor: Cursor | None = None) -> Ended:
    """The run completed; `end_cursor` commits a last delta that is not committed yet."""
    return Ended("completed", end_cursor=end_cursor)


# -- sequential ------------------------------------------------------------------------------------


async def _sequential(run: Run) -> Ended:
    data = run.workflow.data
    assert isinstance(data, SequentialData)
    cursor = run.cursor
    assert isinstance(cursor, SequentialCursor)
    index = cursor.next_index
    if cursor.phase == "awaiting_resume":
        step = data.steps[index]
        if cursor.resume_input is UNSET or cursor.nested_checkpoint is UNSET:
            raise failed(("resume_input_required", safe_id(step.id)))
        resume = (cursor.nested_checkpoint, cursor.resume_input)
        result = await run.act(step.id, step.action, step.policy, run.last_output, resume)
        index = await _sequential_result(run, index, step.id, result)
    while index < len(data.steps):
        step = data.steps[index]
        await run.consume_step()  # taken with the previous step's result, if there was one
        result = await run.act(step.id, step.action, step.policy, run.last_output)
        index = await _sequential_result(run, index, step.id, result)
    return completed()


async def _sequential_result(run: Run, index: int, step_id: str, result: Any) -> int:
    """Commit one step's result with the next step's budget (one commit); the next
    index. The last step's result is the run's completion (raised, its finished cursor
    committed only if the output schema refuses it)."""
    result = settled(result, "step_failed", step_id)
    if isinstance(result, NestedPause):
        details = nested_details(result.details, step_id=step_id)
        cursor = SequentialCursor(
            next_index=index,
            phase="awaiting_resume",
            pause=details,
            nested_checkpoint=result.checkpoint,
        )
        await run.commit(cursor)
        raise Ended("paused", details)
    control = result.control
    if control.kind not in ("ok", "output", "stop"):
        raise failed(tagged("step_failed", step_id, refused(control)))
    run.merge(control.delta)
    if control.kind != "ok":
        run.set_output(control.value)
    data = run.workflow.data
    assert isinstance(data, SequentialData)
    last = len(data.steps)
    if control.kind == "stop" or index + 1 == last:  # no later step runs: the run ends
        raise completed(SequentialCursor(next_index=last))
    await run.commit(SequentialCursor(next_index=index + 1), take=1)
    return index + 1


# -- parallel --------------------------------------------------------------------------------------


async def _parallel(run: Run) -> Ended:
    data = run.workflow.data
    assert isinstance(data, ParallelData)
    branches = data.branches
    if isinstance(run.cursor, ParallelCursor) and run.cursor.status == "merged":
        return completed()  # merged and committed: only the output check was left
    await run.consume_step(len(branches))
    limit = min(concurrency_limit(data.max_concurrency, run.runtime.max_concurrency), len(branches))
    results: dict[int, tuple[Any, dict[str, Any]]] = {}
    pending = deque(enumerate(branches))
    async with Branches(limit) as pool:
        while pending or pool.active:
            while pending and not pool.full():
                index, branch = pending.popleft()
                pool.start(index, run.act(branch.id, branch.action, branch.policy, None))
            index, result = await pool.next()
            branch_id = branches[index].id
            result = settled(result, "branch_failed", branch_id)
            if isinstance(result, NestedPause):
                raise failed(tagged("branch_failed", branch_id, ("invalid_control", "pause")))
            control = result.control
            if control.kind not in ("ok", "output", "stop"):
                raise failed(tagged("branch_failed", branch_id, refused(control)))
            output = control.value if control.kind != "ok" else None
            results[index] = (output, dict(control.delta))
    ordered = [(branch.id, results[i][1]) for i, branch in enumerate(branches)]
    try:
        delta = await merge_branches(run, data.merge, ordered)
    except MergeFailed as conflict:
        raise failed(conflict.reason) from None
    run.merge(delta)
    run.set_output({branch.id: results[i][0] for i, branch in enumerate(branches)})
    return completed(ParallelCursor(status="merged"))


# -- loop ------------------------------------------------------------------------------------------

_DONE = (True, "done")
_CONTINUE = (False, "continue")


async def _loop(run: Run) -> Ended:
    """Each iteration: the body, its result committed (``phase "until"``), then `until`,
    then the next iteration committed. A resume at ``until`` asks `until` again; the
    body of a committed iteration never runs again."""
    data = run.workflow.data
    assert isinstance(data, LoopData)
    cursor = run.cursor
    assert isinstance(cursor, LoopCursor)
    if cursor.phase == "done":
        return completed()  # the body stopped the loop: only the output check was left
    iteration = cursor.iteration
    decide = cursor.phase == "until"  # the body's result is committed: `until` is next
    body = data.body
    while iteration < data.max_iterations:  # (at ``until``, iteration < max_iterations)
        if not decide:
            if await _loop_body(run, body) == "stop":
                return completed(LoopCursor(iteration=iteration, phase="done"))
            await run.commit(LoopCursor(iteration=iteration, phase="until"))
        decide = False
        kind, value = await run.call("loop-until", data.until)
        if kind == "deadline":
            raise timed_out()
        if kind == "failure":
            raise failed(("loop_predicate_failed", value))
        if _is(value, _DONE):
            break
        if not _is(value, _CONTINUE):
            raise failed("invalid_loop_predicate_result")
        iteration += 1
        if iteration >= data.max_iterations:  # exhausted: the loop completes
            return completed(LoopCursor(iteration=iteration))
        await run.commit(LoopCursor(iteration=iteration), take=1)  # with the next body's step
    return completed()


async def _loop_body(run: Run, body: ActionStep) -> str:
    """Run the loop body once and merge its result (not yet committed); its kind."""
    await run.consume_step()
    result = await run.act(body.id, body.action, body.policy, None)
    if isinstance(result, TimedOut):
        raise timed_out()
    if isinstance(result, Failure):
        raise failed(("loop_body_failed", result.reason))
    if isinstance(result, NestedPause):
        raise failed(("loop_body_failed", ("invalid_control", "pause")))
    control = result.control
    if control.kind not in ("ok", "output", "stop"):
        raise failed(("loop_body_failed", refused(control)))
    run.merge(control.delta)
    if control.kind != "ok":
        run.set_output(control.value)
    return control.kind


def _is(value: Any, choices: tuple[Any, ...]) -> bool:
    return any(
        value is choice if isinstance(choice, bool) else value == choice for choice in choices
    )


# -- transfer --------------------------------------------------------------------------------------


async def _transfer(run: Run) -> Ended:
    data = run.workflow.data
    assert isinstance(data, TransferData)
    cursor = run.cursor
    assert isinstance(cursor, TransferCursor)
    if cursor.phase == "done":
        return completed()  # the member's result is committed: only the output check was left
    member_id, input_value = cursor.member, cursor.input
    used = 0 if cursor.transfers_used is UNSET else cursor.transfers_used
    while True:
        member = data.members[member_id]
        await run.consume_step()
        result = await run.act(member_id, member.action, member.policy, input_value)
        result = settled(result, "member_failed", member_id)
        if isinstance(result, NestedPause):
            raise failed(tagged("member_failed", member_id, ("invalid_control", "pause")))
        control = result.control
        if control.kind in ("ok", "output", "stop"):  # a member has no implicit successor
            run.merge(control.delta)
            if control.kind != "ok":
                run.set_output(control.value)
            done = TransferCursor(
                member=member_id, input=input_value, transfers_used=used, phase="done"
            )
            return completed(done)
        if control.kind != "transfer":
            raise failed(tagged("member_failed", member_id, refused(control)))
        target = control.target
        if target is None or target not in data.members:
            raise failed(("unknown_transfer_target", action_chosen_id(target)))
        if run.transfers <= 0:  # refused before the member's delta is merged
            raise failed(("budget_exhausted", "transfers"))
        run.merge(control.delta)
        run.transfers -= 1
        used += 1
        # one commit: the member's delta, the spent transfer, the target and its step
        # together, so a resume never runs the member that handed over again
        cursor = TransferCursor(member=target, input=control.value, transfers_used=used)
        await run.commit(cursor, take=1)
        run.emit(_transfer_event(run, member_id, target, used))
        member_id, input_value = target, control.value


def _transfer_event(run: Run, source: str, target: str, index: int) -> Event:
    """``transfer_to_agent`` with the handoff's index (the first of the run is 1; a
    resumed run goes on counting from its checkpoint's ``transfers_used``)."""
    text = content.from_text(f"Transfer from {source} to {target}", role="model")
    actions = EventActions(transfer_to_agent=target, transfer_index=index)
    return Event.new(source, run.invocation_id or run.workflow.id, text, actions=actions)


_KINDS = {
    "sequential": _sequential,
    "parallel": _parallel,
    "loop": _loop,
    "transfer": _transfer,
    "graph": run_graph,
}
