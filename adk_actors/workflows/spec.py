"""The compiled form of a workflow spec: frozen structs the engine interprets.

`compile_workflow` (compile.py) builds these from a spec dict once; nothing here is
ever built from untrusted data at run time, so a route or a checkpoint can only name
what a compiled workflow already holds (no callable, module or source string comes
from data). The structs hold callables, so they are never serialised; what crosses a
process or storage boundary is a `Checkpoint` (checkpoint.py).

Also here: the defaults and ceilings every layer shares, the end-of-graph marker
`END`, and the JSON rules for values that live in checkpoints (`is_json_exact`,
`json_copy`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import fastjsonschema
import msgspec

from adk_actors.policy.measure import canonical_json
from providers.errors import AdkError

# -- defaults (behaviors.md §7) -----------------------------------------------------------------

DEFAULT_TIMEOUT = 30.0
"""A run's whole-workflow deadline, seconds from start, unless the caller gives one."""
DEFAULT_MAX_STEPS = 1000
DEFAULT_MAX_TRANSFERS = 16
DEFAULT_RETENTION = 60.0
"""Seconds a finished coordinator keeps answering `wait`/`status`."""
DEFAULT_LEASE = 30.0
"""Seconds of a durable owner's lease."""
DEFAULT_MAX_WAITERS = 1024
"""How many `wait` calls a run answers at once unless its ``max_waiters`` option says."""

# -- ceilings (ours: the reference leaves them unbounded) ----------------------------------------

MAX_STEPS = 1_000_000
MAX_TRANSFERS = 10_000
MAX_ITERATIONS = 1_000_000
MAX_CONCURRENCY = 1024
MAX_WAITERS = 65_536
"""The hard ceiling of the ``max_waiters`` run option."""
MAX_ATTEMPTS = 1000
MAX_SECONDS = 86_400.0
"""Bound of every duration: timeouts, backoffs, retention, leases."""
MAX_BACKOFF_FACTOR = 100.0
MAX_ITEMS = 10_000
"""At most this many steps, branches, members or graph nodes (and fork branches)."""
MAX_ID_CHARS = 256
"""Step, branch, member and node ids are non-empty strings of at most this many chars."""
MAX_STATE_BYTES = 16 << 20
"""A checkpoint's state (and a delta or an output) as canonical JSON (= sessions' bound)."""
MAX_JSON_DEPTH = 64

END = "$end"
"""The graph's end as compiled and as stored in checkpoints; a spec writes ``"end"``."""

Kind = Literal["sequential", "parallel", "loop", "transfer", "graph"]
KINDS: tuple[Kind, ...] = ("sequential", "parallel", "loop", "transfer", "graph")
MergeName = Literal["reject_conflicts", "ordered_last_wins", "custom"]
NodeType = Literal[
    "action", "agent", "tool", "workflow", "join", "branch", "dynamic", "loop", "fork"
]
EDGE_NODE_TYPES: frozenset[str] = frozenset({"action", "agent", "tool", "workflow", "join"})
"""Graph node types whose successor is an explicit edge (every one of them needs one)."""
FORK_BRANCH_TYPES: frozenset[str] = frozenset({"action", "agent", "tool", "workflow"})
"""Graph node types a fork may run as a branch."""


