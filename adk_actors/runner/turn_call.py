"""What an invocation server runs off its own process: its turn, and its history read.

`turn_call` is the turn an open invocation starts in its `Task`: `run_turn` for a
fresh invocation, `resume_turn` for a resumed one, with options that bring every step
(`TurnStep`) and every policy audit event (`AuditStep`) back to the server as
messages, so only the server ever writes the session. The one step that is not a
message is the final answer (`steps.is_final_answer`), which the server stores only
once the turn's result has come: the turn keeps it in a holder the server's state
shares (`InvocationState.final`) just before it ends, and the `TaskResult` sent
after it carries it across. `invocation_pool` is where a fresh invocation's history
read runs when its context policy runs user code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adk_actors.agents.scope import Scope, TurnOptions
from adk_actors.agents.turn import resume_turn, run_turn
from adk_actors.runner import steps
from adk_actors.runner.guard import Guard
from adk_actors.runner.messages import AuditStep, TurnStep
from adk_actors.runner.request import Fresh
from adk_actors.runner.state import InvocationState
from supervision import Pid, SyncPool, self_pid, send, shared_pool


def turn_call(
    state: InvocationState, history: list[Any], visible: dict[str, Any]
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The turn's function and its arguments; called by the server it reports to."""
    spec = state.spec
    request = state.request
    runner = request.runner
    work = request.work
    inv = state.invocation_id
    me = self_pid()
    guard = Guard(runner.runtime_policy, inv, lambda event: send(me, AuditStep(event)))
    options = TurnOptions(
        state=visible,
        observer=_observer(state, me),
        max_llm_calls=runner.max_llm_calls,
        max_tool_rounds=runner.max_tool_rounds,
        streaming=runner.streaming_mode,
        pausable=True,
        before_request=runner.context_policy.check_request,
        tool_gate=guard.tool_call,
        result_gate=guard.tool_result,
        plugins=runner.plugins or None,
        plugin_run=True,
        own_span=False,  # the invocation server owns the invocation's span
    )
    scope = Scope(runner.app_name, request.user_id, request.session_id)
    turn: Callable[..., Any]
    args: tuple[Any, ...]
    if isinstance(work, Fresh):
        turn, args = run_turn, (spec, history, work.message, scope, inv, options)
    else:
        turn = resume_turn
        args = (spec, work.history, work.contents, work.continuation, work.answer)
        args = (*args, scope, inv, options)
    return turn, args


def _observer(state: InvocationState, server: Pid) -> Callable[[str, Any, Any], None]:
    """Where the turn reports its steps (on the turn's thread): a message to `server`
    each, but the final answer. That one is read by the server only after the turn's
    `TaskResult`, which the kernel delivers after this write, so it is kept in
    `state.final` (a `steps.FinalAnswer`) at once (the last one wins, as with the
    messages), saving a message and a dispatch per invocation. A killed turn reports
    nothing (`_observe` is fenced), and an ended server never reads it."""

    final = state.final  # the holder only: the turn never holds the server's state

    def observe(kind: str, value: Any, metadata: Any) -> None:
        if steps.is_final_answer(kind, value):
            final.value = (value, metadata)
        else:
            send(server, TurnStep(kind, value, metadata))

    return observe


def invocation_pool() -> SyncPool:
    """Turn tasks' own threads (`ADK_INVOCATION_THREADS`, default 256): a sync turn
    waits for its model, and must never starve the default pool that parallel tool
    calls run on."""
    return shared_pool("adk.invocations", "ADK_INVOCATION_THREADS", 256, 10_000)
