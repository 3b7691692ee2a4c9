"""What every part of a turn shares: who runs it, its options, its callbacks, its steps.

`TurnContext` is the base of the turn worker (`turn._Turn`, through
`tool_round.ToolRound`): the agent's spec, the invocation's scope and options, the
contexts handed to callbacks and tools, and `observe`, which reports a step to
whoever runs the turn (the Runner stores each as an event). `off_loop` runs sync user
code (a tool, a callback, an approval check) in a pool task owned by the turn, never on
the reactor the turn's coroutine runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from adk_actors.agents.callbacks import run_callback
from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.spec import AgentSpec
from adk_actors.tools import ToolContext
from providers.content import FunctionCallPart
from providers.errors import AdkError
from supervision import Task, TaskBusy, is_fenced_thread
from supervision.aio import wait_task


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

    def _observe(self, kind: str, value: Any, metadata: Any) -> None:
        """Report a step: ("model", Content, metadata), ("tool", Content, None) or
        ("delta", frame, None). A killed turn's steps go nowhere."""
        observer = self.options.observer
        if observer is not None and not is_fenced_thread():
            observer(kind, value, metadata)

    async def _callback(self, hook: str, ctx: Any, value: Any) -> Any:
        """A user callback, if the agent has one for `hook`, on a pool thread: its
        replacement value or None (see `callbacks.run_callback`)."""
        if self.spec.callbacks.get(hook) is None:
            return None
        return await off_loop(run_callback, self.spec, hook, ctx, value)

    def _callback_context(self) -> dict[str, Any]:
        return {
            "agent_name": self.spec.name,
            "invocation_id": self.invocation_id,
            "app_name": self.scope.app_name,
            "user_id": self.scope.user_id,
            "session_id": self.scope.session_id,
        }

    def _context(self, call: FunctionCallPart) -> ToolContext:
        return ToolContext(
            app_name=self.scope.app_name,
            user_id=self.scope.user_id,
            session_id=self.scope.session_id,
            invocation_id=self.invocation_id,
            call_id=call.id,
            agent_name=self.spec.name,
            state=self.state,
            ancestry=(*self.ancestry, self.spec.name),
            global_instruction=self.global_instruction,
        )


async def off_loop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run sync user code (a tool, a callback) in a pool task owned by this turn, and
    await it without holding a thread; an exception it raises is raised here as is.
    The task dies with the turn (a killed turn's tool is fenced). A full pool is
    ``busy``."""
    try:
        task = Task.start(_caught, fn, args, kwargs)
    except TaskBusy:
        raise AdkError("busy", "the pool for tools and callbacks is full") from None
    kind, value = await wait_task(task)
    if kind == "error":
        raise value
    return value


def _caught(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as error:  # crosses as a value: the coroutine re-raises it
        return "error", error