class _Frozen(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the compiled structs: immutable, keyword-built, never serialised."""


class Callback(_Frozen, frozen=True, kw_only=True):
    """A user callable and how to call it: `arity` positional arguments (the trailing
    one being the context when the signature takes it), awaited if `is_async`."""

    fn: Callable[..., Any]
    arity: int
    is_async: bool = False

    def __repr__(self) -> str:
        return f"Callback(arity={self.arity}, is_async={self.is_async})"


class RetryPolicy(_Frozen, frozen=True, kw_only=True):
    """Attempts of one action. Defaults reproduce the reference: one attempt, constant
    backoff. `max_backoff` None means "not given": retry.py applies its own cap."""

    max_attempts: int = 1
    backoff: float = 0.0
    backoff_factor: float = 1.0
    max_backoff: float | None = None
    jitter: Literal["none", "full"] = "none"


class Policy(_Frozen, frozen=True, kw_only=True):
    """An action's per-attempt `timeout` (seconds; None = only the run's deadline) and retry."""

    timeout: float | None = None
    retry: RetryPolicy = RetryPolicy()


DEFAULT_POLICY = Policy()


class AgentAction(_Frozen, frozen=True, kw_only=True):
    """Ask agent `name` (resolved when dispatched) with `prompt` (a string, or a
    `Callback` of (state[, context]) returning one); `decide` (response, state[, context])
    turns the response into an action result, else the response is the output."""

    name: str
    prompt: str | Callback
    decide: Callback | None = None


class ToolAction(_Frozen, frozen=True, kw_only=True):
    """Run `tool` (an `adk_actors.tools.Tool`) with `args` (a JSON object, or a
    `Callback` of (state[, context]) returning one); the result is the output, stored
    in the state under `result_key`, or merged as the delta when None (then a dict)."""

    tool: Any
    args: Mapping[str, Any] | Callback
    result_key: str | None = None


class NestedOptions(_Frozen, frozen=True, kw_only=True):
    """Run options of a nested workflow (None = the parent's remaining value / the child's spec)."""

    timeout: float | None = None
    max_steps: int | None = None
    max_transfers: int | None = None
    max_concurrency: int | None = None
    retention: float = 0.0
    event_receiver: Any = None


class NestedAction(_Frozen, frozen=True, kw_only=True):
    """Run a compiled child workflow with the parent's current state."""

    workflow: CompiledWorkflow
    options: NestedOptions = NestedOptions()


Action = Callback | AgentAction | ToolAction | NestedAction
"""What a step, branch, member, loop body or graph action node runs."""


class ActionStep(_Frozen, frozen=True, kw_only=True):
    """A named action with its policy: a sequential step, a parallel branch, a transfer
    member (`id` = member name) or a loop body (`id` = ``"loop-body"``)."""

    id: str
    action: Action
    policy: Policy = DEFAULT_POLICY


class Merge(_Frozen, frozen=True, kw_only=True):
    """How branch deltas merge, in declared branch order: `reject_conflicts` (unequal
    writes to one key fail), `ordered_last_wins`, or `custom` (`fn(ordered_deltas, state)`)."""

    name: MergeName = "reject_conflicts"
    fn: Callback | None = None


# -- graph ---------------------------------------------------------------------------------------


class ActionNode(_Frozen, frozen=True, kw_only=True):
    """A node that runs an action (type action, agent, tool, workflow) or a join
    (`action` None: a no-op passing its input on). Its successor is `edges[id]`."""

    id: str
    type: Literal["action", "agent", "tool", "workflow", "join"]
    action: Action | None
    policy: Policy = DEFAULT_POLICY


class RouterNode(_Frozen, frozen=True, kw_only=True):
    """A branch/dynamic node: `choose(state[, context])` picks one of `targets` (END allowed)."""

    id: str
    type: Literal["branch", "dynamic"]
    choose: Callback
    targets: tuple[str, ...]


class LoopNode(_Frozen, frozen=True, kw_only=True):
    """`decide(state[, context])` true -> `body` (at most `max_iterations` times), else `done`."""

    id: str
    type: Literal["loop"] = "loop"
    decide: Callback
    body: str
    done: str = END
    max_iterations: int


class ForkNode(_Frozen, frozen=True, kw_only=True):
    """Run `branches` (action-like nodes whose edge is `join`) at most `max_concurrency`
    at once; merge their deltas in declared order; the join's input is {branch: output}."""

    id: str
    type: Literal["fork"] = "fork"
    branches: tuple[str, ...]
    join: str
    merge: Merge = Merge()
    max_concurrency: int


GraphNode = ActionNode | RouterNode | LoopNode | ForkNode


class Edge(_Frozen, frozen=True, kw_only=True):
    """An action node's successor: a fixed `target` (a node id or END), or `route`
    (state, context with ``input`` = the node's output) returning one."""

    target: str | None = None
    route: Callback | None = None


