"""What every part of a turn shares: who runs it, its options, its callbacks, its steps.

`TurnContext` is the base of the turn worker (`turn._Turn`, through
`tool_round.ToolRound`): the agent's spec, the invocation's scope and options, the
contexts handed to callbacks and tools, and `observe`, which reports a step to
whoever runs the turn (the Runner stores each as an event). `off_loop` runs sync user
code (a tool, a callback, an approval check) in a pool task owned by the turn, never on
the reactor the turn's coroutine runs on.

Each agent has its own bounded shares of the kernel's task pool (`SyncPool.Share`),
one for tools (and approval checks, dynamic instructions) and one for callbacks: at
most ``max_tool_threads`` (default `DEFAULT_MAX_TOOL_THREADS`, at most
`MAX_TOOL_THREADS_CEILING`) of each in the pool at once, more wait without a thread.
So hung sync tools in one agent hold at most that many threads, never the threads
other agents need. A tool past its timeout keeps its thread (Python threads cannot
be killed): `agent_thread_stats` counts those as ``*_abandoned``. When every slot of a
share is held by such a thread, `off_loop` fails at once with ``capacity_exhausted``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from adk_actors.agents import plugin_checks
from adk_actors.agents.callbacks import run_callback
from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.spec import AgentSpec
from adk_actors.agents.thread_limits import check_max_tool_threads
from adk_actors.agents.turn_outcome import TurnFailed, TurnOutcome
from adk_actors.plugins import PhaseOutcome, Pipeline
from adk_actors.plugins.pipeline import Check
from adk_actors.tools import ToolContext
from providers.content import FunctionCallPart
from providers.errors import AdkError
from supervision import SyncPool, Task, TaskBusy, is_fenced_thread
from supervision.aio import wait_task

_MAX_IDLE_SHARES = 4096
"""Shares of agents with nothing in the pool are forgotten past this many agents."""


class AgentShares:
    """One agent's shares of the task pool: ``tools`` and ``callbacks``."""

    __slots__ = ("callbacks", "tools")

    def __init__(self, name: str, limit: int) -> None:
        self.tools = SyncPool.Share(f"{name} tools", limit)
        self.callbacks = SyncPool.Share(f"{name} callbacks", limit)

    def set_limit(self, limit: int) -> None:
        self.tools.limit = self.callbacks.limit = limit

    def idle(self) -> bool:
        return all(
            stats["active"] == 0 and stats["waiting"] == 0
            for stats in (self.tools.stats(), self.callbacks.stats())
        )


_shares: dict[str, AgentShares] = {}
_shares_lock = threading.Lock()


def agent_shares(name: str, limit: int) -> AgentShares:
    """The agent's shares (made on first use; `limit` applies from now on)."""
    with _shares_lock:
        shares = _shares.get(name)
        if shares is None:
            if len(_shares) >= _MAX_IDLE_SHARES:
                for other in [key for key, value in _shares.items() if value.idle()]:
                    del _shares[other]
            shares = _shares[name] = AgentShares(name, limit)
        elif shares.tools.limit != limit:
            shares.set_limit(limit)
        return shares


def agent_thread_stats(name: str) -> dict[str, int]:
    """An agent's use of the task pool: ``tool_threads`` / ``callback_threads`` (in the
    pool now), ``*_abandoned`` (of those, stopped, e.g. past the tool timeout, while the
    thread still runs), ``*_waiting`` (waiting for a slot, holding no thread),
    ``capacity_exhausted`` (calls refused so far) and ``max_tool_threads``."""
    with _shares_lock:
        shares = _shares.get(name)
    if shares is None:
        return {
            "max_tool_threads": check_max_tool_threads(None),
            "tool_threads": 0,
            "tool_threads_abandoned": 0,
            "tool_threads_waiting": 0,
            "callback_threads": 0,
            "callback_threads_abandoned": 0,
            "callback_threads_waiting": 0,
            "capacity_exhausted": 0,
        }
    tools, callbacks = shares.tools.stats(), shares.callbacks.stats()
    return {
        "max_tool_threads": tools["limit"],
        "tool_threads": tools["active"],
        "tool_threads_abandoned": tools["abandoned"],
        "tool_threads_waiting": tools["waiting"],
        "callback_threads": callbacks["active"],
        "callback_threads_abandoned": callbacks["abandoned"],
        "callback_threads_waiting": callbacks["waiting"],
        "capacity_exhausted": tools["refused"] + callbacks["refused"],
    }


