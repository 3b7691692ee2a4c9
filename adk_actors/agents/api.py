"""The agent half of the facade: `spawn_agent`, `prompt`, `delegate`, `invoke`, `stop_agent`.

An `AgentRef` names an agent; every call resolves the name at call time, so a ref
keeps working after the agent supervisor restarts the agent. An agent that crashes
more often than its own restart intensity allows (``restart_intensity`` in its config;
by default more than 3 restarts within 5 s) is *failed*: it is not restarted again,
nothing else is, `agent_info` reports ``status: "failed"`` with the last exit reason,
calls raise ``("agent_failed", kind)``, and its name is free for a new `spawn_agent`.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adk_actors.agents import calls
from adk_actors.agents.messages import Delegate, GetSpec, Info, Prompt
from adk_actors.agents.names import (
    agent_failure,
    check_agent_name,
    forget_failure,
    registered_name,
)
from adk_actors.agents.scope import Scope, TurnOptions, as_content
from adk_actors.agents.server import (
    DEFAULT_RESTART_INTENSITY,
    DEFAULT_RESTART_PERIOD,
    MAX_RESTART_INTENSITY,
    AgentLifeline,
)
from adk_actors.agents.spec import compile_spec
from adk_actors.agents.tree import validate_tree
from adk_actors.app import AGENT_SUPERVISOR, ensure_started
from adk_actors.tools import Tool
from providers.content import Content
from providers.errors import AdkError
from supervision import (
    ChildSpec,
    DynamicSupervisor,
    Pid,
    Ref,
    SupervisorError,
    cast,
    registered,
    self_pid,
    send,
    whereis,
)


@dataclass(frozen=True)
class AgentRef:
    """A handle on an agent by name. `pid` is the process serving it right now."""

    name: str

    @property
    def pid(self) -> Pid | None:
        return whereis(registered_name(self.name))

    @property
    def status(self) -> str:
        """``"running"``; ``"failed"`` once it used up its restart intensity (see
        `failure`); ``"not_running"`` otherwise (stopped, never spawned, or between a
        crash and its restart)."""
        if self.pid is not None:
            return "running"
        return "failed" if agent_failure(self.name) is not None else "not_running"

    @property
    def failure(self) -> dict[str, Any] | None:
        """A failed agent's record, as `agent_info` reports it (its ``reason`` is the
        last exit reason); None unless the agent is failed."""
        if self.pid is not None:
            return None
        failure = agent_failure(self.name)
        return None if failure is None else failure.view()

    def __repr__(self) -> str:
        return f"AgentRef({self.name!r})"


@dataclass(frozen=True)
class AgentResponse:
    """What `delegate` delivers: exactly one of `value` and `error` is set."""

    ref: Any
    agent: AgentRef
    value: str | Content | None = None
    error: AdkError | None = None


AgentLike = AgentRef | str


def _name(agent: AgentLike) -> str:
    return agent.name if isinstance(agent, AgentRef) else check_agent_name(agent)


RESTART_INTENSITY_KEY = "restart_intensity"


def spawn_agent(name: str, config: dict[str, Any], tools: Sequence[Tool] = ()) -> AgentRef:
    """Start an agent under the agent supervisor (transient: restarted after a crash).

    ``restart_intensity: {"intensity": 3, "period": 5.0}`` in `config` is the agent's own
    restart budget: more than `intensity` restarts (0..1000) within `period` seconds and
    the agent is failed instead of restarted. Spawning a failed agent's name starts it
    afresh.
    """
    config, budget = _split_restart_intensity(config)
    spec = compile_spec(name, config, tools)
    intensity, period = _restart_intensity(budget)
    ensure_started()
    if spec.sub_agents:
        validate_tree(name, spec.sub_agents)
    lifeline = AgentLifeline(spec, intensity, period)
    child = ChildSpec(name, lifeline, restart="transient")
    forget_failure(name)  # a failed agent of this name is replaced, or still holds nothing
    try:
        DynamicSupervisor.start_child(AGENT_SUPERVISOR, child)
    except SupervisorError as error:
        if isinstance(error.reason, tuple) and error.reason[:1] == ("already_started",):
            raise AdkError("already_exists", f"an agent named {name!r} is running") from None
        raise AdkError(
            ("agent_start_failed", str(error.reason)[:200]), "the agent did not start"
        ) from None
    return AgentRef(name)


def _split_restart_intensity(config: Any) -> tuple[Any, Any]:
    """`config` without ``restart_intensity`` (the spec passes unknown keys to the
    provider, which refuses them), and that key's value (None if absent)."""
    if (type(config) is not dict and not isinstance(config, Mapping)) or (
        RESTART_INTENSITY_KEY not in config
    ):
        return config, None
    rest = {key: value for key, value in config.items() if key != RESTART_INTENSITY_KEY}
    return rest, config[RESTART_INTENSITY_KEY]


