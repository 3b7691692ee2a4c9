"""`compile_workflow`: every refusal names its path and reason; defaults and ceilings.

Paths are 0-based (``("steps", 1, "id")`` is the second step); a policy failure names
the ``timeout``/``retry`` key where the reference says ``policy``; topology failures
name the node by id, as the reference does. Graph nodes, edges and topology are in
test_compile_graph.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from adk_actors.workflows import spec as S
from adk_actors.workflows.compile import compile_workflow
from adk_actors.workflows.results import Agent, Route, ToolCall
from tests.adk_actors.workflows._specs import (
    fork_graph,
    graph,
    lookup,
    needs_three,
    ok,
    refusal,
    seq,
    step,
    with_context,
)

# -- the reference's compile cases -----------------------------------------------------------------


def test_duplicate_step_id_names_the_second_step() -> None:
    """Follows adk_workflow_test: compile_validation_case (duplicate ids)."""
    spec = seq([{"id": "same", "run": ok}, {"id": "same", "run": ok}])
    assert refusal(spec) == (("steps", 1, "id"), ("duplicate_id", "same"))


def test_graph_without_edges_is_refused() -> None:
    """Follows adk_workflow_test: compile_validation_case (edges {})."""
    spec = graph([{"id": "a", "run": ok}], {})
    assert refusal(spec) == (("edges",), "every_node_requires_explicit_edge")


def test_zero_max_steps_is_refused() -> None:
    """Follows adk_workflow_test: compile_validation_case (max_steps 0)."""
    assert refusal(seq(max_steps=0)) == (("max_steps",), "expected_positive_integer")


@pytest.mark.parametrize("name", ["bad-name", "user", "User", "", 7, None, "x" * 129])
def test_invalid_agent_names_are_refused_as_such(name: Any) -> None:
    """Follows adk_workflow_test: compile_validation_case (agent bad-name, user): an
    `Agent` with a bad name is ``invalid_agent_name`` at its ``run`` (a bad prompt or
    decide stays ``invalid_action``)."""
    spec = seq([{"id": "agent", "run": Agent(name, "work")}])
    assert refusal(spec) == (("steps", 0, "run"), "invalid_agent_name")
    spec = seq([{"id": "agent", "run": Agent("helper", 5)}])
    assert refusal(spec) == (("steps", 0, "run"), "invalid_action")


def test_reserved_agent_name_in_an_agent_node_names_its_key() -> None:
    """Follows adk_workflow_test: compile_validation_case (graph agent `user`); the path
    names the node's ``agent`` key (the reference says ``run``)."""
    node = {"id": "agent", "type": "agent", "agent": "user", "prompt": "work"}
    assert refusal(graph([node], {"agent": "end"}, entry="agent")) == (
        ("nodes", 0, "agent"),
        "invalid_agent_name",
    )


def test_unknown_dynamic_target_is_refused_at_the_node_position() -> None:
    """Follows adk_workflow_graph_test: invalid_graph_topologies_are_rejected (1/4);
    topology errors name the node by its position, as every other node error does."""
    node = {"id": "choose", "type": "branch", "choose": lambda s: "missing", "targets": ["missing"]}
    first = {"id": "first", "run": lambda s: {}}
    assert refusal(graph([first, node], {"first": "end"}, entry="choose")) == (
        ("nodes", 1, "targets"),
        "unknown_graph_target",
    )


def test_fork_branch_routed_to_the_end_is_an_invalid_topology() -> None:
    """Follows adk_workflow_graph_test: invalid_graph_topologies_are_rejected (2/4)."""
    spec = graph(
        [
            {"id": "fork", "type": "fork", "branches": ["branch"], "join": "join"},
            {"id": "branch", "run": ok},
            {"id": "join", "type": "join"},
        ],
        {"branch": "end", "join": "end"},
        entry="fork",
    )
    assert refusal(spec) == (("nodes", 0, "branches"), "invalid_fork_topology")


