"""The graph interpreter: action-like nodes, edges and routes, branch/dynamic routers,
loop nodes, fork/join, pauses and their resumes.

Routing from a node whose edge has a route callback is two-phase: the node's delta
(and output) is committed with a ``routing`` cursor *before* the route runs, so a
route that blocks, crashes or is cut off resumes by routing again, never by running
the node again. A successor known without running anything (a plain edge, a `Goto`
target, a router's choice) needs no routing boundary: the node's delta is committed
with the successor's entry. A successor is committed as it starts (`_enter`):
``ready`` with the node's output as its input and the step it takes, or a fork's
``fork`` cursor with the steps of its first branches; the graph's end is the run's
completion (the last delta committed only if the output schema refuses it). A fork
commits each branch's result as it comes (``results``, with the step of the branch
that starts next), so a resume skips finished branches; a branch without a committed
result runs again. The last branch's result is committed with the merge, at the
join's entry (if a built-in merge fails, it is committed alone first; a custom merge
runs only once every result is committed). A pause commits the node's delta, then
an ``awaiting_resume`` cursor; its resume input goes to the node's router (a fork
branch: it becomes the branch's output; a nested workflow: the child resumes with it).
Routes and routers may only name nodes the compiled graph holds (a router only its
``targets``): nothing at run time can add a node, a callable or a module.
"""

from __future__ import annotations

from typing import Any, NoReturn

from msgspec import UNSET

from adk_actors.workflows.checkpoint import ForkResult, GraphCursor
from adk_actors.workflows.engine_state import (
    Branches,
    Ended,
    MergeFailed,
    Run,
    concurrency_limit,
    failed,
    merge_branches,
    nested_details,
    refused,
    settled,
)
from adk_actors.workflows.errors import safe_id, tagged
from adk_actors.workflows.nested import NestedPause
from adk_actors.workflows.results import Control, Goto, normalize
from adk_actors.workflows.spec import (
    END,
    ActionNode,
    ForkNode,
    GraphData,
    LoopNode,
    RouterNode,
)

END_NAMES = ("end", END)
"""How a route or router names the graph's end."""


async def run_graph(run: Run) -> Ended:
    """Run the graph from its cursor until it ends."""
    node_id = await _resume_point(run)
    while node_id is not None:
        node_id = await _run_node(run, node_id)
    return Ended("completed")


def _data(run: Run) -> GraphData:
    data = run.workflow.data
    assert isinstance(data, GraphData)
    return data


def _cursor(run: Run) -> GraphCursor:
    cursor = run.cursor
    assert isinstance(cursor, GraphCursor)
    return cursor


def _input(run: Run) -> Any:
    value = _cursor(run).input
    return None if value is UNSET else value


def _cursor_at(run: Run, node: str, phase: str, **fields: Any) -> GraphCursor:
    return GraphCursor(node=node, phase=phase, visits=dict(_cursor(run).visits), **fields)  # type: ignore[arg-type]


async def _resume_point(run: Run) -> str | None:
    """The node to run first, after finishing whatever the cursor left half done."""
    cursor = _cursor(run)
    if cursor.phase == "routing":
        return await _route_committed(run)
    if cursor.phase == "awaiting_resume":
        return await _resume(run)
    return cursor.node


async def _run_node(run: Run, node_id: str) -> str | None:
    node = _data(run).nodes[node_id]
    if isinstance(node, ForkNode):
        return await _fork(run, node)
    if isinstance(node, RouterNode):
        return await _router(run, node)
    if isinstance(node, LoopNode):
        return await _loop_node(run, node)
    return await _action_node(run, node)


# -- action nodes and routing ------------------------------------------------------------------


async def _action_node(run: Run, node: ActionNode) -> str | None:
    await run.consume_step()
    if node.action is None:  # a join without an action passes its input on
        return await _after_node(run, node.id, None, _input(run), {})
    result = await run.act(node.id, node.action, node.policy, _input(run))
    result = settled(result, "node_failed", node.id)
    if isinstance(result, NestedPause):
        return await _pause_nested(run, node.id, result)
    control = result.control
    match control.kind:
        case "ok":
            return await _after_node(run, node.id, None, None, control.delta)
        case "output":
            run.set_output(control.value)
            return await _after_node(run, node.id, None, control.value, control.delta)
        case "goto":  # checked before anything commits: a failed run stays resumable
            if control.target not in END_NAMES and control.target not in _data(run).nodes:
                raise failed(tagged("route_failed", node.id, "invalid_route"))
            return await _after_node(run, node.id, control.target, None, control.delta)
        case "stop":  # the run ends here; its delta is committed only if the output is refused
            run.merge(control.delta)
            run.set_output(control.value)
            end = _cursor_at(run, node.id, "routing", node_output=control.value, route_target=END)
            raise Ended("completed", end_cursor=end)
        case "pause":
            return await _pause_node(run, node.id, control)
    raise failed(tagged("node_failed", node.id, refused(control)))


