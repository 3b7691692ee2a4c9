"""The public planning calls: `run_planning`, `start`, `wait`, `cancel`.

A run belongs to the process that started it: its `PlanningRef` works only there
(``not_planning_owner`` elsewhere), and that process's exit stops the run and its
active callback. Configuration errors raise `AdkError` before anything starts;
everything that happens once the run started (planner and executor failures, the
budgets, the deadline, a cancel) is a result value, never an exception.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import msgspec

from adk_actors.app import WORKFLOW_SUPERVISOR, ensure_started
from adk_actors.planning.adapters import check_adapters
from adk_actors.planning.launch import PlanningLaunch, handoffs
from adk_actors.planning.options import DEFAULT_RETENTION, planning_options
from adk_actors.planning.plan import json_copy
from adk_actors.planning.result import PlanningResult, safe_reason, start_failure_reason
from adk_actors.planning.server import Await, Cancel, PlanningServer
from providers.errors import AdkError
from supervision import (
    CallTimeout,
    ChildSpec,
    DynamicSupervisor,
    HandoffsFull,
    MaxChildrenReached,
    Pid,
    ProcessExit,
    SupervisorError,
    call,
    self_pid,
)

CANCEL_TIMEOUT = 5.0
DEFAULT_CANCEL_REASON = "user_cancelled"


class PlanningRef(msgspec.Struct, frozen=True):
    """An opaque, owner-bound handle on a running plan (from `start`)."""

    owner: Pid
    server: Pid
    token: str

    def __repr__(self) -> str:
        return f"<PlanningRef {self.server}>"


def run_planning(
    planner: Any, executor: Any, goal: Any, context: Mapping[str, Any] | None = None, **options: Any
) -> PlanningResult:
    """Plan, execute and replan until the planner completes or a budget ends the run;
    returns the result (``status`` ``completed``, ``failed`` or ``cancelled``).

    Options (defaults): ``max_steps`` (16, executor calls across every revision),
    ``max_replans`` (3), ``timeout`` (60.0 s, one absolute deadline),
    ``callback_timeout`` (10.0 s per call), ``max_plan_bytes`` (1 MiB per plan),
    ``max_output_bytes`` (1 MiB per callback answer), ``result_metadata`` ({}),
    ``retention`` (60.0 s a run that ended stays to be awaited; here it always is, so
    a shorter one is raised to the default and never observable).
    """
    return wait(start(planner, executor, goal, context, **_awaited_options(options)))


def _awaited_options(options: dict[str, Any]) -> dict[str, Any]:
    """`run_planning`'s options with a retention that outlasts its own `wait`: a run
    ending before that `wait` arrives must still be there to answer it."""
    retention = options.get("retention", DEFAULT_RETENTION)
    if type(retention) in (int, float) and 0 <= retention < DEFAULT_RETENTION:
        return {**options, "retention": DEFAULT_RETENTION}
    return options


def start(
    planner: Any, executor: Any, goal: Any, context: Mapping[str, Any] | None = None, **options: Any
) -> PlanningRef:
    """Start a run under the workflow supervisor; returns its owner-bound ref.

    A run that ended stays ``retention`` seconds (default 60) for `wait`, then stops.
    Raises `AdkError` before anything starts: ``("invalid_planning_adapter", role,
    ...)``, ``("invalid_planning_options", key)``, ``invalid_planning_goal``,
    ``invalid_planning_context``, ``too_many_workflows``, ``busy`` (too many starts in
    flight), ``("planning_start_failed", structural reason)``, ``not_started``.
    """
    adapters = check_adapters(planner, executor)
    checked_goal = json_copy(goal, "invalid_planning_goal")
    if context is not None and not isinstance(context, Mapping):
        raise AdkError("invalid_planning_context", "the context is a JSON object")
    checked_context = json_copy(context or {}, "invalid_planning_context")
    checked = planning_options(**options)
    owner = self_pid()
    ensure_started()
    launch = PlanningLaunch(owner, _token(), adapters, checked_goal, checked_context, checked)
    try:
        ref = handoffs.put(launch)
    except HandoffsFull as full:
        raise AdkError("busy", f"{full.max_pending} planning starts are in flight") from None
    spec = ChildSpec(ref, lambda: PlanningServer.start_link(ref), restart="temporary")
    try:
        server = DynamicSupervisor.start_child(WORKFLOW_SUPERVISOR, spec)
    except MaxChildrenReached:
        raise AdkError("too_many_workflows", "the workflow supervisor is full") from None
    except SupervisorError as error:
        raise AdkError(
            ("planning_start_failed", start_failure_reason(error.reason)),
            "the planning run did not start",
        ) from None
    except ProcessExit:
        raise AdkError("not_started", "the application is not running") from None
    finally:
        handoffs.discard(ref)
    if server is None:
        raise AdkError("not_started", "the planning run ended before it started")
    return PlanningRef(owner, server, launch.token)


def wait(ref: PlanningRef, timeout: float | None = None) -> PlanningResult:
    """The run's result, waiting at most `timeout` seconds (None: until it ends).

    Raises `AdkError`: ``invalid_planning_ref`` (not a ref, or a run that is gone:
    awaited already, its retention over, or its owner exited), ``not_planning_owner`` (called from another
    process than the one that started it), ``planning_await_timeout``.
    """
    _check_owner(ref)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise AdkError("invalid_timeout", "timeout is None or seconds >= 0")
    try:
        answer = call(ref.server, Await(ref.token), timeout=timeout)
    except CallTimeout:
        raise AdkError("planning_await_timeout", "the planning run has not ended yet") from None
    except ProcessExit:
        raise AdkError(
            "invalid_planning_ref", "no such planning run (awaited already, or retention over?)"
        ) from None
    return _answer(answer)  # type: ignore[no-any-return]


def cancel(ref: PlanningRef, reason: Any = DEFAULT_CANCEL_REASON) -> None:
    """End a running plan now: its active callback is killed and the result is
    ``cancelled`` with ``error {"kind": "cancelled", "reason": reason}`` (`reason`
    redacted, secret-named keys dropped). Raises `AdkError`: ``invalid_planning_ref``,
    ``not_planning_owner``, ``already_terminal``."""
    _check_owner(ref)
    try:
        _answer(call(ref.server, Cancel(ref.token, safe_reason(reason)), timeout=CANCEL_TIMEOUT))
    except ProcessExit:
        raise AdkError("invalid_planning_ref", "no such planning run") from None
    except CallTimeout:
        raise AdkError("planning_cancel_timeout", "the planning run did not answer") from None


def _check_owner(ref: Any) -> None:
    if not (
        isinstance(ref, PlanningRef)
        and isinstance(ref.owner, Pid)
        and isinstance(ref.server, Pid)
        and isinstance(ref.token, str)
    ):
        raise AdkError("invalid_planning_ref", "not a planning ref from start()")
    if ref.owner != self_pid():
        raise AdkError("not_planning_owner", "only the process that started a run may use it")


def _answer(answer: Any) -> Any:
    match answer:
        case ("ok", value):
            return value
        case ("error", reason):
            raise AdkError(reason, "the planning run refused the request")
    raise AdkError("invalid_planning_ref", "unexpected answer")


def _token() -> str:
    return secrets.token_hex(16)
