"""Checkpoints: the JSON-safe record of a workflow's last committed boundary.

A `Checkpoint` keeps the reference's field names (``schema_version``,
``workflow_id``, ``workflow_version``, ``kind``, ``cursor``, ``state``,
``remaining {steps, transfers}``, ``completed``, ``output`` once some output was
committed). The cursor is a tagged struct (its ``type`` field): where the run goes on.
Sequential ``next_index`` is 0-based (``0..len(steps)``); the graph's end is stored as
``"$end"``.

`encode_checkpoint` gives canonical JSON bytes; `decode_checkpoint` is strict (unknown
fields, wrong types: ``invalid_checkpoint``) and only structural: whether a checkpoint
fits a workflow is `validate_checkpoint`'s question (there is no MAC: a checkpoint is
trusted no further than its structure). `prepare_resume` upgrades a checkpoint of an
older schema version and stores a resume input in a paused cursor.

Schema versions: 2 (written now) adds the transfer cursor's ``transfers_used`` (the
handoffs a run has made, so transfer indexes go on counting after a resume) and the
phases that mark a finished body or run (loop ``until``/``done``, parallel ``merged``,
transfer ``done``). Version 1 checkpoints (none of those fields) are still read: a
resume upgrades them, taking ``transfers_used`` as the workflow's own ``max_transfers``
less the transfers left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from adk_actors.workflows.spec import (
    EDGE_NODE_TYPES,
    END,
    MAX_STATE_BYTES,
    MAX_STEPS,
    MAX_TRANSFERS,
    ActionNode,
    CompiledWorkflow,
    ForkNode,
    GraphData,
    LoopData,
    LoopNode,
    NestedAction,
    RouterNode,
    SequentialData,
    TransferData,
    is_json_exact,
    json_copy,
)
from providers.errors import AdkError

SCHEMA_VERSION = 2
"""The schema version of the checkpoints this build writes."""
SCHEMA_VERSIONS = (1, 2)
"""The schema versions it reads (a version 1 checkpoint is upgraded when resumed)."""
RESULT_VERSION = 1
MAX_CHECKPOINT_BYTES = 2 * MAX_STATE_BYTES + (1 << 20)
"""Encoded checkpoints larger than this are refused (state, output and cursor together)."""

GraphPhase = Literal["ready", "routing", "awaiting_resume", "fork"]
ResumeKind = Literal["node", "nested_workflow", "fork_branch", "fork_nested_workflow"]


class _Cursor(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="type",
):
    """Base of the cursors; the subclass's tag is its JSON ``type``."""


class SequentialCursor(_Cursor, tag="sequential", frozen=True, kw_only=True):
    """The next step to run (0-based). When a nested-workflow step paused: ``phase
    "awaiting_resume"``, the `pause` details, the child's `nested_checkpoint` and,
    after `prepare_resume`, the `resume_input`."""

    next_index: int
    phase: Literal["awaiting_resume"] | UnsetType = UNSET
    pause: dict[str, Any] | UnsetType = UNSET
    nested_checkpoint: Checkpoint | UnsetType = UNSET
    resume_input: Any | UnsetType = UNSET


class ParallelCursor(_Cursor, tag="parallel", frozen=True, kw_only=True):
    """A parallel workflow is atomic: it is ``pending`` until all branches commit at
    once. ``merged`` (committed only when the output schema refuses the result): the
    branches' merged delta and outputs are in the checkpoint, nothing is left to run."""

    status: Literal["pending", "merged"] = "pending"


class LoopCursor(_Cursor, tag="loop", frozen=True, kw_only=True):
    """Iterations done so far (``0..max_iterations``). ``phase "until"``: the body of
    iteration `iteration` ran and its delta is committed, `until` decides next;
    ``"done"``: the body returned `Stop` (its delta committed): nothing is left to run."""

    iteration: int
    phase: Literal["until", "done"] | UnsetType = UNSET


class TransferCursor(_Cursor, tag="transfer", frozen=True, kw_only=True):
    """The member that runs next and its ``context["input"]``; `transfers_used`: the
    handoffs the run has made so far (the next one's index is one more; absent only in
    a version 1 checkpoint). ``phase "done"``: `member` ended the run (its delta
    committed): nothing is left to run."""

    member: str
    input: Any = None
    transfers_used: int | UnsetType = UNSET
    phase: Literal["done"] | UnsetType = UNSET


class ForkResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One committed fork branch: its output and its (not yet merged) delta."""

    result_version: int = RESULT_VERSION
    output: Any = None
    delta: dict[str, Any]


class GraphCursor(_Cursor, tag="graph", frozen=True, kw_only=True):
    """Where a graph run stands: at `node` in `phase`.

    * ``ready``: run `node` with ``context["input"] = input`` (absent at the entry);
    * ``routing``: `node` ran and its delta is merged; route from it with
      `node_output` (and `route_target` when already chosen);
    * ``fork``: fork `node` runs its branches; `results` holds the committed ones;
    * ``awaiting_resume``: paused at `node`: `pause` details, `resume_kind`, and for
      a fork branch `fork_results`, `paused_branch`, `paused_delta`; for a nested
      workflow `nested_checkpoint`; `resume_input` once `prepare_resume` stored it.

    `visits` counts the body runs of each loop node.
    """

    node: str
    phase: GraphPhase = "ready"
    visits: dict[str, int] = msgspec.field(default_factory=dict)
    input: Any | UnsetType = UNSET
    node_output: Any | UnsetType = UNSET
    route_target: str | UnsetType = UNSET
    results: dict[str, ForkResult] | UnsetType = UNSET
    pause: dict[str, Any] | UnsetType = UNSET
    resume_kind: ResumeKind | UnsetType = UNSET
    fork_results: dict[str, ForkResult] | UnsetType = UNSET
    paused_branch: str | UnsetType = UNSET
    paused_delta: dict[str, Any] | UnsetType = UNSET
    nested_checkpoint: Checkpoint | UnsetType = UNSET
    resume_input: Any | UnsetType = UNSET


class CompleteCursor(_Cursor, tag="complete", frozen=True, kw_only=True):
    """A finished workflow: nothing left to run."""


Cursor = (
    SequentialCursor | ParallelCursor | LoopCursor | TransferCursor | GraphCursor | CompleteCursor
)


class Remaining(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Budgets left at this boundary; a resume starts from them (never replenished)."""

    steps: int
    transfers: int


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The last committed boundary of a workflow run (JSON-safe, frozen).

    `completed` is true once the run completed (then `cursor` is a `CompleteCursor`);
    `output` is the last committed output, `msgspec.UNSET` until one was committed
    (`has_output`). `state` is the whole workflow state at this boundary.
    """

    schema_version: int = SCHEMA_VERSION
    workflow_id: str
    workflow_version: int
    kind: str
    cursor: Cursor
    state: dict[str, Any]
    remaining: Remaining
    completed: bool = False
    output: Any | UnsetType = UNSET

    @property
    def has_output(self) -> bool:
        """Has some output been committed?"""
        return self.output is not UNSET


# -- building ------------------------------------------------------------------------------------


def initial_checkpoint(
    wf: CompiledWorkflow, state: dict[str, Any], *, steps: int, transfers: int
) -> Checkpoint:
    """The checkpoint before anything ran: the kind's first cursor, `state` (already
    JSON-exact: the caller copied it), the run's step and transfer budgets."""
    return Checkpoint(
        workflow_id=wf.id,
        workflow_version=wf.version,
        kind=wf.kind,
        cursor=_initial_cursor(wf),
        state=state,
        remaining=Remaining(steps=steps, transfers=transfers),
    )


def _initial_cursor(wf: CompiledWorkflow) -> Cursor:
    data = wf.data
    if isinstance(data, SequentialData):
        return SequentialCursor(next_index=0)
    if isinstance(data, LoopData):
        return LoopCursor(iteration=0)
    if isinstance(data, TransferData):
        return TransferCursor(member=data.entry, input=None, transfers_used=0)
    if isinstance(data, GraphData):
        return GraphCursor(node=data.entry)
    return ParallelCursor()


def completed_checkpoint(cp: Checkpoint, state: dict[str, Any]) -> Checkpoint:
    """`cp` marked completed with the final `state` (its output and budgets kept)."""
    return msgspec.structs.replace(cp, cursor=CompleteCursor(), state=state, completed=True)


# -- encoding ------------------------------------------------------------------------------------

_decoder = msgspec.json.Decoder(Checkpoint)


