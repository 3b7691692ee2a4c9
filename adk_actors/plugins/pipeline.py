"""`Pipeline`: the compiled, ordered plugins of a Runner, and how one phase runs.

`Pipeline.compile(descriptors)` checks every descriptor once (`descriptor`).
`run(hook, ctx, value)` (or `await arun(...)` from a coroutine) passes the value
through every plugin implementing `hook`, in registration order:

* each hook runs in its own kernel `Task` owned by the caller, with the descriptor's
  deadline: a caller that dies takes its hook tasks with it, and a hook past its
  deadline is stopped (a coroutine cancelled, a sync hook fenced); a process that must
  not wait (the invocation server) drives the phase with `steps` instead: each hook's
  task reports its end as a `TaskResult` message, which `PhaseSteps.settle` applies;
* a continue keeps the value; `Amend` passes the new value on; `Return` (and its
  alias `Replace`) ends the phase, later plugins do not run; `Halt` ends it with
  ``("plugin_halted", id, hook, reason)``;
* an ``observe`` plugin that amends, returns or halts, a hook that raises, dies or
  times out, a result that is not JSON (``invalid_result``), larger than its
  ``max_result_bytes`` (``result_too_large``) or refused by the phase's check
  (``invalid_amendment``: an amended prompt or tool call is checked again) is a
  failure: ``open`` records it and goes on with the value as it was, ``closed`` ends
  the phase with ``("plugin_failed", id, hook, failure)``;
* ``after_run``, ``on_agent_error`` and ``on_run_error`` are notifications: a failure
  is recorded and an intervention ignored (``notification_result_ignored``), whatever
  the failure policy.

Every hook gets its own deep copy of the value and the context (`isolated`): a hook
that changes what it was given in place, an observer or one that timed out and runs
on fenced, changes nothing; only an `Amend` or `Return`, through the phase's check,
changes the phase's value. A value that cannot be copied fails the phase's hooks
(``uncopyable_value``) rather than being shared.

Every plugin leaves one structural `TraceEntry`; no value, argument or exception
text reaches a trace or a log.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import msgspec

from adk_actors.plugins.descriptor import CompiledPlugin, compile_descriptors
from adk_actors.plugins.outcomes import PhaseKind, PhaseOutcome, TraceEntry, normalize
from adk_actors.plugins.plugin import HOOKS, NOTIFICATION_HOOKS
from providers.errors import AdkError
from supervision import (
    DEADLINE_REASON,
    MaxChildrenReached,
    Task,
    TaskBusy,
    TaskFailed,
    TaskResult,
    TaskTimeout,
    is_secret_key,
    redact_text,
)
from supervision.aio import wait_task
from supervision.logs import get_logger

_log = get_logger("adk.plugins")

MAX_HALT_REASON_CHARS = 128
MAX_CONTEXT_DEPTH = 16

Check = Callable[[str, Any], Any]
"""A phase's check of an amended or returned value: ``check(tag, value)`` returns the
value to use (``tag`` is ``"amend"`` or ``"return"``) or raises `AdkError`."""


@dataclass(frozen=True)
class Pipeline:
    """The compiled plugins, in registration order. Immutable and shareable."""

    plugins: tuple[CompiledPlugin, ...] = ()

    @classmethod
    def compile(cls, descriptors: Any) -> Pipeline:
        if isinstance(descriptors, Pipeline):
            return descriptors
        return cls(compile_descriptors(descriptors))

    def __bool__(self) -> bool:
        return bool(self.plugins)

    def implements(self, hook: str) -> bool:
        return any(_hook_of(plugin, hook) is not None for plugin in self.plugins)

    def describe(self) -> dict[str, Any]:
        """JSON-safe metadata of the plugins, without their config."""
        return {
            "plugins": [
                {
                    "id": plugin.id,
                    "mode": plugin.options.mode,
                    "failure_policy": plugin.options.failure_policy,
                    "timeout": plugin.options.timeout,
                    "max_result_bytes": plugin.options.max_result_bytes,
                    "hooks": sorted(plugin.hooks),
                }
                for plugin in self.plugins
            ]
        }

    def run(
        self, hook: str, ctx: Mapping[str, Any], value: Any, check: Check | None = None
    ) -> PhaseOutcome:
        """One phase, from a thread or a process (each hook waited for here)."""
        run = _Run(hook, ctx, value, check)
        for plugin in self.plugins:
            fn = _hook_of(plugin, hook)
            if fn is None:
                run.skipped(plugin)
                continue
            task = run.start(plugin, fn)
            if isinstance(task, TaskFailed):
                result: Any = task
            else:
                try:
                    result = ("ok", task.wait(plugin.options.timeout + 1.0))
                except (TaskFailed, TaskTimeout) as error:
                    task.kill()
                    result = error
            if run.settle(plugin, result):
                break
        return run.outcome()

    async def arun(
        self, hook: str, ctx: Mapping[str, Any], value: Any, check: Check | None = None
    ) -> PhaseOutcome:
        """One phase, from a coroutine: waiting for a hook holds no thread."""
        run = _Run(hook, ctx, value, check)
        for plugin in self.plugins:
            fn = _hook_of(plugin, hook)
            if fn is None:
                run.skipped(plugin)
                continue
            task = run.start(plugin, fn)
            if isinstance(task, TaskFailed):
                result: Any = task
            else:
                try:
                    result = ("ok", await wait_task(task, plugin.options.timeout + 1.0))
                except (TaskFailed, TaskTimeout) as error:
                    task.kill()
                    result = error
            if run.settle(plugin, result):
                break
        return run.outcome()

    def steps(
        self, hook: str, ctx: Mapping[str, Any], value: Any, check: Check | None = None
    ) -> PhaseSteps:
        """One phase driven by its caller's messages (`PhaseSteps`), not waited for."""
        return PhaseSteps(self, _Run(hook, ctx, value, check))