def _restart_intensity(budget: Any) -> tuple[int, float]:
    """``{"intensity": 0..1000, "period": seconds in (0, 86400]}`` (either may be left
    out); ``("invalid_restart_intensity", field)`` otherwise."""
    if budget is None:
        return DEFAULT_RESTART_INTENSITY, DEFAULT_RESTART_PERIOD
    detail = "restart_intensity is {'intensity': restarts 0..1000, 'period': seconds in (0, 86400]}"
    if not isinstance(budget, Mapping) or set(budget) - {"intensity", "period"}:
        raise AdkError(("invalid_restart_intensity", "restart_intensity"), detail)
    intensity = budget.get("intensity", DEFAULT_RESTART_INTENSITY)
    if (
        isinstance(intensity, bool)
        or not isinstance(intensity, int)
        or not 0 <= intensity <= MAX_RESTART_INTENSITY
    ):
        raise AdkError(("invalid_restart_intensity", "intensity"), detail)
    period = budget.get("period", DEFAULT_RESTART_PERIOD)
    if isinstance(period, bool) or not isinstance(period, int | float) or not 0 < period <= 86_400:
        raise AdkError(("invalid_restart_intensity", "period"), detail)
    return intensity, float(period)


def stop_agent(agent: AgentLike) -> None:
    """Stop an agent: running and queued turns fail with ``agent_stopped``; the name is
    free again at once. Stopping a failed agent forgets its failure."""
    name = _name(agent)
    pid = whereis(registered_name(name))
    if pid is None:
        failure = agent_failure(name)
        if failure is not None and forget_failure(name, failure):
            return
        raise AdkError("not_found", "no such agent")
    try:
        DynamicSupervisor.terminate_child(AGENT_SUPERVISOR, pid)
    except SupervisorError as error:
        raise AdkError("not_found", f"no such agent ({error.reason})") from None
    forget_failure(name)  # stopped, not failed: a record of an earlier incarnation goes


def _ask(agent: AgentLike, request: Any, timeout: float | None) -> Any:
    name = _name(agent)
    try:
        return calls.ask(name, request, timeout)
    except AdkError as error:
        raise _failed(name, error) from None


def _failed(name: str, error: AdkError) -> AdkError:
    """``("agent_failed", kind)`` in place of ``noproc`` when the agent is failed."""
    if error.reason == "noproc":
        failure = agent_failure(name)
        if failure is not None:
            return failure.error()
    return error


def prompt(agent: AgentLike, message: str | Content, timeout: float = 60.0) -> str | Content:
    """One turn of the agent's conversation (FIFO per agent); text, or `Content` for media.

    Raises `AdkError` with the failure's reason (a provider error is never returned as
    a success string).
    """
    request = Prompt(as_content(message), self_pid(), TurnOptions(), contextvars.copy_context())
    return _ask(agent, request, timeout)  # type: ignore[no-any-return]


def invoke(
    agent: AgentLike,
    message: str | Content,
    scope: tuple[str, str, str] | Scope | None = None,
    timeout: float = 60.0,
    *,
    ancestry: tuple[str, ...] = (),
    global_instruction: str | None = None,
    state: Mapping[str, Any] | None = None,
) -> str | Content:
    """A fresh invocation (no conversation history) in the lane of `scope`
    (app_name, user_id, session_id); one lane runs one turn at a time. `state` is a
    read-only snapshot for instruction templates and tools; `ancestry` and
    `global_instruction` are carried across delegation by `AgentTool`."""
    name = _name(agent)
    try:
        return calls.invoke(
            name,
            message,
            _scope(scope),
            timeout,
            ancestry=ancestry,
            global_instruction=global_instruction,
            state=state,
        )
    except AdkError as error:
        raise _failed(name, error) from None