def encode_checkpoint(cp: Checkpoint) -> bytes:
    """Canonical JSON bytes (sorted keys) of `cp`; ``invalid_checkpoint`` if it is not
    a well-typed, JSON-exact checkpoint (or too large)."""
    if not isinstance(cp, Checkpoint) or not _json_fields_exact(cp):
        raise AdkError("invalid_checkpoint", "a checkpoint holds JSON-safe values only")
    try:
        encoded = msgspec.json.encode(cp, order="sorted")
        _decoder.decode(encoded)  # well-typed: what we write we can read
    except (msgspec.EncodeError, msgspec.DecodeError, TypeError, ValueError, OverflowError):
        raise AdkError("invalid_checkpoint", "the checkpoint has no JSON form") from None
    if len(encoded) > MAX_CHECKPOINT_BYTES:
        raise AdkError("invalid_checkpoint", "the checkpoint is too large")
    return encoded


def decode_checkpoint(data: bytes | bytearray | memoryview | str) -> Checkpoint:
    """The checkpoint in `data` (JSON), strictly decoded; ``invalid_checkpoint`` for
    anything else. Whether it fits a workflow is `validate_checkpoint`'s question."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) > MAX_CHECKPOINT_BYTES:
        raise AdkError("invalid_checkpoint", "a checkpoint is JSON bytes of bounded size")
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        raise AdkError("invalid_checkpoint", "not a checkpoint") from None


def _json_fields_exact(cp: Checkpoint) -> bool:
    """The JSON-typed fields, recursively through cursors and nested checkpoints."""
    if not isinstance(cp.state, dict) or not is_json_exact(cp.state):
        return False
    if cp.output is not UNSET and not is_json_exact(cp.output):
        return False
    cursor = cp.cursor
    for name in ("input", "node_output", "resume_input", "pause", "paused_delta"):
        value = getattr(cursor, name, UNSET)
        if value is not UNSET and not is_json_exact(value):
            return False
    for name in ("results", "fork_results"):
        results = getattr(cursor, name, UNSET)
        if isinstance(results, dict) and not all(
            isinstance(r, ForkResult) and is_json_exact(r.output) and is_json_exact(r.delta)
            for r in results.values()
        ):
            return False
    nested = getattr(cursor, "nested_checkpoint", UNSET)
    return nested is UNSET or (isinstance(nested, Checkpoint) and _json_fields_exact(nested))


# -- validation ----------------------------------------------------------------------------------


def validate_checkpoint(wf: CompiledWorkflow, cp: Any) -> dict[str, Any]:
    """The state to resume `wf` from at `cp`, or `AdkError`:

    * ``invalid_checkpoint``: not a checkpoint, or a field or the cursor does not fit `wf`
      (an index out of range, an unknown node/member, visits on a non-loop node or past
      its maximum, a fork result for a non-branch, a router routing outside its targets,
      a paused fork branch that names no branch, a child checkpoint its nested workflow
      would refuse, a non-JSON output, ...);
    * ``checkpoint_workflow_mismatch``: a schema version this build does not read (it
      reads `SCHEMA_VERSIONS`), another workflow id, version or kind;
    * ``checkpoint_complete``: the run already completed;
    * ``invalid_checkpoint_state``: the state is not a JSON-exact object (of bounded size).
    """
    if not isinstance(cp, Checkpoint):
        raise AdkError("invalid_checkpoint", "not a Checkpoint")
    header = (cp.workflow_id, cp.workflow_version, cp.kind)
    if (
        header != (wf.id, wf.version, wf.kind)
        or type(cp.schema_version) is not int
        or cp.schema_version not in SCHEMA_VERSIONS
    ):
        raise AdkError("checkpoint_workflow_mismatch", "the checkpoint is of another workflow")
    if cp.completed is True:
        raise AdkError("checkpoint_complete", "the workflow already completed")
    if cp.completed is not False or not isinstance(cp.state, dict):
        raise AdkError("invalid_checkpoint", "a malformed checkpoint")
    if not _valid_remaining(cp.remaining) or not _valid_output(cp) or not _valid_cursor(wf, cp):
        raise AdkError("invalid_checkpoint", "the checkpoint does not fit the workflow")
    if not is_json_exact(cp.state) or _too_large(cp.state):
        raise AdkError("invalid_checkpoint_state", "the state is not a JSON object")
    return cp.state


def _too_large(state: dict[str, Any]) -> bool:
    try:
        return len(msgspec.json.encode(state)) > MAX_STATE_BYTES
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError):
        return True


def _count(value: Any, maximum: int) -> bool:
    return type(value) is int and 0 <= value <= maximum


def _valid_remaining(remaining: Any) -> bool:
    return (
        isinstance(remaining, Remaining)
        and _count(remaining.steps, MAX_STEPS)
        and _count(remaining.transfers, MAX_TRANSFERS)
    )


def _valid_output(cp: Checkpoint) -> bool:
    return cp.output is UNSET or is_json_exact(cp.output)


def _json_or_unset(value: Any) -> bool:
    return value is UNSET or is_json_exact(value)


def _valid_cursor(wf: CompiledWorkflow, cp: Checkpoint) -> bool:
    cursor, data = cp.cursor, wf.data
    v1 = cp.schema_version == 1
    if isinstance(data, SequentialData):
        return isinstance(cursor, SequentialCursor) and _valid_sequential(cursor, data)
    if isinstance(data, LoopData):
        return isinstance(cursor, LoopCursor) and _valid_loop(cursor, data, v1)
    if isinstance(data, TransferData):
        return isinstance(cursor, TransferCursor) and _valid_transfer(cursor, data, cp, v1)
    if isinstance(data, GraphData):
        return isinstance(cursor, GraphCursor) and _valid_graph(cursor, data)
    statuses = ("pending",) if v1 else ("pending", "merged")
    return isinstance(cursor, ParallelCursor) and cursor.status in statuses


def _valid_loop(cursor: LoopCursor, data: LoopData, v1: bool) -> bool:
    if not _count(cursor.iteration, data.max_iterations):
        return False
    if cursor.phase is UNSET:
        return True
    return not v1 and cursor.phase in ("until", "done") and cursor.iteration < data.max_iterations


def _valid_transfer(cursor: TransferCursor, data: TransferData, cp: Checkpoint, v1: bool) -> bool:
    """A member of `data`, a JSON input; from version 2 on, `transfers_used` is a count
    that, with the transfers left, stays within `MAX_TRANSFERS` (version 1 has none)."""
    if not (isinstance(cursor.member, str) and cursor.member in data.members):
        return False
    if not is_json_exact(cursor.input) or cursor.phase not in (UNSET, "done"):
        return False
    if v1:
        return cursor.transfers_used is UNSET and cursor.phase is UNSET
    used = cursor.transfers_used
    return type(used) is int and 0 <= used <= MAX_TRANSFERS - cp.remaining.transfers


def _valid_sequential(cursor: SequentialCursor, data: SequentialData) -> bool:
    index = cursor.next_index
    if not _count(index, len(data.steps)):
        return False
    if cursor.phase is UNSET:
        return (
            cursor.pause is UNSET
            and cursor.nested_checkpoint is UNSET
            and cursor.resume_input is UNSET
        )
    return (
        cursor.phase == "awaiting_resume"
        and index < len(data.steps)
        and _pause_details(cursor.pause)
        and _fits_child(data.steps[index].action, cursor.nested_checkpoint)
        and _json_or_unset(cursor.resume_input)
    )


def _pause_details(pause: Any) -> bool:
    return isinstance(pause, dict) and is_json_exact(pause)


def _valid_graph(cursor: GraphCursor, data: GraphData) -> bool:
    node = data.nodes.get(cursor.node) if isinstance(cursor.node, str) else None
    if node is None or not _valid_visits(cursor.visits, data):
        return False
    if not all(_json_or_unset(v) for v in (cursor.input, cursor.node_output, cursor.resume_input)):
        return False
    phase = cursor.phase
    if phase == "ready":
        return True
    if phase == "routing":
        return _valid_routing(cursor.route_target, node, data)
    if phase == "fork":
        return isinstance(node, ForkNode) and _valid_results(cursor.results, node)
    if phase == "awaiting_resume":
        return _pause_details(cursor.pause) and _valid_pause(cursor, node, data)
    return False


def _valid_visits(visits: Any, data: GraphData) -> bool:
    if not isinstance(visits, dict):
        return False
    for node_id, count in visits.items():
        node = data.nodes.get(node_id) if isinstance(node_id, str) else None
        if node is None:
            return False
        maximum = node.max_iterations if isinstance(node, LoopNode) else 0
        if not _count(count, maximum):
            return False
    return True


def _target_exists(target: Any, data: GraphData) -> bool:
    return isinstance(target, str) and (target == END or target in data.nodes)


def _valid_routing(target: Any, node: Any, data: GraphData) -> bool:
    """A node routes from its edge (a goto may name any node); a branch/dynamic node
    only to a target it chose among its own `targets`; nothing else routes."""
    if isinstance(node, ActionNode):
        return target is UNSET or _target_exists(target, data)
    return isinstance(node, RouterNode) and isinstance(target, str) and target in node.targets


def _fits_child(action: Any, nested: Any) -> bool:
    """Is `action` a nested workflow that could resume from checkpoint `nested`?"""
    if not isinstance(action, NestedAction):
        return False
    try:
        validate_checkpoint(action.workflow, nested)
    except AdkError:
        return False
    return True


def _valid_results(results: Any, fork: ForkNode) -> bool:
    if not isinstance(results, dict):
        return False
    return all(
        isinstance(branch, str)
        and branch in fork.branches
        and isinstance(result, ForkResult)
        and result.result_version == RESULT_VERSION
        and type(result.result_version) is int
        and is_json_exact(result.output)
        and isinstance(result.delta, dict)
        and is_json_exact(result.delta)
        for branch, result in results.items()
    )


def _valid_pause(cursor: GraphCursor, node: Any, data: GraphData) -> bool:
    kind = "node" if cursor.resume_kind is UNSET else cursor.resume_kind
    if kind == "node":
        return isinstance(node, ActionNode) and node.type in EDGE_NODE_TYPES
    if kind == "nested_workflow":
        return isinstance(node, ActionNode) and _fits_child(node.action, cursor.nested_checkpoint)
    if not isinstance(node, ForkNode) or not _valid_results(cursor.fork_results, node):
        return False
    branch = cursor.paused_branch
    if kind == "fork_branch":
        return (
            isinstance(branch, str)
            and branch in node.branches
            and isinstance(cursor.paused_delta, dict)
            and is_json_exact(cursor.paused_delta)
        )
    if kind == "fork_nested_workflow":
        branch_node = data.nodes.get(branch) if isinstance(branch, str) else None
        return (
            branch_node is not None
            and branch in node.branches
            and isinstance(branch_node, ActionNode)
            and _fits_child(branch_node.action, cursor.nested_checkpoint)
        )
    return False


# -- resume ---------------------------------------------------------------------------------------


def is_awaiting_resume(cp: Checkpoint) -> bool:
    """Is `cp` paused, so that a resume needs an input?"""
    cursor = cp.cursor
    if isinstance(cursor, SequentialCursor):
        return cursor.phase == "awaiting_resume"
    return isinstance(cursor, GraphCursor) and cursor.phase == "awaiting_resume"


def upgrade_checkpoint(wf: CompiledWorkflow, cp: Checkpoint) -> Checkpoint:
    """`cp` (valid for `wf`) at the current schema version: a version 1 transfer cursor
    gets ``transfers_used``, taken as `wf`'s ``max_transfers`` less the transfers left
    (what version 1 runs counted from). A nested child checkpoint is upgraded when its
    own run resumes."""
    if cp.schema_version == SCHEMA_VERSION:
        return cp
    cursor = cp.cursor
    if isinstance(cursor, TransferCursor) and cursor.transfers_used is UNSET:
        used = max(0, wf.max_transfers - cp.remaining.transfers)
        cursor = msgspec.structs.replace(cursor, transfers_used=used)
    return msgspec.structs.replace(cp, schema_version=SCHEMA_VERSION, cursor=cursor)


def prepare_resume(
    wf: CompiledWorkflow, cp: Checkpoint, resume_input: Any, given: bool
) -> Checkpoint:
    """`cp` ready to resume: upgraded to the current schema version
    (`upgrade_checkpoint`); a paused cursor gets the resume input stored in it (a JSON
    copy); other checkpoints are returned as they are (the input is ignored).
    Raises ``resume_input_required`` when paused and no input was `given`, and
    ``("invalid_resume_input", reason)`` when the input is not JSON. Call
    `validate_checkpoint` first."""
    cp = upgrade_checkpoint(wf, cp)
    if not is_awaiting_resume(cp):
        return cp
    if not given:
        raise AdkError("resume_input_required", "a paused workflow resumes with an input")
    try:
        safe_input = json_copy(resume_input)
    except (AdkError, RecursionError) as error:
        reason = error.reason if isinstance(error, AdkError) else "invalid_json_value"
        raise AdkError(("invalid_resume_input", reason), "the resume input is not JSON") from None
    cursor = msgspec.structs.replace(cp.cursor, resume_input=safe_input)
    return msgspec.structs.replace(cp, cursor=cursor)


def remaining_of(cp: Checkpoint) -> Mapping[str, int]:
    """The budgets stored in `cp`, as ``{"steps", "transfers"}``."""
    return {"steps": cp.remaining.steps, "transfers": cp.remaining.transfers}