class PhaseSteps:
    """One phase run hook by hook by a process that never waits: `next` starts the next
    hook's task (``notify=True``: its end comes to the caller as a `TaskResult`), or
    returns None once the phase has ended (then `outcome`); `settle` applies a result.
    """

    def __init__(self, pipeline: Pipeline, run: _Run) -> None:
        self._plugins = iter(pipeline.plugins)
        self._run = run
        self._current: CompiledPlugin | None = None
        self._ended = False

    def next(self) -> Task | None:
        """The next hook's task, started; None when the phase has ended."""
        run = self._run
        while not self._ended:
            plugin = next(self._plugins, None)
            if plugin is None:
                self._ended = True
                break
            fn = _hook_of(plugin, run.hook)
            if fn is None:
                run.skipped(plugin)
                continue
            task = run.start(plugin, fn, notify=True)
            if isinstance(task, TaskFailed):
                self._ended = run.settle(plugin, task)
                continue
            self._current = plugin
            return task
        return None

    def settle(self, result: TaskResult) -> None:
        """Apply the current hook's `TaskResult`."""
        plugin, self._current = self._current, None
        assert plugin is not None, "settle follows next"
        if result.ok:
            answer: Any = ("ok", result.value)
        elif result.value == DEADLINE_REASON:
            answer = TaskTimeout(DEADLINE_REASON, "the hook was stopped at its deadline")
        else:
            answer = TaskFailed(result.value, "the hook's task failed")
        self._ended = self._run.settle(plugin, answer)

    def outcome(self) -> PhaseOutcome:
        return self._run.outcome()


EMPTY = Pipeline()


def _hook_of(plugin: CompiledPlugin, hook: str) -> Any:
    if hook not in HOOKS:
        raise AdkError(("unknown_plugin_hook", hook[:64]), f"hooks are {HOOKS}")
    return plugin.plugin.hook_function(hook)