async def _after_node(
    run: Run, node_id: str, target: str | None, node_output: Any, delta: Any
) -> str | None:
    """Commit a node's delta and go on. A successor known now (`target`, else a plain
    edge) is entered at once, the delta in the same commit; the end completes the run
    (the delta committed only if the output schema refuses it, at the ``routing``
    cursor). A route callback's successor is two-phase: the delta and a ``routing``
    cursor committed first, then the route runs."""
    run.merge(delta)
    fields: dict[str, Any] = {"node_output": node_output}
    if target is not None:
        fields["route_target"] = END if target in END_NAMES else target
    routing = _cursor_at(run, node_id, "routing", **fields)
    successor = target if target is not None else _plain_edge(run, node_id)
    if successor in END_NAMES:
        raise Ended("completed", end_cursor=routing)
    if successor is not None and successor in _data(run).nodes:
        return await _enter(run, successor, node_output)
    await run.commit(routing)
    return await _route_committed(run)


def _plain_edge(run: Run, node_id: str) -> str | None:
    """The target of `node_id`'s edge when it has no route callback (else None)."""
    edge = _data(run).edges.get(node_id)
    return None if edge is None or edge.route is not None else edge.target


async def _enter(
    run: Run, node_id: str, input_value: Any, visits: dict[str, int] | None = None
) -> str:
    """Commit `node_id` as the node that runs next, with `input_value` as its input,
    together with the steps it takes as it starts: ``ready`` and one step; a fork, its
    ``fork`` cursor (no branch result yet) and its first branches' steps. Returns
    `node_id`."""
    node = _data(run).nodes[node_id]
    seen = dict(_cursor(run).visits) if visits is None else visits
    if isinstance(node, ForkNode):
        cursor = GraphCursor(node=node_id, phase="fork", visits=seen, input=input_value, results={})
        await run.commit(cursor, take=_first_wave(run, node, {}))
    else:
        await run.commit(
            GraphCursor(node=node_id, phase="ready", visits=seen, input=input_value), take=1
        )
    return node_id


async def _route_committed(run: Run) -> str | None:
    cursor = _cursor(run)
    node_output = None if cursor.node_output is UNSET else cursor.node_output
    target = None if cursor.route_target is UNSET else cursor.route_target
    return await _route(run, cursor.node, target, node_output)


async def _route(run: Run, node_id: str, target: str | None, node_output: Any) -> str | None:
    """The successor of `node_id` (its explicit `target`, else its edge), committed as
    ``ready`` with `node_output` as its input; None at the end."""
    data = _data(run)
    if target is None:
        edge = data.edges[node_id]
        if edge.route is None:
            target = edge.target
        else:
            target = await run.decide(node_id, edge.route, node_output, "route_failed")
    if not isinstance(target, str):
        raise failed(tagged("route_failed", node_id, "invalid_route"))
    if target in END_NAMES:
        return None
    if target not in data.nodes:
        raise failed(tagged("route_failed", node_id, "invalid_route"))
    return await _enter(run, target, node_output)


# -- routers and loop nodes --------------------------------------------------------------------


async def _router(run: Run, node: RouterNode) -> str | None:
    """A branch/dynamic node: `choose` picks one of its targets (and may add a delta)."""
    await run.consume_step()
    input_value = _input(run)
    value = await run.decide(node.id, node.choose, input_value, "route_failed")
    delta: Any = {}
    if isinstance(value, Goto):
        control = _checked_goto(value)
        if control is None:
            raise failed(tagged("route_failed", node.id, "invalid_route"))
        value, delta = control
    if not isinstance(value, str):
        raise failed(tagged("route_failed", node.id, "invalid_route"))
    target = END if value in END_NAMES else value
    if target not in node.targets:
        raise failed(tagged("route_failed", node.id, "target_not_allowed"))
    return await _after_node(run, node.id, target, input_value, delta)


def _checked_goto(goto: Goto) -> tuple[str, dict[str, Any]] | None:
    control = normalize(goto)
    if control.kind != "goto" or control.target is None:
        return None
    return control.target, dict(control.delta)