def test_zero_retry_attempts_names_the_retry_key() -> None:
    """Follows adk_workflow_graph_test: invalid_graph_topologies_are_rejected (3/4)."""
    spec = graph([{"id": "a", "run": ok, "retry": {"max_attempts": 0}}], {"a": "end"})
    assert refusal(spec) == (("nodes", 0, "retry"), "invalid_retry_max_attempts")


def test_negative_timeout_names_the_timeout_key() -> None:
    """Follows adk_workflow_graph_test: invalid_graph_topologies_are_rejected (4/4)."""
    spec = graph([{"id": "a", "run": ok, "timeout": -1}], {"a": "end"})
    assert refusal(spec) == (("nodes", 0, "timeout"), "invalid_timeout")


def test_bad_output_schema_is_refused() -> None:
    """Follows adk_workflow_test: workflow_schema_contracts_case (bad output schema)."""
    path, what = refusal(seq(output_schema={"type": "no-such-type"}))
    assert path == ("output_schema",)
    assert what[0] == "invalid_json_schema"


# -- header ----------------------------------------------------------------------------------------

HEADER_CASES = [
    ([], (), "expected_map"),
    ("spec", (), "expected_map"),
    (seq(version=2), ("version",), "unsupported_version"),
    (seq(version=True), ("version",), "unsupported_version"),
    (seq(version="1"), ("version",), "unsupported_version"),
    ({"kind": "sequential", "steps": []}, ("id",), "expected_nonempty_utf8_binary"),
    (seq(id=""), ("id",), "expected_nonempty_utf8_binary"),
    (seq(id=5), ("id",), "expected_nonempty_utf8_binary"),
    (seq(id="\ud800"), ("id",), "expected_nonempty_utf8_binary"),
    (seq(id="x" * 257), ("id",), "expected_nonempty_utf8_binary"),
    (seq(kind="dag"), ("kind",), "unsupported_kind"),
    ({"id": "wf", "steps": []}, ("kind",), "unsupported_kind"),
    (seq(max_transfers=3), ("max_transfers",), "unknown_key"),
    (seq(description="x"), ("description",), "unknown_key"),
    ({**seq(), 1: 2}, (), "non_string_key"),
]


@pytest.mark.parametrize(("spec", "path", "what"), HEADER_CASES)
def test_header_refusals(spec: Any, path: tuple[Any, ...], what: Any) -> None:
    assert refusal(spec) == (path, what)


# -- steps, branches and policies --------------------------------------------------------------


class NotAnAction:
    pass


def needs_keyword(state: Any, *, extra: Any) -> None:
    return None


