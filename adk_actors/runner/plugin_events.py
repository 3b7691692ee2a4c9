"""The global ``on_event`` plugins: each step's event, before it is stored.

A plugin sees the event as JSON (``msgspec.to_builtins``). An amendment (or an early
return) is accepted only when it keeps what makes the event durable: its id,
invocation id, author, actions (state delta, pauses, continuations), error, partial
and final flags and the kind of its content (present or not, its role, its parts'
types); a final event's content is what the output contract accepted and cannot
change at all. Anything else is an ``invalid_amendment`` under the plugin's failure
policy. A halt, or a closed failure, fails the invocation with its reason.

The hooks run from the invocation server, each in its own task with its deadline:
the server waits for them (at most the sum of those deadlines) only when some plugin
implements ``on_event``. Meanwhile it answers no status, cancel or wait (a known
limit, documented in docs/plugins.md): keep these hooks' timeouts short. Every hook
of an invocation sees the same context (`context`): its app, user, session,
invocation, agent and run ids.
"""

from __future__ import annotations

from typing import Any

import msgspec

from adk_actors.events import Event
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome
from adk_actors.plugins import PhaseKind, Pipeline
from adk_actors.runner.state import InvocationState
from providers.errors import AdkError

PRESERVED = ("id", "invocation_id", "author", "actions", "partial", "is_final", "error")


def context(state: InvocationState) -> dict[str, Any]:
    """What the plugins are told of the invocation they see."""
    request = state.request
    return {
        "app_name": request.runner.app_name,
        "user_id": request.user_id,
        "session_id": request.session_id,
        "invocation_id": state.invocation_id,
        "agent_name": state.spec.name,
        "run_id": request.run.run_id if request.run is not None else None,
    }


def on_event(pipeline: Pipeline, event: Event, ctx: dict[str, Any]) -> Event:
    """`event` as the plugins leave it; raises `AdkError` on a halt or a closed
    failure."""
    if not pipeline.implements("on_event"):
        return event
    outcome = pipeline.run("on_event", ctx, msgspec.to_builtins(event), _check(event))
    value = outcome.settle()
    if outcome.kind is PhaseKind.CONTINUE:
        return event
    return msgspec.convert(value, Event)


def notify_run_end(pipeline: Pipeline, ctx: dict[str, Any], outcome: Outcome) -> None:
    """``after_run`` for a completed run, ``on_run_error`` for a failed or cancelled
    one: notifications, so whatever they do, the outcome stands."""
    value: Any
    match outcome:
        case Completed(output=output):
            hook, value = "after_run", output
        case Failed(reason=reason) | Cancelled(reason=reason):
            hook, value = "on_run_error", {"reason": reason_tag(reason)}
        case _:
            return
    if pipeline.implements(hook):
        pipeline.run(hook, ctx, value)


def reason_tag(reason: Any) -> str:
    """A failure as a notification sees it: its structural tag only."""
    head = reason[0] if isinstance(reason, tuple) and reason else reason
    return str(head)[:200]


def _check(original: Event) -> Any:
    def check(tag: str, value: Any) -> Any:
        try:
            amended = msgspec.convert(value, Event)
        except msgspec.ValidationError:
            raise AdkError("invalid_amendment", "an event amendment is an event") from None
        if any(getattr(amended, name) != getattr(original, name) for name in PRESERVED):
            raise AdkError("invalid_amendment", "an amendment keeps the event's identity")
        if _kind(amended) != _kind(original):
            raise AdkError("invalid_amendment", "an amendment keeps the content's kind")
        if original.is_final and amended.content != original.content:
            raise AdkError("invalid_amendment", "a final answer cannot be rewritten")
        return msgspec.to_builtins(amended)

    return check


def _kind(event: Event) -> Any:
    if event.content is None:
        return None
    return event.content.role, tuple(type(part).__name__ for part in event.content.parts)