async def _loop_node(run: Run, node: LoopNode) -> str | None:
    """`decide` true: run `body` (at most `max_iterations` times), else go to `done`."""
    await run.consume_step()
    input_value = _input(run)
    value = await run.decide(node.id, node.decide, input_value, "graph_loop_failed")
    visits = dict(_cursor(run).visits)
    if value is True or value == "continue":
        count = visits.get(node.id, 0)
        if count >= node.max_iterations:
            target = node.done
        else:
            visits[node.id] = count + 1
            target = node.body
    elif value is False or value == "done":
        target = node.done
    else:
        raise failed(tagged("graph_loop_failed", node.id, "invalid_predicate_result"))
    if target in END_NAMES:
        return None
    return await _enter(run, target, input_value, visits)


# -- pauses --------------------------------------------------------------------------------------


def _pause_details(control: Control, **ids: Any) -> dict[str, Any]:
    return {"reason": control.reason, "details": control.value, **ids}


async def _paused(run: Run, node_id: str, details: dict[str, Any], **fields: Any) -> NoReturn:
    """Commit an ``awaiting_resume`` cursor at `node_id` (its input kept, `fields` saying
    how to resume), then end the run paused with `details`."""
    cursor = _cursor_at(
        run, node_id, "awaiting_resume", input=_cursor(run).input, pause=details, **fields
    )
    await run.commit(cursor)
    raise Ended("paused", details)


async def _pause_node(run: Run, node_id: str, control: Control) -> NoReturn:
    run.merge(control.delta)  # the node's delta is committed first, with the pause
    details = _pause_details(control, node_id=node_id)
    await _paused(run, node_id, details, resume_kind="node")


async def _pause_nested(run: Run, node_id: str, paused: NestedPause) -> NoReturn:
    details = nested_details(paused.details, node_id=node_id)
    await _paused(
        run,
        node_id,
        details,
        resume_kind="nested_workflow",
        nested_checkpoint=paused.checkpoint,
    )


async def _resume(run: Run) -> str | None:
    """Go on from a pause with the resume input stored in the cursor."""
    cursor = _cursor(run)
    node_id = cursor.node
    if cursor.resume_input is UNSET:
        raise failed(("resume_input_required", safe_id(node_id)))
    resume_input = cursor.resume_input
    kind = "node" if cursor.resume_kind is UNSET else cursor.resume_kind
    if kind == "node":  # the input is the node's output: its router decides
        return await _route(run, node_id, None, resume_input)
    node = _data(run).nodes[node_id]
    if kind == "nested_workflow":
        assert isinstance(node, ActionNode) and cursor.nested_checkpoint is not UNSET
        resume = (cursor.nested_checkpoint, resume_input)
        result = await run.act(node_id, node.action, node.policy, _input(run), resume)
        result = settled(result, "node_failed", node_id)
        if isinstance(result, NestedPause):
            return await _pause_nested(run, node_id, result)
        control = result.control
        if control.kind != "output":
            raise failed(tagged("node_failed", node_id, refused(control)))
        run.set_output(control.value)
        return await _after_node(run, node_id, None, control.value, control.delta)
    assert isinstance(node, ForkNode)
    results = dict(cursor.fork_results) if cursor.fork_results is not UNSET else {}
    branch = cursor.paused_branch
    assert isinstance(branch, str)
    if kind == "fork_branch":
        delta = cursor.paused_delta if cursor.paused_delta is not UNSET else {}
        results[branch] = ForkResult(output=resume_input, delta=delta)
    else:  # fork_nested_workflow: the child resumes; its end is the branch's result
        branch_node = _data(run).nodes[branch]
        assert isinstance(branch_node, ActionNode) and cursor.nested_checkpoint is not UNSET
        resume = (cursor.nested_checkpoint, resume_input)
        result = await run.act(branch, branch_node.action, branch_node.policy, _input(run), resume)
        result = settled(result, "fork_branch_failed", branch)
        if isinstance(result, NestedPause):
            await _pause_fork_nested(run, node, branch, result, results)
        control = result.control
        if control.kind != "output":
            raise failed(tagged("fork_branch_failed", branch, refused(control)))
        results[branch] = ForkResult(output=control.value, delta=dict(control.delta))
    cursor = _cursor_at(run, node_id, "fork", input=_cursor(run).input, results=results)
    await run.commit(cursor, take=_first_wave(run, node, results))
    return node_id


# -- fork / join ---------------------------------------------------------------------------------


def _fork_limit(run: Run, node: ForkNode) -> int:
    return max(1, concurrency_limit(node.max_concurrency, run.runtime.max_concurrency))


