"""Property tests of `compile_workflow`: random valid specs of every kind
compile; a random mutation of one either compiles or raises `WorkflowSpecError` whose
path names a part of the mutated spec (an existing key or list position, or a required
key missing from a dict that exists) and never anything else: graph nodes are named by
position, their topology included."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors.tools import tool
from adk_actors.workflows.compile import compile_workflow
from adk_actors.workflows.errors import WorkflowSpecError
from adk_actors.workflows.results import Agent, Route, ToolCall
from adk_actors.workflows.spec import CompiledWorkflow


def ok(state: Any) -> dict[str, Any]:
    return {}


def with_context(state: Any, context: Any) -> dict[str, Any]:
    return {}


def route_to_end(state: Any, context: Any) -> str:
    return "end"


def merge_all(deltas: Any, state: Any) -> dict[str, Any]:
    return {}


@tool
def lookup(value: int) -> dict[str, int]:
    """Look a value up."""
    return {"value": value}


CHILD = compile_workflow({"id": "child", "kind": "sequential", "steps": [{"id": "c", "run": ok}]})
RUNS = [ok, with_context, Agent("helper", "prompt"), ToolCall(lookup, {"value": 1}), CHILD]

ids = st.text("abcdefghij0123456789_-", min_size=1, max_size=6)
seconds = st.one_of(st.none(), st.floats(0, 100), st.integers(0, 100))


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    if draw(st.booleans()):
        policy["timeout"] = draw(seconds)
    if draw(st.booleans()):
        backoff = draw(st.floats(0, 10))
        retry = {
            "max_attempts": draw(st.integers(1, 1000)),
            "backoff": backoff,
            "backoff_factor": draw(st.floats(1, 100)),
            "max_backoff": draw(st.floats(backoff, 86_400)),
            "jitter": draw(st.sampled_from(["none", "full"])),
        }
        keys = draw(st.sets(st.sampled_from(sorted(retry))))
        policy["retry"] = {key: retry[key] for key in keys if key != "max_backoff"} | (
            {"max_backoff": retry["max_backoff"], "backoff": backoff}
            if "max_backoff" in keys
            else {}
        )
    return policy


@st.composite
def named(draw: st.DrawFn, size: int) -> list[dict[str, Any]]:
    names = draw(st.lists(ids, min_size=1, max_size=size, unique=True))
    return [{"id": name, "run": draw(st.sampled_from(RUNS)), **draw(policies())} for name in names]


@st.composite
def sequential(draw: st.DrawFn) -> dict[str, Any]:
    return {"id": draw(ids), "kind": "sequential", "steps": draw(named(5))}


@st.composite
def parallel(draw: st.DrawFn) -> dict[str, Any]:
    branches = draw(named(4))
    spec = {"id": draw(ids), "kind": "parallel", "branches": branches}
    spec["merge"] = draw(st.sampled_from(["reject_conflicts", "ordered_last_wins", merge_all]))
    if draw(st.booleans()):
        spec["max_concurrency"] = draw(st.integers(1, 1024))
    return spec


@st.composite
def loop(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "id": draw(ids),
        "kind": "loop",
        "body": draw(st.sampled_from(RUNS)),
        "until": draw(st.sampled_from([ok, with_context])),
        "max_iterations": draw(st.integers(0, 1_000_000)),
    }


@st.composite
def transfer(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(ids, min_size=1, max_size=4, unique=True))
    members = {name: {"run": draw(st.sampled_from(RUNS)), **draw(policies())} for name in names}
    spec = {
        "id": draw(ids),
        "kind": "transfer",
        "entry": draw(st.sampled_from(names)),
        "members": members,
    }
    if draw(st.booleans()):
        spec["max_transfers"] = draw(st.integers(0, 10_000))
    return spec


@st.composite
def graph(draw: st.DrawFn) -> dict[str, Any]:
    """Action nodes with random edges, plus optionally a router, a loop node and a fork."""
    names = draw(st.lists(ids, min_size=1, max_size=6, unique=True))
    actions = [f"n{name}" for name in names]
    targets = [*actions, "end"]
    nodes: list[dict[str, Any]] = []
    edges: dict[str, Any] = {}
    for node_id in actions:
        nodes.append({"id": node_id, "run": draw(st.sampled_from(RUNS[:2])), **draw(policies())})
        edges[node_id] = draw(st.one_of(st.sampled_from(targets), st.just(Route(route_to_end))))
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(targets), min_size=1, unique=True))
        kind = draw(st.sampled_from(["branch", "dynamic"]))
        nodes.append({"id": "router", "type": kind, "choose": route_to_end, "targets": chosen})
    if draw(st.booleans()):
        nodes.append(
            {
                "id": "loop",
                "type": "loop",
                "while": ok,
                "body": draw(st.sampled_from(actions)),
                "done": draw(st.sampled_from(targets)),
                "max_iterations": draw(st.integers(0, 100)),
            }
        )
    if draw(st.booleans()):
        count = draw(st.integers(1, 3))
        branches = [f"branch{i}" for i in range(count)]
        nodes.append({"id": "fork", "type": "fork", "branches": branches, "join": "join"})
        for branch in branches:
            nodes.append({"id": branch, "run": ok})
            edges[branch] = "join"
        nodes.append({"id": "join", "type": "join"})
        edges["join"] = draw(st.sampled_from(targets))
    order = draw(st.permutations(nodes))
    entry = draw(st.sampled_from([node["id"] for node in order]))
    return {"id": "g", "kind": "graph", "entry": entry, "nodes": list(order), "edges": edges}


specs = st.one_of(sequential(), parallel(), loop(), transfer(), graph())


def with_header(spec: dict[str, Any], max_steps: int | None) -> dict[str, Any]:
    if max_steps is not None:
        spec["max_steps"] = max_steps
    return spec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs, st.one_of(st.none(), st.integers(1, 1_000_000)))
def test_random_valid_specs_compile(spec: dict[str, Any], max_steps: int | None) -> None:
    wf = compile_workflow(with_header(spec, max_steps))
    assert isinstance(wf, CompiledWorkflow)
    assert (wf.id, wf.kind) == (spec["id"], spec["kind"])
    assert wf.max_steps == (1000 if max_steps is None else max_steps)


# -- mutations -----------------------------------------------------------------------------------

JUNK = [
    None,
    -1,
    0,
    1,
    2.5,
    math.nan,
    True,
    "",
    "end",
    "$end",
    "x",
    "user",
    [],
    {},
    [1],
    [[]],
    {"k": 1},
    10**30,
    ok,
    Route(5),
    Agent("bad-name", "p"),
    CHILD,
]


def copy_tree(value: Any) -> Any:
    """A copy of the dicts and lists of a spec (callables and structs are shared)."""
    if isinstance(value, dict):
        return {key: copy_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_tree(item) for item in value]
    return value


def locations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a dict entry or list item in the spec."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*path, key))
            found.extend(locations(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*path, index))
            found.extend(locations(item, (*path, index)))
    return found


def containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a dict or list in the spec (the root too)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict | list):
        found.append(path)
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found.extend(containers(item, (*path, key)))
    return found


def at(spec: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        spec = spec[step]
    return spec


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    spec = copy_tree(draw(specs))
    for _ in range(draw(st.integers(1, 3))):
        operation = draw(st.sampled_from(["replace", "delete", "add_key", "duplicate"]))
        if operation in ("replace", "delete"):
            path = draw(st.sampled_from(locations(spec)))
            parent = at(spec, path[:-1])
            if operation == "replace":
                parent[path[-1]] = copy_tree(draw(st.sampled_from(JUNK)))
            else:
                del parent[path[-1]]
        else:
            target = at(spec, draw(st.sampled_from(containers(spec))))
            if isinstance(target, dict) and operation == "add_key":
                key = draw(st.sampled_from(["extra", "id", "run", "type", 7]))
                target[key] = copy_tree(draw(st.sampled_from(JUNK)))
            elif isinstance(target, list) and target:
                target.append(copy_tree(draw(st.sampled_from(target))))
    return spec


REQUIRED_KEYS = frozenset(
    {"id", "kind", "steps", "branches", "run", "body", "until", "max_iterations", "members"}
    | {"entry", "nodes", "edges", "agent", "prompt", "tool", "workflow", "choose", "targets"}
    | {"while", "join"}
)
"""Keys a spec needs: the only keys an error may name when they are missing."""


def names_a_part_of(spec: Any, path: tuple[Any, ...]) -> bool:
    """Does every step of `path` resolve in `spec`, except that the last may be a
    required key missing from a dict? A string step into a list (graph topology
    errors) names the item whose ``id`` it is."""
    node = spec
    for position, step in enumerate(path):
        last = position == len(path) - 1
        if isinstance(node, dict):
            if step not in node:
                return last and step in REQUIRED_KEYS
            node = node[step]
        elif isinstance(node, list):
            if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(node):
                return False
            node = node[step]
        else:
            return False
    return True


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_specs_compile_or_name_a_path_in_the_spec(spec: dict[str, Any]) -> None:
    try:
        compile_workflow(spec)
    except WorkflowSpecError as error:
        assert names_a_part_of(spec, error.path), (error.path, error.what)
        assert error.reason == ("invalid_workflow", error.path, error.what)


def test_the_path_check_can_fail() -> None:
    spec = {"steps": [{"id": "a"}], "nodes": [{"id": "fork"}]}
    assert names_a_part_of(spec, ("steps", 0, "run"))
    assert names_a_part_of(spec, ("nodes", 0, "id"))
    assert not names_a_part_of(spec, ("nodes", "fork"))  # a list item is named by position
    assert not names_a_part_of(spec, ("steps", 1, "id"))
    assert not names_a_part_of(spec, ("nodes", "join"))
    assert not names_a_part_of(spec, ("policy", "x"))
    assert not names_a_part_of(spec, ("steps", 0, "id", "x"))
    assert not names_a_part_of(spec, ("steps", 0, "policy"))
