"""Starting a workflow coordinator under the workflow supervisor (``adk.workflows``).

Everything a run needs (the compiled workflow with its closures, the checkpoint it
starts from, its runtime options, the durability hooks) is a `Launch`. It crosses a
one-shot handoff (the kernel's `OneShotHandoffs`): the supervisor's child spec
carries only an opaque reference, the
coordinator takes the launch under it exactly once in `init`, and the starter
withdraws whatever was not taken. So nothing of a run appears in supervisor
diagnostics, and a restarted or duplicated child can never run a launch twice.

`fresh_launch` and `resumed_launch` check a start's inputs (state, schema, checkpoint,
resume input, options) before any process exists and give the run its reference (a
string; its coordinator registers as ``("adk.workflow", ref)``);
`start_supervised` starts its coordinator (the server class `coordinator.py` installs
when it is imported: the coordinator imports this module, not the other way round).
"""

from __future__ import annotations

import itertools
import math
import queue
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from adk_actors.app import WORKFLOW_SUPERVISOR, ensure_started
from adk_actors.workflows.checkpoint import (
    Checkpoint,
    decode_checkpoint,
    initial_checkpoint,
    prepare_resume,
    validate_checkpoint,
)
from adk_actors.workflows.errors import failure_reason
from adk_actors.workflows.spec import (
    DEFAULT_MAX_WAITERS,
    DEFAULT_RETENTION,
    DEFAULT_TIMEOUT,
    MAX_CONCURRENCY,
    MAX_SECONDS,
    MAX_STEPS,
    MAX_TRANSFERS,
    MAX_WAITERS,
    CompiledWorkflow,
    json_copy,
    schema_failure,
)
from providers.errors import AdkError, decode_options
from supervision import (
    ChildSpec,
    DynamicSupervisor,
    HandoffsFull,
    HandoffTaken,
    MaxChildrenReached,
    OneShotHandoffs,
    Pid,
    ProcessExit,
    Ref,
    SupervisorError,
    UnknownHandoff,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from adk_actors.workflows.coordinator import Persistence

MAX_PENDING_HANDOFFS = 10_000
NOT_GIVEN: Any = msgspec.UNSET
"""The default of `resume_input`: no input was given (JSON null is an input)."""

Receiver = Pid | queue.Queue  # type: ignore[type-arg]
"""Where a run's events go: a process (sent `WorkflowEvent(ref, event)`) or a queue."""


class RunOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A run's options. `timeout` (seconds from the start; None: no deadline) or
    `deadline` (an absolute `time.monotonic()` instant, which wins) bound the whole
    run; `max_steps`/`max_transfers` replace the spec's budgets (ignored on resume:
    budgets come from the checkpoint); `max_concurrency` is a ceiling on a parallel
    workflow's and every fork's own bound (the smaller one applies); `retention` is
    how long a finished run answers; `max_waiters` bounds the `wait` calls waiting at
    once (more: ``too_many_waiters``)."""

    timeout: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_SECONDS)] | None = DEFAULT_TIMEOUT
    deadline: float | None = None
    max_steps: Annotated[int, msgspec.Meta(ge=1, le=MAX_STEPS)] | None = None
    max_transfers: Annotated[int, msgspec.Meta(ge=0, le=MAX_TRANSFERS)] | None = None
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)] | None = None
    retention: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_SECONDS)] = DEFAULT_RETENTION
    max_waiters: Annotated[int, msgspec.Meta(ge=1, le=MAX_WAITERS)] = DEFAULT_MAX_WAITERS


class Runtime(msgspec.Struct, frozen=True, kw_only=True):
    """What the coordinator and the engine know of a run besides its workflow and
    checkpoint (budgets and the transfers used so far are in the checkpoint);
    `watcher` is a process whose exit cancels the run (a nested workflow's parent
    attempt); `claim` is the starter's waiter token (`run_async`): the run keeps its
    outcome for that waiter however late it asks, its retention counted from then."""

    deadline: float | None
    max_concurrency: int | None
    retention: float
    execution_id: str
    max_waiters: int = DEFAULT_MAX_WAITERS
    event_receiver: Any = None
    watcher: Pid | None = None
    claim: Ref | None = None


@dataclass(frozen=True)
class Launch:
    """Everything a coordinator needs; crosses the handoff, never the child spec."""

    workflow: CompiledWorkflow
    checkpoint: Checkpoint
    runtime: Runtime
    ref: str
    persistence: Persistence | None = None

    def __repr__(self) -> str:  # closures, state and hooks stay out of any diagnostics
        return f"Launch(ref={self.ref!r})"


_execution_ids = itertools.count(1)


def workflow_name(ref: str) -> tuple[str, str]:
    """The registered name of the coordinator of run `ref`."""
    return ("adk.workflow", ref)


def run_options(**options: Any) -> tuple[RunOptions, Any]:
    """The checked options (and the event receiver, checked apart: it is a process or
    a queue); a bad one raises ``("invalid_workflow_options", key)``."""
    receiver = options.pop("event_receiver", None)
    if receiver is not None and not isinstance(receiver, Pid | queue.Queue):
        raise AdkError(
            ("invalid_workflow_options", "event_receiver"),
            "event_receiver is a Pid or a queue.Queue",
        )
    decoded = decode_options(RunOptions, options, "invalid_workflow_options", what="option")
    if decoded.deadline is not None and not math.isfinite(decoded.deadline):
        raise AdkError(("invalid_workflow_options", "deadline"), "deadline must be finite")
    return decoded, receiver


def _runtime(
    wf: CompiledWorkflow,
    options: RunOptions,
    receiver: Any,
    watcher: Pid | None,
    claim: Ref | None = None,
) -> Runtime:
    if options.deadline is not None:
        deadline: float | None = options.deadline
    else:
        deadline = None if options.timeout is None else time.monotonic() + options.timeout
    return Runtime(
        deadline=deadline,
        max_concurrency=options.max_concurrency,
        retention=options.retention,
        execution_id=f"workflow-{next(_execution_ids)}",
        max_waiters=options.max_waiters,
        event_receiver=receiver,
        watcher=watcher,
        claim=claim,
    )


def check_compiled(wf: Any) -> CompiledWorkflow:
    if not isinstance(wf, CompiledWorkflow):
        raise AdkError("invalid_compiled_workflow", "compile the spec with compile_workflow")
    return wf


def fresh_launch(
    wf: Any,
    state: Any,
    *,
    persistence: Persistence | None = None,
    watcher: Pid | None = None,
    claim: Ref | None = None,
    **options: Any,
) -> Launch:
    """A launch that starts `wf` from `state`. Raises before anything runs:
    ``invalid_compiled_workflow``, ``("invalid_initial_state", why)`` (state is a JSON
    object), ``("input_schema_validation_failed", failure)``,
    ``("invalid_workflow_options", key)``."""
    wf = check_compiled(wf)
    if state is None:
        state = {}
    try:
        initial = json_copy(state)
    except (AdkError, RecursionError) as error:
        why = error.reason if isinstance(error, AdkError) else "invalid_json_value"
        raise AdkError(("invalid_initial_state", why), "the state is a JSON object") from None
    if not isinstance(initial, dict):
        raise AdkError(("invalid_initial_state", "expected_object"), "the state is a JSON object")
    failure = schema_failure(wf.input_validator, initial)
    if failure is not None:
        tag, path, constraint = failure
        raise AdkError(
            ("input_schema_validation_failed", failure_reason((tag, list(path), constraint))),
            "the state does not satisfy the workflow's input schema",
        )
    opts, receiver = run_options(**options)
    runtime = _runtime(wf, opts, receiver, watcher, claim)
    steps = opts.max_steps if opts.max_steps is not None else wf.max_steps
    transfers = opts.max_transfers if opts.max_transfers is not None else wf.max_transfers
    checkpoint = initial_checkpoint(wf, initial, steps=steps, transfers=transfers)
    return Launch(wf, checkpoint, runtime, new_ref(), persistence)


def resumed_launch(
    wf: Any,
    checkpoint: Any,
    *,
    resume_input: Any = NOT_GIVEN,
    persistence: Persistence | None = None,
    watcher: Pid | None = None,
    **options: Any,
) -> Launch:
    """A launch that resumes `wf` from `checkpoint` (a `Checkpoint`, or its encoded
    bytes). Raises before anything runs: ``invalid_checkpoint``,
    ``checkpoint_workflow_mismatch``, ``checkpoint_complete``,
    ``invalid_checkpoint_state``, ``resume_input_required``, ``("invalid_resume_input",
    why)``, ``("invalid_workflow_options", key)``. Budgets come from the checkpoint
    (never replenished); `max_steps`/`max_transfers` options are ignored."""
    wf = check_compiled(wf)
    if isinstance(checkpoint, bytes | bytearray | memoryview | str):
        checkpoint = decode_checkpoint(checkpoint)
    validate_checkpoint(wf, checkpoint)
    ready = prepare_resume(wf, checkpoint, resume_input, resume_input is not NOT_GIVEN)
    opts, receiver = run_options(**options)
    return Launch(wf, ready, _runtime(wf, opts, receiver, watcher), new_ref(), persistence)


def new_ref() -> str:
    """A fresh run reference."""
    return f"wf-{uuid.uuid4().hex}"


handoffs: OneShotHandoffs[Launch] = OneShotHandoffs(MAX_PENDING_HANDOFFS, prefix="handoff")
"""The process-wide table starters put launches into and coordinators take them from
(the kernel's one-shot handoff table: bounded, each launch taken at most once)."""


def take_launch(ref: Any) -> Launch:
    """The launch under `ref`, taken (once): ``handoff_already_completed`` if it was
    taken already, ``invalid_workflow_handoff`` for a reference never handed out (or
    withdrawn)."""
    try:
        return handoffs.take(ref)
    except HandoffTaken:
        raise AdkError("handoff_already_completed", "this handoff was already taken") from None
    except UnknownHandoff:
        raise AdkError(
            "invalid_workflow_handoff", "no workflow launch under this reference"
        ) from None


_start_link: Callable[[str], Pid] | None = None


def install(server: Any) -> None:
    """Make `server.start_link(handoff)` what starts a coordinator (coordinator.py
    installs itself once, at import)."""
    global _start_link
    _start_link = server.start_link


def start_supervised(launch: Launch) -> Pid:
    """Start the coordinator of `launch` under the workflow supervisor; returns its pid
    (the run's reference is ``launch.ref``). Refusals raise `AdkError`:
    ``too_many_workflows``, ``workflow_supervisor_not_started``,
    ``("workflow_start_failed", reason)`` (a durable claim refused, say)."""
    start_link = _start_link
    if start_link is None:
        raise AdkError("workflow_supervisor_not_started", "import adk_actors.workflows first")
    ensure_started()
    try:
        handoff = handoffs.put(launch)
    except HandoffsFull:
        raise AdkError("busy", f"{handoffs.max_pending} workflow starts are in flight") from None
    spec = ChildSpec(handoff, lambda: start_link(handoff), restart="temporary")
    try:
        pid = DynamicSupervisor.start_child(WORKFLOW_SUPERVISOR, spec)
    except MaxChildrenReached:
        raise AdkError("too_many_workflows", "the workflow supervisor is full") from None
    except SupervisorError as error:
        raise AdkError(_start_reason(error.reason), "the workflow did not start") from None
    except ProcessExit:
        raise AdkError(
            "workflow_supervisor_not_started", "the application is not running"
        ) from None
    finally:
        handoffs.discard(handoff)
    if pid is None:
        raise AdkError("workflow_supervisor_not_started", "the workflow ended before it started")
    return pid


def _start_reason(reason: Any) -> Any:
    if isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown":
        reason = reason[1]
    if isinstance(reason, tuple) and reason[:1] == ("workflow_start_failed",):
        return reason
    if reason in ("invalid_workflow_handoff", "handoff_already_completed", "busy"):
        return reason
    return ("workflow_start_failed", failure_reason(reason))