def _first_wave(run: Run, node: ForkNode, results: Any) -> int:
    """How many branches of `node` start at once when it runs with `results` committed."""
    return min(_fork_limit(run, node), sum(1 for b in node.branches if b not in results))


async def _fork(run: Run, node: ForkNode) -> str | None:
    """Run the branches not yet committed, at most `max_concurrency` at once, each
    result committed as it comes (with the step of the branch that starts next); then
    merge in declared order and go to the join. The branches that start together take
    their steps in one commit (all of them, or none start: ``budget_exhausted``)."""
    cursor = _cursor(run)
    input_value = _input(run)
    if cursor.phase == "fork" and cursor.node == node.id and cursor.results is not UNSET:
        results = dict(cursor.results)
    else:
        results = {}
        entry = _cursor_at(run, node.id, "fork", input=cursor.input, results={})
        await run.commit(entry, take=_first_wave(run, node, results))
    pending = [(i, branch) for i, branch in enumerate(node.branches) if branch not in results]
    nodes = _data(run).nodes
    committed = True  # is every result in `results` committed?
    async with Branches(_fork_limit(run, node)) as pool:
        while pending or pool.active:
            if pending and not pool.full():
                wave, pending = pending[: pool.free], pending[pool.free :]
                await run.consume_step(len(wave))  # taken by the last commit, if it could
                for index, branch in wave:
                    branch_node = nodes[branch]
                    assert isinstance(branch_node, ActionNode) and branch_node.action is not None
                    pool.start(
                        (index, branch),
                        run.act(branch, branch_node.action, branch_node.policy, input_value),
                    )
            (_index, branch), result = await pool.next()
            result = settled(result, "fork_branch_failed", branch)
            if isinstance(result, NestedPause):
                await pool.close()  # uncommitted siblings stop; they run again on resume
                await _pause_fork_nested(run, node, branch, result, results)
            control = result.control
            if control.kind == "pause":
                await pool.close()
                await _pause_fork_branch(run, node, branch, control, results)
            if control.kind not in ("ok", "output", "stop"):
                raise failed(tagged("fork_branch_failed", branch, refused(control)))
            output = control.value if control.kind != "ok" else None
            results[branch] = ForkResult(output=output, delta=dict(control.delta))
            if not pending and not pool.active and node.merge.fn is None:
                committed = False  # the last result: committed with the merge, at the join
                continue
            take = min(pool.free, len(pending))  # the branches that start next
            await run.commit(_fork_cursor(run, node, results), take=take)
    return await _join(run, node, results, committed)


def _fork_cursor(run: Run, node: ForkNode, results: dict[str, ForkResult]) -> GraphCursor:
    return _cursor_at(run, node.id, "fork", input=_cursor(run).input, results=dict(results))


async def _join(run: Run, node: ForkNode, results: dict[str, ForkResult], committed: bool) -> str:
    """Merge the branches' deltas in declared order and enter the join with their
    outputs. A result not `committed` yet (the last branch's, when the merge is a
    built-in one: nothing runs before the join's entry commits it) is committed alone
    first if the merge fails, so the failed run keeps every finished branch."""
    ordered = [(branch, results[branch].delta) for branch in node.branches]
    try:
        delta = await merge_branches(run, node.merge, ordered)
        run.merge(delta)
    except (MergeFailed, Ended) as error:
        if not committed:
            await run.commit(_fork_cursor(run, node, results))
        if isinstance(error, MergeFailed):
            raise failed(tagged("fork_merge_failed", node.id, error.reason)) from None
        raise
    outputs = {branch: results[branch].output for branch in node.branches}
    run.set_output(outputs)
    return await _enter(run, node.join, outputs)


async def _pause_fork_branch(
    run: Run, node: ForkNode, branch: str, control: Control, results: dict[str, ForkResult]
) -> NoReturn:
    details = _pause_details(control, node_id=branch, fork_id=node.id)
    await _paused(
        run,
        node.id,
        details,
        resume_kind="fork_branch",
        fork_results=dict(results),
        paused_branch=branch,
        paused_delta=dict(control.delta),
    )


async def _pause_fork_nested(
    run: Run, node: ForkNode, branch: str, paused: NestedPause, results: dict[str, ForkResult]
) -> NoReturn:
    details = nested_details(paused.details, node_id=branch, fork_id=node.id)
    await _paused(
        run,
        node.id,
        details,
        resume_kind="fork_nested_workflow",
        fork_results=dict(results),
        paused_branch=branch,
        nested_checkpoint=paused.checkpoint,
    )