STEP_CASES = [
    (seq(steps={}), ("steps",), "expected_list"),
    ({"id": "wf", "kind": "sequential"}, ("steps",), "expected_list"),
    (seq(steps=[]), ("steps",), "empty"),
    (seq(steps=[1]), ("steps", 0), "expected_map"),
    (seq(steps=[step(), 1]), ("steps", 1), "expected_map"),
    (seq(steps=[{"run": ok}]), ("steps", 0, "id"), "expected_nonempty_utf8_binary"),
    (seq(steps=[step(id="")]), ("steps", 0, "id"), "expected_nonempty_utf8_binary"),
    (seq(steps=[step(id=3)]), ("steps", 0, "id"), "expected_nonempty_utf8_binary"),
    (seq(steps=[{"id": "a"}]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run="module:function")]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run=42)]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run=NotAnAction)]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run=needs_three)]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run=needs_keyword)]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run=lookup)]), ("steps", 0, "run"), "invalid_action"),
    (seq(steps=[step(run=Agent("helper", 5))]), ("steps", 0, "run"), "invalid_action"),
    (
        seq(steps=[step(run=Agent("helper", "p", decide=lambda: 1))]),
        ("steps", 0, "run"),
        "invalid_action",
    ),
    (seq(steps=[step(run=ToolCall("lookup", {}))]), ("steps", 0, "run"), "invalid_action"),
    (
        seq(steps=[step(run=ToolCall(lookup, {"x": object()}))]),
        ("steps", 0, "run"),
        "invalid_action",
    ),
    (seq(steps=[step(run=ToolCall(lookup, 5))]), ("steps", 0, "run"), "invalid_action"),
    (
        seq(steps=[step(run=ToolCall(lookup, {}, result_key=""))]),
        ("steps", 0, "run"),
        "invalid_action",
    ),
    (seq(steps=[step(retries=3)]), ("steps", 0, "retries"), "unknown_key"),
    (seq(steps=[step(timeout=-1)]), ("steps", 0, "timeout"), "invalid_timeout"),
    (seq(steps=[step(timeout=-0.5)]), ("steps", 0, "timeout"), "invalid_timeout"),
    (seq(steps=[step(timeout="1")]), ("steps", 0, "timeout"), "invalid_timeout"),
    (seq(steps=[step(timeout=True)]), ("steps", 0, "timeout"), "invalid_timeout"),
    (seq(steps=[step(timeout=math.nan)]), ("steps", 0, "timeout"), "invalid_timeout"),
    (seq(steps=[step(timeout=math.inf)]), ("steps", 0, "timeout"), "invalid_timeout"),
    (
        seq(steps=[step(timeout=86_400.5)]),
        ("steps", 0, "timeout"),
        ("exceeds_maximum", 86_400.0),
    ),
    (seq(steps=[step(retry=3)]), ("steps", 0, "retry"), "invalid_retry_policy"),
    (seq(steps=[step(retry={"backoff_ms": 10})]), ("steps", 0, "retry"), "invalid_retry_option"),
    (
        seq(steps=[step(retry={"max_attempts": 0})]),
        ("steps", 0, "retry"),
        "invalid_retry_max_attempts",
    ),
    (
        seq(steps=[step(retry={"max_attempts": 1.5})]),
        ("steps", 0, "retry"),
        "invalid_retry_max_attempts",
    ),
    (
        seq(steps=[step(retry={"max_attempts": 1001})]),
        ("steps", 0, "retry"),
        ("exceeds_maximum", 1000),
    ),
    (seq(steps=[step(retry={"backoff": -1})]), ("steps", 0, "retry"), "invalid_retry_backoff"),
    (seq(steps=[step(retry={"backoff": "1"})]), ("steps", 0, "retry"), "invalid_retry_backoff"),
    (
        seq(steps=[step(retry={"backoff": 86_401})]),
        ("steps", 0, "retry"),
        ("exceeds_maximum", 86_400.0),
    ),
    (
        seq(steps=[step(retry={"backoff_factor": 0.5})]),
        ("steps", 0, "retry"),
        "invalid_retry_backoff_factor",
    ),
    (
        seq(steps=[step(retry={"backoff_factor": 101})]),
        ("steps", 0, "retry"),
        "invalid_retry_backoff_factor",
    ),
    (
        seq(steps=[step(retry={"max_backoff": -1})]),
        ("steps", 0, "retry"),
        "invalid_retry_max_backoff",
    ),
    (
        seq(steps=[step(retry={"backoff": 2, "max_backoff": 1})]),
        ("steps", 0, "retry"),
        "invalid_retry_max_backoff",
    ),
    (seq(steps=[step(retry={"jitter": "half"})]), ("steps", 0, "retry"), "invalid_retry_jitter"),
    (seq(max_steps=-1), ("max_steps",), "expected_positive_integer"),
    (seq(max_steps=1.0), ("max_steps",), "expected_positive_integer"),
    (seq(max_steps=True), ("max_steps",), "expected_positive_integer"),
    (seq(max_steps=1_000_001), ("max_steps",), ("exceeds_maximum", 1_000_000)),
    (
        seq(steps=[{"id": f"s{i}", "run": ok} for i in range(10_001)]),
        ("steps",),
        ("exceeds_maximum", 10_000),
    ),
]


@pytest.mark.parametrize(("spec", "path", "what"), STEP_CASES)
def test_step_refusals(spec: Any, path: tuple[Any, ...], what: Any) -> None:
    assert refusal(spec) == (path, what)


# -- parallel, loop, transfer ------------------------------------------------------------------


def par(**extra: Any) -> dict[str, Any]:
    spec = {"id": "p", "kind": "parallel", "branches": [{"id": "l", "run": ok}]}
    return {**spec, **extra}


