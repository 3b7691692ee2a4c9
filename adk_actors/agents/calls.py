"""Asking an agent process: the low-level calls, by agent name.

Everything that talks to a running agent by name goes through `ask`: it resolves the
registered name at call time (so a restarted agent is found) and turns the kernel's
failures and the agent's ``("error", reason)`` answers into `AdkError`s. `agent_info`
is what tree validation asks; the facade (`api.py`) offers the same requests to users,
for an `AgentRef` or a name.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from adk_actors.agents.messages import Info, Invoke
from adk_actors.agents.names import registered_name
from adk_actors.agents.scope import Scope, TurnOptions, as_content, check_ancestry
from adk_actors.plugins import Pipeline
from providers.content import Content
from providers.errors import AdkError
from supervision import CallTimeout, ProcessExit, call, self_pid


def ask(name: str, request: Any, timeout: float | None) -> Any:
    """Call agent `name` with `request`; its value, or `AdkError` (``agent_call_timeout``,
    ``noproc``, ``agent_exited``, or the reason the agent answered)."""
    try:
        status, value = call(registered_name(name), request, timeout=timeout)
    except CallTimeout:
        raise AdkError(
            "agent_call_timeout", f"no answer within {timeout} s; the agent goes on"
        ) from None
    except ProcessExit as exit_:
        raise AdkError(
            "noproc" if exit_.reason == "noproc" else "agent_exited", "the agent is not running"
        ) from None
    if status == "ok":
        return value
    raise AdkError(value, "the turn failed")


def agent_info(name: str, timeout: float = 5.0) -> dict[str, Any]:
    """Agent `name`'s status counters: active and queued turns, history length, tools."""
    info: dict[str, Any] = ask(name, Info(), timeout)
    return info


def invoke(
    name: str,
    message: str | Content,
    scope: Scope,
    timeout: float | None,
    *,
    ancestry: tuple[str, ...] = (),
    global_instruction: str | None = None,
    state: Mapping[str, Any] | None = None,
    plugins: Pipeline | None = None,
) -> str | Content:
    """A fresh invocation of agent `name` in the lane of `scope` (see `adk.invoke`).
    A delegation chain that is too deep, or that already holds `name`, is refused
    here (`check_ancestry`): the target is never asked, so its provider never runs."""
    chain = check_ancestry(name, ancestry)
    options = TurnOptions(
        chain, global_instruction, MappingProxyType(dict(state or {})), plugins=plugins
    )
    answer: str | Content = ask(
        name,
        Invoke(as_content(message), scope, self_pid(), options, contextvars.copy_context()),
        timeout,
    )
    return answer