# -- kinds ---------------------------------------------------------------------------------------


class SequentialData(_Frozen, frozen=True, kw_only=True):
    steps: tuple[ActionStep, ...]


class ParallelData(_Frozen, frozen=True, kw_only=True):
    branches: tuple[ActionStep, ...]
    merge: Merge = Merge()
    max_concurrency: int


class LoopData(_Frozen, frozen=True, kw_only=True):
    body: ActionStep
    until: Callback
    max_iterations: int


class TransferData(_Frozen, frozen=True, kw_only=True):
    entry: str
    members: Mapping[str, ActionStep]
    member_order: tuple[str, ...]


class GraphData(_Frozen, frozen=True, kw_only=True):
    entry: str
    nodes: Mapping[str, GraphNode]
    node_order: tuple[str, ...]
    edges: Mapping[str, Edge]


KindData = SequentialData | ParallelData | LoopData | TransferData | GraphData

Validator = Callable[[Any], Any]
"""A compiled JSON Schema (fastjsonschema): returns the value or raises on a violation."""


class CompiledWorkflow(_Frozen, frozen=True, kw_only=True):
    """An immutable, validated workflow. `max_transfers` is 0 unless `kind` is transfer.
    Its repr names only id, version and kind (it holds closures)."""

    version: int
    id: str
    kind: Kind
    data: KindData
    max_steps: int
    max_transfers: int
    input_validator: Validator | None = None
    output_validator: Validator | None = None

    def __repr__(self) -> str:
        return f"CompiledWorkflow(id={self.id!r}, version={self.version}, kind={self.kind!r})"


def schema_failure(validator: Validator | None, value: Any) -> tuple[Any, ...] | None:
    """None if `value` satisfies the schema, else ``("schema_validation_failed", path,
    constraint)``: `path` a tuple of keys/indices into the value, `constraint` the
    schema keyword (``("expected_type", "string")`` for a type mismatch). Never echoes
    the value."""
    if validator is None:
        return None
    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException as error:
        path = tuple(
            step if isinstance(step, int) else str(step)[:MAX_ID_CHARS]
            for step in (error.path or [])[1:16]
        )
        rule = str(error.rule or "schema")[:64]
        definition = error.rule_definition
        if rule == "type" and isinstance(definition, str):
            return ("schema_validation_failed", path, ("expected_type", definition))
        return ("schema_validation_failed", path, (rule,))
    except RecursionError:
        return ("schema_validation_failed", (), ("max_depth",))
    return None


# -- JSON values in checkpoints -------------------------------------------------------------------


def is_json_exact(value: Any, *, depth: int = 0) -> bool:
    """Is `value` JSON exactly as it stands (dicts with str keys, lists, str, int, finite
    float, bool, None; no tuples; at most `MAX_JSON_DEPTH` deep), so that decoding its
    encoding gives it back? Checkpoint state and outputs must be."""
    if depth > MAX_JSON_DEPTH:
        return False
    if value is None or isinstance(value, bool | str):
        return not isinstance(value, str) or _utf8(value)
    if type(value) is int:
        return -(1 << 63) <= value < (1 << 64)
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is dict:
        return all(
            isinstance(key, str) and _utf8(key) and is_json_exact(item, depth=depth + 1)
            for key, item in value.items()
        )
    if type(value) is list:
        return all(is_json_exact(item, depth=depth + 1) for item in value)
    return False


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_decoder = msgspec.json.Decoder()


def json_copy(value: Any, *, limit: int = MAX_STATE_BYTES) -> Any:
    """A fresh, JSON-exact deep copy of a JSON-safe `value` (tuples become lists,
    mappings dicts), at most `limit` bytes as canonical JSON. Raises
    `AdkError("invalid_json_value")` or `AdkError("json_value_too_large")`."""
    if isinstance(value, Mapping) and type(value) is not dict:
        value = dict(value)
    encoded = canonical_json(value)
    if len(encoded) > limit:
        raise AdkError("json_value_too_large", f"a value is at most {limit} bytes as JSON")
    return _decoder.decode(encoded)