def loop(**extra: Any) -> dict[str, Any]:
    spec = {"id": "l", "kind": "loop", "body": ok, "until": lambda s: True, "max_iterations": 3}
    return {k: v for k, v in {**spec, **extra}.items() if v is not None}


def transfer(**extra: Any) -> dict[str, Any]:
    spec = {"id": "t", "kind": "transfer", "entry": "a", "members": {"a": {"run": ok}}}
    return {k: v for k, v in {**spec, **extra}.items() if v is not None}


KIND_CASES = [
    (par(branches=None), ("branches",), "expected_list"),
    (par(branches=[]), ("branches",), "empty"),
    (par(branches=Route(ok)), ("branches",), "expected_list"),
    (seq(steps=Route(5)), ("steps",), "expected_list"),
    (seq(steps=Agent("helper", "p")), ("steps",), "expected_list"),
    (par(branches=[{"id": "l", "run": 1}]), ("branches", 0, "run"), "invalid_action"),
    (par(merge="union"), ("merge",), "invalid_merge_policy"),
    (par(merge=lambda deltas: {}), ("merge",), "invalid_merge_policy"),
    (par(max_concurrency=0), ("max_concurrency",), "expected_positive_integer"),
    (par(max_concurrency=1025), ("max_concurrency",), ("exceeds_maximum", 1024)),
    (par(steps=[]), ("steps",), "unknown_key"),
    (loop(body=None), ("body",), "invalid_action"),
    (loop(body="ok"), ("body",), "invalid_action"),
    (loop(until=None), ("until",), "invalid_predicate"),
    (loop(until=needs_three), ("until",), "invalid_predicate"),
    (loop(max_iterations=None), ("max_iterations",), "expected_non_negative_integer"),
    (loop(max_iterations=-1), ("max_iterations",), "expected_non_negative_integer"),
    (loop(max_iterations=1_000_001), ("max_iterations",), ("exceeds_maximum", 1_000_000)),
    (transfer(members=[]), ("members",), "expected_map"),
    (transfer(members={"a": 1}), ("members",), "invalid_member"),
    (transfer(members={1: {"run": ok}}), ("members",), "invalid_member"),
    (transfer(members={"": {"run": ok}}), ("members", ""), "invalid_member_id"),
    (transfer(members={"a": {"run": 1}}), ("members", "a", "run"), "invalid_action"),
    (
        transfer(members={"a": {"run": ok, "timeout": -1}}),
        ("members", "a", "timeout"),
        "invalid_timeout",
    ),
    (
        transfer(members={"a": {"run": ok, "retry": {"max_attempts": 0}}}),
        ("members", "a", "retry"),
        "invalid_retry_max_attempts",
    ),
    (transfer(members={"a": {"run": ok, "x": 1}}), ("members", "a", "x"), "unknown_key"),
    (transfer(members={}), ("members",), "empty"),
    (transfer(max_transfers=-1), ("max_transfers",), "expected_non_negative_integer"),
    (transfer(max_transfers=10_001), ("max_transfers",), ("exceeds_maximum", 10_000)),
    (transfer(entry="zzz"), ("entry",), "unknown_transfer_entry"),
    (transfer(entry=None), ("entry",), "unknown_transfer_entry"),
]


@pytest.mark.parametrize(("spec", "path", "what"), KIND_CASES)
def test_kind_refusals(spec: Any, path: tuple[Any, ...], what: Any) -> None:
    assert refusal(spec) == (path, what)


def test_a_named_tuple_is_a_value_not_a_list() -> None:
    """The property test's find: `Route`, `Agent` and `ToolCall` are tuples, but a spec
    list is a list or a plain tuple; anything else is ``expected_list`` at its key."""
    assert compile_workflow(seq(steps=({"id": "a", "run": ok},))).kind == "sequential"
    node = {"id": "fork", "type": "fork", "branches": Route(ok), "join": "join"}
    assert refusal(fork_graph(node)) == (("nodes", 0, "branches"), "expected_list")
    router = {"id": "a", "type": "branch", "choose": lambda s: "end", "targets": Route(ok)}
    assert refusal(graph([router], {})) == (("nodes", 0, "targets"), "expected_list")
    assert refusal(graph(ToolCall(lookup), {})) == (("nodes",), "expected_list")


