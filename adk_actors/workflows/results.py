"""What an action returns, what a spec names to run, and `normalize`, which turns any
action's raw return value into one checked `Control`.

An action is ``fn(state)`` or ``fn(state, context)``; it returns a state delta (a
dict; None means an empty one), or one of:

* `Output(value, delta)`: merge, record `value` as the output, continue;
* `Stop(value, delta)`: merge, record `value`, end the workflow (completed);
* `Goto(target, delta)`: a graph node's explicit successor (must be a node);
* `Transfer(target, input, delta)`: hand a transfer workflow to member `target`;
* `Pause(reason, details, delta)`: merge, checkpoint, end paused (graph nodes, nested);
* `Error(reason)`: a failure the step's retry policy may retry.

Raising is a failure too (retryable, reported by class only). Specs name what to
run with `Agent(name, prompt, decide)` and `ToolCall(tool, args, result_key)`, and
graph edges with `Route(fn)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from adk_actors.workflows.errors import (
    ACTION_COMPONENT,
    MAX_ID_CHARS,
    bounded_value,
    external_reason,
)
from adk_actors.workflows.spec import MAX_STATE_BYTES, json_copy

EMPTY: Mapping[str, Any] = MappingProxyType({})
"""The default delta: nothing changes."""


class Output(NamedTuple):
    """Merge `delta`, record `value` as the output (the next step's ``context["input"]``), go on."""

    value: Any = None
    delta: Mapping[str, Any] = EMPTY


class Stop(NamedTuple):
    """Merge `delta`, record `value` as the output, and complete the workflow now."""

    value: Any = None
    delta: Mapping[str, Any] = EMPTY


class Goto(NamedTuple):
    """Merge `delta` and continue at graph node `target` (or ``"end"``) instead of the edge."""

    target: str
    delta: Mapping[str, Any] = EMPTY


class Transfer(NamedTuple):
    """Merge `delta` and hand control to transfer member `target` with ``context["input"] = input``."""

    target: str
    input: Any = None
    delta: Mapping[str, Any] = EMPTY


class Pause(NamedTuple):
    """Merge `delta`, checkpoint, and end the run `Paused`; a resume input becomes this
    node's output. `reason` and `details` are cut to size (errors.bounded_value)."""

    reason: Any
    details: Any = None
    delta: Mapping[str, Any] = EMPTY


class Error(NamedTuple):
    """A failed attempt; retried under the step's retry policy. A `reason` that is not a
    stable ``snake_case`` tag is reported as a bounded failure dict, never as it is."""

    reason: Any


class Route(NamedTuple):
    """A graph edge decided at run time: ``fn(state)`` or ``fn(state, context)`` with
    ``context["input"]`` = the node's output, returning a node id or ``"end"``."""

    fn: Callable[..., Any]


class Agent(NamedTuple):
    """Run agent `name` (resolved by name at dispatch) on `prompt` (a string, or
    ``fn(state[, context])`` returning one). Without `decide` the answer is the output
    (and ``last_agent`` / ``last_response`` the delta); ``decide(response, state[,
    context])`` returns any action result instead (e.g. a `Transfer`)."""

    name: Any
    prompt: Any
    decide: Callable[..., Any] | None = None


class ToolCall(NamedTuple):
    """Run `tool` (an `adk_actors.tools.Tool`) with `args` (a JSON object, or
    ``fn(state[, context])`` returning one). The result is the output; it is the delta
    (then a dict) or, with `result_key`, stored under that key."""

    tool: Any
    args: Any = EMPTY
    result_key: str | None = None


ControlKind = Literal["ok", "output", "stop", "goto", "transfer", "pause", "error", "invalid"]


class Control(NamedTuple):
    """One action result, checked. `delta` is a fresh JSON-exact dict, `value` a
    JSON-exact copy (the output, the transfer input, or the bounded pause details),
    `target` the goto/transfer target, `reason` the bounded pause reason, the public
    reason of an `error`, or the reason an `invalid` result was refused
    (``"invalid_output"``, ``"invalid_state_delta"``, ``("invalid_transfer_input",)``,
    ``("invalid_control", type name)``, ``"invalid_target"``). Only ``error`` is
    retryable; ``invalid`` is not."""

    kind: ControlKind
    value: Any = None
    delta: Mapping[str, Any] = EMPTY
    target: str | None = None
    reason: Any = None

    @property
    def has_output(self) -> bool:
        """Does this result set the workflow output (output, stop; a paused node's
        output comes from its resume input)?"""
        return self.kind in ("output", "stop")


def normalize(raw: Any) -> Control:
    """Check one action's return value; never raises for a bad value (it becomes an
    ``invalid`` Control), so a caller can report it as the step's failure."""
    try:
        return _normalize(raw)
    except _Refused as refused:
        return Control("invalid", reason=refused.reason)


class _Refused(Exception):
    def __init__(self, reason: Any) -> None:
        super().__init__(reason)
        self.reason = reason


def _normalize(raw: Any) -> Control:
    if raw is None:
        return Control("ok", delta={})
    if isinstance(raw, Output):
        return Control("output", _output(raw.value), _delta(raw.delta))
    if isinstance(raw, Stop):
        return Control("stop", _output(raw.value), _delta(raw.delta))
    if isinstance(raw, Goto):
        return Control("goto", delta=_delta(raw.delta), target=_target(raw.target))
    if isinstance(raw, Transfer):
        return Control(
            "transfer",
            _json(raw.input, ("invalid_transfer_input",)),
            _delta(raw.delta),
            target=_target(raw.target),
        )
    if isinstance(raw, Pause):
        return Control(
            "pause",
            bounded_value(raw.details),
            _delta(raw.delta),
            reason=bounded_value(raw.reason),
        )
    if isinstance(raw, Error):
        return Control("error", reason=external_reason(ACTION_COMPONENT, "action", raw.reason))
    if isinstance(raw, Mapping):
        return Control("ok", delta=_delta(raw))
    return Control("invalid", reason=("invalid_control", type(raw).__name__[:64]))


def _delta(delta: Any) -> dict[str, Any]:
    if not isinstance(delta, Mapping):
        raise _Refused("invalid_state_delta")
    copied = _json(delta, "invalid_state_delta")
    assert isinstance(copied, dict)
    return copied


def _output(value: Any) -> Any:
    return _json(value, "invalid_output")


def _json(value: Any, reason: Any) -> Any:
    try:
        return json_copy(value, limit=MAX_STATE_BYTES)
    except Exception:  # AdkError, RecursionError, or a user Mapping that raises
        raise _Refused(reason) from None


def _target(target: Any) -> str:
    if not isinstance(target, str) or not 0 < len(target) <= MAX_ID_CHARS:
        raise _Refused("invalid_target")
    return target
