"""`compile_workflow`: a spec dict checked and compiled once into a `CompiledWorkflow`.

Checks run in the reference's order (header, the kind's body, ``max_steps``, the
schemas) and the first failure raises `WorkflowSpecError` naming its path: keys, and
0-based list indices (``("steps", 1, "id")``). Two deviations from the reference's
paths, so that every path names a key that is in the spec: a policy failure names the
``timeout`` or ``retry`` key (the reference says ``policy``), and a typed graph node's
bad part names its own key (``agent``, ``prompt``, ``tool``, ``workflow``, ...). Keys a
spec does not know are refused (``unknown_key``), so a typo never silently drops a
limit. Input and output JSON Schemas are compiled here, once (`tools.schema`: nothing
is ever fetched).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from adk_actors.tools.schema import InvalidSchema, compile_schema
from adk_actors.workflows.compile_graph import compile_graph
from adk_actors.workflows.compile_parts import (
    CONTEXT_ARITIES,
    bounded_int,
    callback,
    check_keys,
    compile_action,
    compile_merge,
    compile_policy,
    named_actions,
    valid_id,
)
from adk_actors.workflows.errors import Path, WorkflowSpecError
from adk_actors.workflows.spec import (
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TRANSFERS,
    KINDS,
    MAX_CONCURRENCY,
    MAX_ITEMS,
    MAX_ITERATIONS,
    MAX_STEPS,
    MAX_TRANSFERS,
    ActionStep,
    CompiledWorkflow,
    KindData,
    LoopData,
    ParallelData,
    SequentialData,
    TransferData,
    Validator,
)

_HEADER_KEYS = frozenset({"version", "id", "kind", "max_steps", "input_schema", "output_schema"})
_KIND_KEYS: Mapping[str, frozenset[str]] = {
    "sequential": frozenset({"steps"}),
    "parallel": frozenset({"branches", "merge", "max_concurrency"}),
    "loop": frozenset({"body", "until", "max_iterations"}),
    "transfer": frozenset({"entry", "members", "max_transfers"}),
    "graph": frozenset({"entry", "nodes", "edges"}),
}
_MEMBER_KEYS = frozenset({"run", "timeout", "retry"})


def compile_workflow(spec: Any) -> CompiledWorkflow:
    """The compiled form of `spec`, or `WorkflowSpecError` naming the bad part's path."""
    if not isinstance(spec, Mapping):
        raise WorkflowSpecError((), "expected_map", "a workflow spec is a dict")
    version = spec.get("version", 1)
    if type(version) is not int or version != 1:
        raise WorkflowSpecError(("version",), "unsupported_version", "only version 1 exists")
    workflow_id = spec.get("id")
    if not valid_id(workflow_id):
        raise WorkflowSpecError(("id",), "expected_nonempty_utf8_binary")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise WorkflowSpecError(("kind",), "unsupported_kind", f"kinds: {', '.join(KINDS)}")
    check_keys(spec, _HEADER_KEYS | _KIND_KEYS[kind], ())
    data, max_transfers = _compile_kind(kind, spec)
    max_steps = bounded_int(spec, "max_steps", (), DEFAULT_MAX_STEPS, 1, MAX_STEPS)
    return CompiledWorkflow(
        version=version,
        id=workflow_id,
        kind=kind,
        data=data,
        max_steps=max_steps,
        max_transfers=max_transfers,
        input_validator=_schema(spec, "input_schema"),
        output_validator=_schema(spec, "output_schema"),
    )


def _compile_kind(kind: str, spec: Mapping[str, Any]) -> tuple[KindData, int]:
    """The kind's data and its transfer budget (0 unless a transfer workflow)."""
    if kind == "sequential":
        return SequentialData(steps=named_actions(spec.get("steps"), "steps")), 0
    if kind == "parallel":
        return _parallel(spec), 0
    if kind == "loop":
        return _loop(spec), 0
    if kind == "transfer":
        return _transfer(spec)
    return compile_graph(spec), 0


def _parallel(spec: Mapping[str, Any]) -> ParallelData:
    branches = named_actions(spec.get("branches"), "branches")
    merge = compile_merge(spec.get("merge", "reject_conflicts"), ("merge",))
    default = min(len(branches), MAX_CONCURRENCY)
    limit = bounded_int(spec, "max_concurrency", (), default, 1, MAX_CONCURRENCY)
    return ParallelData(branches=branches, merge=merge, max_concurrency=limit)


def _loop(spec: Mapping[str, Any]) -> LoopData:
    body = compile_action(spec.get("body"), ("body",))
    until = callback(spec.get("until"), CONTEXT_ARITIES)
    if until is None:
        raise WorkflowSpecError(("until",), "invalid_predicate", "until is fn(state[, context])")
    if "max_iterations" not in spec:
        raise WorkflowSpecError(("max_iterations",), "expected_non_negative_integer")
    iterations = bounded_int(spec, "max_iterations", (), 0, 0, MAX_ITERATIONS)
    body_step = ActionStep(id="loop-body", action=body)
    return LoopData(body=body_step, until=until, max_iterations=iterations)


def _transfer(spec: Mapping[str, Any]) -> tuple[TransferData, int]:
    members = spec.get("members")
    if not isinstance(members, Mapping):
        raise WorkflowSpecError(("members",), "expected_map")
    if len(members) > MAX_ITEMS:
        raise WorkflowSpecError(("members",), ("exceeds_maximum", MAX_ITEMS))
    compiled: dict[str, ActionStep] = {}
    for name, member in members.items():
        if not isinstance(name, str) or not isinstance(member, Mapping):
            raise WorkflowSpecError(("members",), "invalid_member")
        if not valid_id(name):
            raise WorkflowSpecError(("members", name), "invalid_member_id")
        path: Path = ("members", name)
        check_keys(member, _MEMBER_KEYS, path)
        action = compile_action(member.get("run"), (*path, "run"))
        compiled[name] = ActionStep(id=name, action=action, policy=compile_policy(member, path))
    budget = bounded_int(spec, "max_transfers", (), DEFAULT_MAX_TRANSFERS, 0, MAX_TRANSFERS)
    if not compiled:
        raise WorkflowSpecError(("members",), "empty")
    entry = spec.get("entry")
    if not isinstance(entry, str) or entry not in compiled:
        raise WorkflowSpecError(("entry",), "unknown_transfer_entry")
    data = TransferData(
        entry=entry, members=MappingProxyType(compiled), member_order=tuple(compiled)
    )
    return data, budget


def _schema(spec: Mapping[str, Any], key: str) -> Validator | None:
    schema = spec.get(key)
    if schema is None:
        return None
    try:
        return compile_schema(schema, allow_bool=True)
    except InvalidSchema as refused:
        raise WorkflowSpecError((key,), ("invalid_json_schema", refused.why)) from None