# -- order: the first failure in the reference's order wins ------------------------------------


def test_the_kind_body_is_checked_before_max_steps_and_schemas() -> None:
    spec = seq(steps=[], max_steps=0, output_schema={"type": "nope"})
    assert refusal(spec) == (("steps",), "empty")
    spec = seq(max_steps=0, output_schema={"type": "nope"})
    assert refusal(spec) == (("max_steps",), "expected_positive_integer")


def test_input_schema_is_checked_before_output_schema() -> None:
    path, what = refusal(seq(input_schema=[], output_schema={"type": "nope"}))
    assert (path, what) == (("input_schema",), ("invalid_json_schema", "not_a_mapping"))


def test_a_remote_schema_reference_is_refused_without_fetching() -> None:
    schema = {"$ref": "https://example.invalid/schema.json"}
    assert refusal(seq(input_schema=schema)) == (
        ("input_schema",),
        ("invalid_json_schema", "remote_ref"),
    )


def test_the_transfer_entry_is_checked_after_the_members() -> None:
    spec = transfer(entry="zzz", members={"a": {"run": 1}})
    assert refusal(spec) == (("members", "a", "run"), "invalid_action")


# -- defaults and ceilings -----------------------------------------------------------------------


def test_defaults() -> None:
    """behaviors.md §7: timeout 30 s, max_steps 1000, max_transfers 16, retention 60 s,
    lease 30 s; parallel merge reject_conflicts."""
    assert (S.DEFAULT_TIMEOUT, S.DEFAULT_RETENTION, S.DEFAULT_LEASE) == (30.0, 60.0, 30.0)
    wf = compile_workflow(seq())
    assert (wf.max_steps, wf.max_transfers) == (1000, 0)
    assert (wf.input_validator, wf.output_validator) == (None, None)
    assert isinstance(wf.data, S.SequentialData)
    policy = wf.data.steps[0].policy
    assert policy.timeout is None
    assert policy.retry == S.RetryPolicy(
        max_attempts=1, backoff=0.0, backoff_factor=1.0, max_backoff=None, jitter="none"
    )
    assert compile_workflow(transfer()).max_transfers == 16
    parallel = compile_workflow(par(branches=[{"id": "l", "run": ok}, {"id": "r", "run": ok}]))
    assert isinstance(parallel.data, S.ParallelData)
    assert parallel.data.merge == S.Merge(name="reject_conflicts")
    assert parallel.data.max_concurrency == 2


def test_values_at_the_ceilings_compile() -> None:
    spec = seq(
        steps=[
            step(
                timeout=86_400,
                retry={
                    "max_attempts": 1000,
                    "backoff": 86_400,
                    "backoff_factor": 100,
                    "max_backoff": 86_400,
                    "jitter": "full",
                },
            )
        ],
        max_steps=1_000_000,
    )
    wf = compile_workflow(spec)
    assert wf.max_steps == 1_000_000
    assert isinstance(wf.data, S.SequentialData)
    assert wf.data.steps[0].policy == S.Policy(
        timeout=86_400.0,
        retry=S.RetryPolicy(
            max_attempts=1000,
            backoff=86_400.0,
            backoff_factor=100.0,
            max_backoff=86_400.0,
            jitter="full",
        ),
    )
    assert compile_workflow(par(max_concurrency=1024)).data.max_concurrency == 1024  # type: ignore[union-attr]
    assert compile_workflow(transfer(max_transfers=10_000)).max_transfers == 10_000
    assert compile_workflow(loop(max_iterations=0)).data.max_iterations == 0  # type: ignore[union-attr]


# -- what compiles ---------------------------------------------------------------------------------


async def async_action(state: dict[str, Any]) -> dict[str, Any]:
    return {}


def optional_context(state: Any, context: Any = None) -> dict[str, Any]:
    return {}


def variadic(*args: Any) -> dict[str, Any]:
    return {}


