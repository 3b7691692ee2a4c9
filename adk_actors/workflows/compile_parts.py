"""The parts of a workflow spec every kind shares, checked and compiled: ids, unknown
keys, bounded ints and durations, callables (with the arity they are called with),
actions (`run` values: callables, `Agent`, `ToolCall`, nested workflows), merge
policies, policies (``timeout``, ``retry``) and named action lists. Each refusal is a
`WorkflowSpecError` at the path the caller passes in; `compile.py` and
`compile_graph.py` assemble these into a `CompiledWorkflow`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeGuard

from adk_actors.agents.names import check_agent_name
from adk_actors.tools import Tool
from adk_actors.workflows.errors import Path, WorkflowSpecError
from adk_actors.workflows.results import Agent, ToolCall
from adk_actors.workflows.spec import (
    DEFAULT_POLICY,
    MAX_ATTEMPTS,
    MAX_BACKOFF_FACTOR,
    MAX_CONCURRENCY,
    MAX_ID_CHARS,
    MAX_ITEMS,
    MAX_SECONDS,
    MAX_STEPS,
    MAX_TRANSFERS,
    Action,
    ActionStep,
    AgentAction,
    Callback,
    CompiledWorkflow,
    Merge,
    NestedAction,
    NestedOptions,
    Policy,
    RetryPolicy,
    ToolAction,
    json_copy,
)
from providers.errors import AdkError

STEP_KEYS = frozenset({"id", "run", "timeout", "retry"})
_RETRY_KEYS = frozenset({"max_attempts", "backoff", "backoff_factor", "max_backoff", "jitter"})
_NESTED_OPTION_KEYS = frozenset(
    {"timeout", "max_steps", "max_transfers", "max_concurrency", "retention", "event_receiver"}
)
CONTEXT_ARITIES = (1, 2)
"""(state) or (state, context): actions, predicates, routes, prompts, tool args."""
DECIDE_ARITIES = (2, 3)
"""(response, state) or (response, state, context): an agent action's `decide`."""


def valid_id(value: Any) -> TypeGuard[str]:
    """A step, branch, member, node or workflow id: a non-empty UTF-8 string of at
    most `MAX_ID_CHARS` characters."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_CHARS:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_list(value: Any) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """A spec list: a list or a plain tuple (a named tuple such as `Route` or `Agent`
    is a value of its own, not a list of steps)."""
    return isinstance(value, list) or type(value) is tuple


def check_keys(item: Mapping[Any, Any], allowed: Iterable[str], path: Path) -> None:
    """Refuse the first key of `item` that is not in `allowed` (``unknown_key``)."""
    known = allowed if isinstance(allowed, frozenset) else frozenset(allowed)
    for key in item:
        if not isinstance(key, str):
            raise WorkflowSpecError(path, "non_string_key", "spec keys are strings")
        if key not in known:
            raise WorkflowSpecError((*path, key), "unknown_key", f"known keys: {sorted(known)}")


def bounded_int(
    item: Mapping[str, Any], key: str, path: Path, default: int, minimum: int, maximum: int
) -> int:
    """``item[key]`` (or `default`) as an int in ``minimum..maximum``; the reason is
    ``expected_positive_integer`` (minimum 1) or ``expected_non_negative_integer``,
    and ``("exceeds_maximum", maximum)`` above the ceiling."""
    value = item.get(key, default)
    if type(value) is not int or value < minimum:
        what = "expected_positive_integer" if minimum >= 1 else "expected_non_negative_integer"
        raise WorkflowSpecError((*path, key), what)
    if value > maximum:
        raise WorkflowSpecError((*path, key), ("exceeds_maximum", maximum))
    return value


def seconds(value: Any) -> float | None:
    """A finite, non-negative number of seconds as a float, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def callback(fn: Any, arities: tuple[int, ...]) -> Callback | None:
    """`fn` as a `Callback` taking the largest count in `arities` its signature
    accepts; None if it is not a plain callable (classes are not) or takes none of them."""
    if not callable(fn) or isinstance(fn, type):
        return None
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: the smallest count
        return Callback(fn=fn, arity=arities[0], is_async=_is_async(fn))
    required = maximum = 0
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            maximum += 1
            required += parameter.default is parameter.empty
        elif parameter.kind is parameter.VAR_POSITIONAL:
            maximum = max(arities)
        elif parameter.kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return None
    fitting = [n for n in arities if required <= n <= maximum]
    return Callback(fn=fn, arity=fitting[-1], is_async=_is_async(fn)) if fitting else None


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def compile_action(run: Any, path: Path) -> Action:
    """A step's ``run``: a callable (state[, context]), an `Agent`, a `ToolCall` or a
    compiled workflow (nested, default options). An `Agent` whose name is not a valid
    agent name: ``invalid_agent_name``; anything else (a bare `Tool` too):
    ``invalid_action``."""
    if isinstance(run, CompiledWorkflow):
        return NestedAction(workflow=run)
    action: Action | None
    if isinstance(run, Agent):
        if agent_name(run.name) is None:
            raise WorkflowSpecError(path, "invalid_agent_name", "not a valid agent name")
        action = agent_action(run.name, run.prompt, run.decide)
    elif isinstance(run, ToolCall):
        action = tool_action(run.tool, run.args, run.result_key)
    elif isinstance(run, Tool):  # callable, but a tool runs through ToolCall
        action = None
    else:
        action = callback(run, CONTEXT_ARITIES)
    if action is None:
        raise WorkflowSpecError(path, "invalid_action")
    return action