def delegate(
    agent: AgentLike,
    message: str | Content,
    reply_to: Any = None,
    ref: Any = None,
) -> Any:
    """Run a turn of the agent's conversation (the same FIFO as `prompt`) without
    waiting. With `reply_to` (a Pid, a `queue.Queue` or an `asyncio.Queue`), one
    `AgentResponse(ref, agent, value, error)` arrives there. Returns the correlation
    ref (a new `Ref` unless you pass one)."""
    name = _name(agent)
    ref = ref if ref is not None else Ref()
    respond = None if reply_to is None else _responder(reply_to, ref, AgentRef(name))
    if whereis(registered_name(name)) is None:
        raise _failed(name, AdkError("noproc", "the agent is not running"))
    caller = self_pid() if reply_to is not None else None
    request = Delegate(as_content(message), respond, caller, contextvars.copy_context())
    cast(registered_name(name), request)
    return ref


def agent_info(agent: AgentLike, timeout: float = 5.0) -> dict[str, Any]:
    """Status counters: ``status`` (``"running"``), restarts since spawn, active and
    queued turns, history length, completed, tools, and ``threads``: its use of the task
    pool (``tool_threads``, ``tool_threads_abandoned`` — stuck past a deadline —,
    ``capacity_exhausted``, ``max_tool_threads``, the same for callbacks). A failed agent answers its failure
    instead: ``{"name", "status": "failed", "reason", "restarts", "restart_intensity",
    "failed_at"}``, where ``reason`` is its last exit reason."""
    name = _name(agent)
    try:
        return calls.ask(name, Info(), timeout)  # type: ignore[no-any-return]
    except AdkError as error:
        failure = agent_failure(name) if error.reason == "noproc" else None
        if failure is None:
            raise
        return failure.view()


MAX_LISTED_AGENTS = 10_000


def list_agents(limit: int = MAX_LISTED_AGENTS) -> list[str]:
    """The names of the running agents, sorted, at most `limit` (1..10,000): read from
    the name registry, so no agent is asked anything and a busy one is listed too."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LISTED_AGENTS:
        raise AdkError("invalid_limit", f"limit is 1..{MAX_LISTED_AGENTS}")
    kind = registered_name("")[0]
    names = [
        name[1]
        for name in registered()
        if isinstance(name, tuple)
        and len(name) == 2
        and name[0] == kind
        and isinstance(name[1], str)
    ]
    return sorted(names)[:limit]


def agent_spec(agent: AgentLike, timeout: float = 10.0) -> Any:
    """The agent's compiled `AgentSpec`, as the running process holds it."""
    return _ask(agent, GetSpec(), timeout)


def _scope(scope: tuple[str, str, str] | Scope | None) -> Scope:
    if scope is None:
        return Scope()
    if isinstance(scope, Scope):
        return scope
    if (
        isinstance(scope, tuple)
        and len(scope) == 3
        and all(isinstance(part, str) for part in scope)
    ):
        return Scope(*scope)
    raise AdkError("invalid_scope", "scope is (app_name, user_id, session_id)")


def _responder(reply_to: Any, ref: Any, agent: AgentRef) -> Callable[[tuple[Any, ...]], None]:
    if isinstance(reply_to, asyncio.Queue):
        loop = asyncio.get_running_loop()

        def to_asyncio(outcome: tuple[Any, ...]) -> None:
            loop.call_soon_threadsafe(reply_to.put_nowait, _response(ref, agent, outcome))

        return to_asyncio
    if isinstance(reply_to, queue.Queue):
        return lambda outcome: reply_to.put_nowait(_response(ref, agent, outcome))
    if isinstance(reply_to, Pid):
        return lambda outcome: send(reply_to, _response(ref, agent, outcome))
    raise AdkError("invalid_reply_to", "reply_to is a Pid, a queue.Queue or an asyncio.Queue")


def _response(ref: Any, agent: AgentRef, outcome: tuple[Any, ...]) -> AgentResponse:
    status, value = outcome
    if status == "ok":
        return AgentResponse(ref, agent, value=value)
    return AgentResponse(ref, agent, error=AdkError(value, "the turn failed"))