class CallableAction:
    def __call__(self, state: Any) -> dict[str, Any]:
        return {}


class AsyncCallable:
    async def __call__(self, state: Any, context: Any) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(
    ("run", "arity", "is_async"),
    [
        (ok, 1, False),
        (with_context, 2, False),
        (optional_context, 2, False),
        (variadic, 2, False),
        (lambda state: {}, 1, False),
        (CallableAction(), 1, False),
        (async_action, 1, True),
        (AsyncCallable(), 2, True),
    ],
)
def test_callables_are_called_with_the_context_when_they_take_it(
    run: Any, arity: int, is_async: bool
) -> None:
    wf = compile_workflow(seq([step(run=run)]))
    action = wf.data.steps[0].action  # type: ignore[union-attr]
    assert isinstance(action, S.Callback)
    assert (action.fn, action.arity, action.is_async) == (run, arity, is_async)


class Named:
    name = "helper"


def test_agent_and_tool_actions_compile() -> None:
    def decide(response: Any, state: Any, context: Any) -> dict[str, Any]:
        return {}

    args = {"value": 9}
    wf = compile_workflow(
        seq(
            [
                {"id": "agent", "run": Agent(Named(), "work", decide)},
                {"id": "tool", "run": ToolCall(lookup, args, result_key="found")},
                {"id": "dynamic_tool", "run": ToolCall(lookup, lambda state: {"value": 1})},
            ]
        )
    )
    agent, tool_step, dynamic = (s.action for s in wf.data.steps)  # type: ignore[union-attr]
    assert isinstance(agent, S.AgentAction)
    assert agent.name == "helper"
    assert agent.prompt == "work"
    assert agent.decide is not None and agent.decide.arity == 3
    assert isinstance(tool_step, S.ToolAction)
    assert (tool_step.tool, dict(tool_step.args), tool_step.result_key) == (lookup, args, "found")  # type: ignore[arg-type]
    args["value"] = 10  # the compiled arguments are a copy
    assert tool_step.args["value"] == 9  # type: ignore[index]
    assert isinstance(dynamic, S.ToolAction) and isinstance(dynamic.args, S.Callback)


def test_custom_merge_and_nested_step_compile() -> None:
    child = compile_workflow(seq())

    def merge(deltas: Any, state: Any) -> dict[str, Any]:
        return {}

    parallel = compile_workflow(par(merge=merge))
    assert parallel.data.merge.name == "custom"  # type: ignore[union-attr]
    assert parallel.data.merge.fn.fn is merge  # type: ignore[union-attr]
    wf = compile_workflow(seq([step(run=child)]))
    action = wf.data.steps[0].action  # type: ignore[union-attr]
    assert isinstance(action, S.NestedAction) and action.workflow is child


def test_schemas_compile_once_and_report_structurally() -> None:
    wf = compile_workflow(
        seq(
            input_schema={"type": "object", "required": ["topic"]},
            output_schema={"type": "string"},
        )
    )
    assert S.schema_failure(wf.input_validator, {"topic": "x"}) is None
    assert S.schema_failure(wf.input_validator, {}) == (
        "schema_validation_failed",
        (),
        ("required",),
    )
    assert S.schema_failure(wf.output_validator, 42) == (
        "schema_validation_failed",
        (),
        ("expected_type", "string"),
    )
    assert S.schema_failure(None, object()) is None


def test_a_compiled_workflow_is_frozen_and_shows_no_closures() -> None:
    wf = compile_workflow(seq())
    assert repr(wf) == "CompiledWorkflow(id='wf', version=1, kind='sequential')"
    with pytest.raises(AttributeError):
        wf.max_steps = 3  # type: ignore[misc]
    assert "function" not in repr(wf.data)


def test_changing_the_spec_after_compiling_changes_nothing() -> None:
    spec = seq([step(), {"id": "b", "run": ok}])
    wf = compile_workflow(spec)
    spec["steps"].pop()
    spec["max_steps"] = 1
    assert len(wf.data.steps) == 2  # type: ignore[union-attr]
    assert wf.max_steps == 1000