def agent_name(name: Any) -> str | None:
    """The canonical agent name (an object with a str ``name``, e.g. an `AgentRef`,
    gives that name), or None if it is not a valid, non-reserved agent name."""
    if not isinstance(name, str):
        name = getattr(name, "name", None)
    try:
        return check_agent_name(name)
    except AdkError:
        return None


def agent_prompt(prompt: Any) -> str | Callback | None:
    """A prompt: a string, or fn(state[, context]) returning one."""
    return prompt if isinstance(prompt, str) else callback(prompt, CONTEXT_ARITIES)


def agent_decide(decide: Any) -> Callback | None:
    """A decide callable (response, state[, context]); None when invalid (check `decide is None` first)."""
    return callback(decide, DECIDE_ARITIES)


def agent_action(name: Any, prompt: Any, decide: Any) -> AgentAction | None:
    canonical, compiled_prompt = agent_name(name), agent_prompt(prompt)
    compiled_decide = None if decide is None else agent_decide(decide)
    if canonical is None or compiled_prompt is None or (decide is not None and not compiled_decide):
        return None
    return AgentAction(name=canonical, prompt=compiled_prompt, decide=compiled_decide)


def tool_args(args: Any) -> Mapping[str, Any] | Callback | None:
    """Tool arguments: a JSON object (copied, read-only) or fn(state[, context])."""
    if isinstance(args, Mapping):
        try:
            copied = json_copy(args)
        except (AdkError, RecursionError):
            return None
        return MappingProxyType(copied)
    return callback(args, CONTEXT_ARITIES)


def tool_action(tool: Any, args: Any, result_key: Any) -> ToolAction | None:
    compiled_args = tool_args(args)
    if not isinstance(tool, Tool) or compiled_args is None:
        return None
    if result_key is not None and not valid_id(result_key):
        return None
    return ToolAction(tool=tool, args=compiled_args, result_key=result_key)


def compile_merge(merge: Any, path: Path) -> Merge:
    """``reject_conflicts`` | ``ordered_last_wins`` | fn(ordered_deltas, state) -> dict."""
    if merge in ("reject_conflicts", "ordered_last_wins"):
        return Merge(name=merge)
    custom = callback(merge, (2,)) if not isinstance(merge, str) else None
    if custom is None:
        raise WorkflowSpecError(path, "invalid_merge_policy")
    return Merge(name="custom", fn=custom)


def compile_policy(item: Mapping[str, Any], path: Path) -> Policy:
    """An action's ``timeout`` (None or 0..86 400 s) and ``retry`` map."""
    if "timeout" not in item and "retry" not in item:
        return DEFAULT_POLICY
    timeout = item.get("timeout")
    if timeout is not None:
        timeout = seconds(timeout)
        if timeout is None:
            raise WorkflowSpecError((*path, "timeout"), "invalid_timeout")
        if timeout > MAX_SECONDS:
            raise WorkflowSpecError((*path, "timeout"), ("exceeds_maximum", MAX_SECONDS))
    retry = item.get("retry")
    compiled = RetryPolicy() if retry is None else _retry(retry, (*path, "retry"))
    return Policy(timeout=timeout, retry=compiled)