class _Run:
    """One phase in progress: its value, its trace and how it ended."""

    def __init__(self, hook: str, ctx: Mapping[str, Any], value: Any, check: Check | None):
        self.hook = hook
        self.ctx = MappingProxyType(prune_secrets(ctx))
        self.value = value
        self.check = check
        self.kind = PhaseKind.CONTINUE
        self.reason: Any = None
        self.trace: list[TraceEntry] = []
        self.notification = hook in NOTIFICATION_HOOKS

    def start(self, plugin: CompiledPlugin, fn: Any, notify: bool = False) -> Task | TaskFailed:
        """The hook's task, else why it could not start."""
        deadline = time.monotonic() + plugin.options.timeout
        try:
            ctx, value = isolated(self.ctx), isolated(self.value)
        except _Uncopyable:
            return TaskFailed("uncopyable_value", "the value cannot be copied for a hook")
        try:
            return Task.start(fn, ctx, value, plugin.config, deadline=deadline, notify=notify)
        except (TaskBusy, MaxChildrenReached):
            return TaskFailed("busy", "no pool thread")

    def skipped(self, plugin: CompiledPlugin) -> None:
        self.trace.append(TraceEntry(plugin.id, self.hook, "skipped"))

    def settle(self, plugin: CompiledPlugin, result: Any) -> bool:
        """Apply one plugin's result; True when the phase has ended."""
        if isinstance(result, TaskTimeout):
            return self._failed(plugin, "timeout")
        if isinstance(result, TaskFailed):
            return self._failed(plugin, _failure_tag(result))
        decision = normalize(result[1])
        if decision is None:
            return self._failed(plugin, "invalid_result")
        tag, payload = decision
        if self.notification:
            outcome = "observed" if tag == "continue" else "notification_result_ignored"
            self.trace.append(TraceEntry(plugin.id, self.hook, outcome))
            return False
        if tag == "continue":
            self.trace.append(TraceEntry(plugin.id, self.hook, "observed"))
            return False
        if plugin.options.mode == "observe":
            return self._failed(plugin, f"observer_cannot_{tag}")
        if tag == "halt":
            self.trace.append(TraceEntry(plugin.id, self.hook, "halted"))
            self.kind = PhaseKind.HALT
            self.reason = ("plugin_halted", plugin.id, self.hook, bounded_reason(payload))
            return True
        failure = _oversized(payload, plugin.options.max_result_bytes)
        if failure is not None:
            return self._failed(plugin, failure)
        if self.check is not None:
            try:
                payload = self.check(tag, payload)
            except AdkError:
                return self._failed(plugin, "invalid_amendment")
        self.value = payload
        if tag == "amend":
            self.trace.append(TraceEntry(plugin.id, self.hook, "amended"))
            self.kind = PhaseKind.AMEND
            return False
        self.trace.append(TraceEntry(plugin.id, self.hook, "returned"))
        self.kind = PhaseKind.RETURN
        return True

    def _failed(self, plugin: CompiledPlugin, failure: str) -> bool:
        self.trace.append(TraceEntry(plugin.id, self.hook, failure))
        _log.warning("adk.plugin.failed", plugin=plugin.id, hook=self.hook, failure=failure)
        if self.notification or plugin.options.failure_policy == "open":
            return False
        self.kind = PhaseKind.ERROR
        self.reason = ("plugin_failed", plugin.id, self.hook, failure)
        return True

    def outcome(self) -> PhaseOutcome:
        if self.kind in (PhaseKind.HALT, PhaseKind.ERROR):
            return PhaseOutcome(self.kind, self.reason, tuple(self.trace))
        return PhaseOutcome(self.kind, self.value, tuple(self.trace))


class _Uncopyable(Exception):
    pass


def isolated(value: Any) -> Any:
    """A deep copy of `value` for one hook (a read-only mapping stays read-only)."""
    if value is None or isinstance(value, str | int | float | bool | bytes):
        return value
    try:
        if isinstance(value, MappingProxyType):
            return MappingProxyType(copy.deepcopy(dict(value)))
        return copy.deepcopy(value)
    except Exception:
        raise _Uncopyable from None


def _failure_tag(error: TaskFailed) -> str:
    reason = error.reason
    kind = getattr(reason, "kind", None)
    if kind is not None:  # a Crash: the hook raised
        return "exception"
    if reason in ("busy", "uncopyable_value"):
        return str(reason)
    return "worker_down"


def _oversized(payload: Any, limit: int) -> str | None:
    """None when `payload` is JSON (content structs included) within `limit` bytes."""
    try:
        size = len(msgspec.json.encode(payload))
    except (TypeError, msgspec.EncodeError, OverflowError, RecursionError, ValueError):
        return "invalid_result"
    return "result_too_large" if size > limit else None


def bounded_reason(reason: Any) -> Any:
    """A halt reason fit for an error: a short, redacted string, else ``"halted"``."""
    if isinstance(reason, str) and reason:
        return redact_text(reason)[:MAX_HALT_REASON_CHARS]
    return "halted"


def prune_secrets(value: Any, depth: int = 0) -> Any:
    """A copy of a context without secret keys (``api_key``, ``token``, ...) at any
    depth; mappings become dicts, sequences lists."""
    if depth > MAX_CONTEXT_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {
            key: prune_secrets(item, depth + 1)
            for key, item in value.items()
            if not (isinstance(key, str) and is_secret_key(key))
        }
    if isinstance(value, list | tuple):
        return [prune_secrets(item, depth + 1) for item in value]
    return value