class TurnContext:
    def __init__(
        self, spec: AgentSpec, scope: Scope, invocation_id: str, options: TurnOptions
    ) -> None:
        self.spec = spec
        self.scope = scope
        self.invocation_id = invocation_id
        self.ancestry = options.ancestry
        self.global_instruction = options.global_instruction or spec.global_instruction
        self.state = MappingProxyType(dict(options.state))
        self.provider_config: Mapping[str, Any] = spec.provider_config
        self.options = options
        self.llm_calls = 0
        self.tool_failures: dict[str, int] = {}
        """Failed results per tool in this turn (``retry_attempt`` of ``on_tool_error``)."""
        self.shares = agent_shares(spec.name, spec.max_tool_threads)
        # this runs inside the turn's task: `off_loop` in it or in its parallel tool
        # tasks (tools, approval checks, instructions) finds the agent's tools share
        Task.bind_share(self.shares.tools)

    def _observe(self, kind: str, value: Any, metadata: Any) -> None:
        """Report a step: ("model", Content, metadata), ("tool", Content, None) or
        ("delta", frame, None). A killed turn's steps go nowhere."""
        observer = self.options.observer
        if observer is not None and not is_fenced_thread():
            observer(kind, value, metadata)

    async def _callback(self, hook: str, ctx: Any, value: Any) -> Any:
        """A user callback, if the agent has one for `hook`, on a pool thread: its
        replacement value or None (see `callbacks.run_callback`). `ctx` None is the
        turn's callback context, built only when there is a callback to hand it to."""
        if self.spec.callbacks.get(hook) is None:
            return None
        if ctx is None:
            ctx = self._callback_context()
        return await off_loop_in(self.shares.callbacks, run_callback, self.spec, hook, ctx, value)

    def _wants(self, hook: str) -> bool:
        """Does a global plugin implement `hook`? A phase's value is built only then."""
        pipeline = self.options.plugins
        return pipeline is not None and pipeline.implements(hook)

    async def _global(
        self, hook: str, value: Any, check: Check | None = None, **context: Any
    ) -> PhaseOutcome | None:
        """The Runner's global plugins for `hook` (before the agent's own callback):
        None when no plugin implements it, else the phase's outcome; a halt or a
        closed failure raises `AdkError` (the turn fails with it)."""
        pipeline = self.options.plugins
        if pipeline is None or not pipeline.implements(hook):
            return None
        ctx = {**self._callback_context(), **context}
        outcome = await pipeline.arun(hook, ctx, value, check)
        outcome.settle()
        return outcome

    async def notify_plugins(self, outcome: TurnOutcome) -> TurnOutcome:
        """The turn has ended: a failed one goes to the global ``on_agent_error``
        plugins (a notification: whatever they do, `outcome` stands). The run-level
        ``after_run`` and ``on_run_error`` are the Runner's, once the end is stored."""
        if self.options.plugins is None or is_fenced_thread():
            return outcome
        if isinstance(outcome, TurnFailed):
            try:
                await self._global("on_agent_error", plugin_checks.reason_value(outcome.reason))
            except AdkError:  # a notification never changes the outcome
                pass
        return outcome

    def _callback_context(self) -> dict[str, Any]:
        return {
            "agent_name": self.spec.name,
            "invocation_id": self.invocation_id,
            "app_name": self.scope.app_name,
            "user_id": self.scope.user_id,
            "session_id": self.scope.session_id,
        }

    def _context(self, call: FunctionCallPart) -> ToolContext:
        return PluginToolContext(
            app_name=self.scope.app_name,
            user_id=self.scope.user_id,
            session_id=self.scope.session_id,
            invocation_id=self.invocation_id,
            call_id=call.id,
            agent_name=self.spec.name,
            state=self.state,
            ancestry=(*self.ancestry, self.spec.name),
            global_instruction=self.global_instruction,
            plugins=self.options.plugins,
        )


@dataclass(frozen=True)
class PluginToolContext(ToolContext):
    """A tool's context inside a turn, carrying the Runner's plugins so a sub-agent
    (`AgentTool`) runs under them too; tools see an ordinary `ToolContext`."""

    plugins: Pipeline | None = None


async def off_loop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run sync user code (a tool, a callback) in a pool task owned by this turn, and
    await it without holding a thread; an exception it raises is raised here as is.
    The task dies with the turn (a killed turn's tool is fenced). It counts against
    the turn's agent's tools share: a share held by hung threads is
    ``capacity_exhausted``, a full pool ``busy`` (both an `AdkError`, raised before
    `fn` runs)."""
    return await _off_loop(Task.current_share(), fn, args, kwargs)


async def off_loop_in(
    share: SyncPool.Share | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """`off_loop`, counted against `share` (an `AgentShares` member)."""
    return await _off_loop(share, fn, args, kwargs)


def start_off_loop(
    share: SyncPool.Share | None,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    deadline: float | None = None,
) -> Task:
    """Start `off_loop`'s pool task, counted against `share`, with an optional absolute
    `deadline`; awaiting it (`wait_task`) gives ``("ok", result)`` or ``("error",
    exception)``. ``capacity_exhausted`` and ``busy`` are raised as `off_loop` raises
    them."""
    try:
        return Task.start(_caught, fn, args, kwargs, share=share, deadline=deadline)
    except TaskBusy as busy:
        if busy.reason == "capacity_exhausted":
            raise AdkError(
                "capacity_exhausted", "this agent's task threads are held by hung calls"
            ) from None
        raise AdkError("busy", "the pool for tools and callbacks is full") from None


async def _off_loop(
    share: SyncPool.Share | None,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    task = start_off_loop(share, fn, args, kwargs)
    kind, value = await wait_task(task)
    if kind == "error":
        raise value
    return value


def _caught(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return "ok", fn(*args, **kwargs)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as error:  # SystemExit too: crosses as a value, re-raised there
        return "error", error