def _retry(retry: Any, path: Path) -> RetryPolicy:
    if not isinstance(retry, Mapping):
        raise WorkflowSpecError(path, "invalid_retry_policy")
    if any(key not in _RETRY_KEYS for key in retry):
        raise WorkflowSpecError(path, "invalid_retry_option", f"retry keys: {sorted(_RETRY_KEYS)}")
    attempts = retry.get("max_attempts", 1)
    if type(attempts) is not int or attempts < 1:
        raise WorkflowSpecError(path, "invalid_retry_max_attempts")
    if attempts > MAX_ATTEMPTS:
        raise WorkflowSpecError(path, ("exceeds_maximum", MAX_ATTEMPTS))
    backoff = _duration(retry.get("backoff", 0.0), path, "invalid_retry_backoff")
    factor = retry.get("backoff_factor", 1.0)
    if seconds(factor) is None or not 1.0 <= float(factor) <= MAX_BACKOFF_FACTOR:
        raise WorkflowSpecError(path, "invalid_retry_backoff_factor")
    cap = retry.get("max_backoff")
    if cap is not None:
        cap = _duration(cap, path, "invalid_retry_max_backoff")
        if cap < backoff:
            raise WorkflowSpecError(path, "invalid_retry_max_backoff", "max_backoff < backoff")
    jitter = retry.get("jitter", "none")
    if jitter not in ("none", "full"):
        raise WorkflowSpecError(path, "invalid_retry_jitter")
    return RetryPolicy(
        max_attempts=attempts,
        backoff=backoff,
        backoff_factor=float(factor),
        max_backoff=cap,
        jitter=jitter,
    )


def _duration(value: Any, path: Path, what: str) -> float:
    number = seconds(value)
    if number is None:
        raise WorkflowSpecError(path, what)
    if number > MAX_SECONDS:
        raise WorkflowSpecError(path, ("exceeds_maximum", MAX_SECONDS))
    return number


def named_actions(items: Any, field: str) -> tuple[ActionStep, ...]:
    """A sequential ``steps`` or parallel ``branches`` list: ids unique, each with its run
    and policy."""
    if not is_list(items):
        raise WorkflowSpecError((field,), "expected_list")
    if len(items) > MAX_ITEMS:
        raise WorkflowSpecError((field,), ("exceeds_maximum", MAX_ITEMS))
    steps: list[ActionStep] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        path: Path = (field, index)
        if not isinstance(item, Mapping):
            raise WorkflowSpecError(path, "expected_map")
        step_id = item.get("id")
        if not valid_id(step_id):
            raise WorkflowSpecError((*path, "id"), "expected_nonempty_utf8_binary")
        if step_id in seen:
            raise WorkflowSpecError((*path, "id"), ("duplicate_id", step_id))
        seen.add(step_id)
        check_keys(item, STEP_KEYS, path)
        action = compile_action(item.get("run"), (*path, "run"))
        steps.append(ActionStep(id=step_id, action=action, policy=compile_policy(item, path)))
    if not steps:
        raise WorkflowSpecError((field,), "empty")
    return tuple(steps)


def nested_options(options: Any) -> NestedOptions | None:
    """A nested workflow node's ``options`` as `NestedOptions`, or None if invalid."""
    if not isinstance(options, Mapping) or any(key not in _NESTED_OPTION_KEYS for key in options):
        return None
    timeout = options.get("timeout")
    retention = seconds(options.get("retention", 0.0))
    counts = [
        (options.get("max_steps"), 1, MAX_STEPS),
        (options.get("max_transfers"), 0, MAX_TRANSFERS),
        (options.get("max_concurrency"), 1, MAX_CONCURRENCY),
    ]
    if timeout is not None and (seconds(timeout) is None or float(timeout) > MAX_SECONDS):
        return None
    if retention is None or retention > MAX_SECONDS:
        return None
    for value, low, high in counts:
        if value is not None and (type(value) is not int or not low <= value <= high):
            return None
    return NestedOptions(
        timeout=None if timeout is None else float(timeout),
        max_steps=options.get("max_steps"),
        max_transfers=options.get("max_transfers"),
        max_concurrency=options.get("max_concurrency"),
        retention=retention,
        event_receiver=options.get("event_receiver"),
    )
