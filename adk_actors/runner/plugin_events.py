"""The Runner's plugins at the invocation server: ``on_event`` before each step is
stored, ``after_run`` / ``on_run_error`` once it has ended.

A plugin sees the event as JSON (``msgspec.to_builtins``). An amendment (or an early
return) is accepted only when it keeps what makes the event durable: its id,
invocation id, author, actions (state delta, pauses, continuations), error, partial
and final flags and the kind of its content (present or not, its role, its parts'
types); a final event's content is what the output contract accepted and cannot
change at all. Anything else is an ``invalid_amendment`` under the plugin's failure
policy. A halt, or a closed failure, fails the invocation with its reason.

Neither kind blocks the server. `amend` is driven hook by hook by the server's
messages, each hook in a task the server owns (the server stays responsive; steps
wait in order meanwhile; a cancel kills the running hook). `RunEnd` is announced before the terminal is published and sent
after, to the plugin notifier (`adk_actors.plugins.notifier`), which runs the hooks
off the server: the outcome never waits for them. Every hook of an invocation sees
the same context (`context`): its app, user, session, invocation, agent and run ids.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import msgspec

from adk_actors.events import Event
from adk_actors.observability import tracing
from adk_actors.observability.tracing import OpenSpan
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome
from adk_actors.plugins import PhaseKind, PhaseSteps, Pipeline, notifier
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


def has_on_event(pipeline: Pipeline) -> bool:
    """Does any plugin see the events (else a step is stored at once)?"""
    return bool(pipeline) and pipeline.implements("on_event")


def amend(pipeline: Pipeline, event: Event, ctx: dict[str, Any]) -> PhaseSteps:
    """The ``on_event`` phase of `event`, driven by the server's messages (`amended`
    once it has ended)."""
    return pipeline.steps("on_event", ctx, msgspec.to_builtins(event), _check(event))


def amended(event: Event, phase: PhaseSteps) -> tuple[str, Any]:
    """`event` as the ended phase left it, ``("ok", event)``, or ``("error", reason)``
    on a halt or a closed failure."""
    outcome = phase.outcome()
    try:
        value = outcome.settle()
    except AdkError as error:
        return ("error", error.reason)
    if outcome.kind is PhaseKind.CONTINUE:
        return ("ok", event)
    return ("ok", msgspec.convert(value, Event))


class RunEnd(NamedTuple):
    """A run-end notification, announced (`ticket`) before the end is published."""

    ticket: int
    pipeline: Pipeline
    hook: str
    ctx: dict[str, Any]
    value: Any
    scope: notifier.Scope | None

    def send(self) -> None:
        """To the plugin notifier, without waiting (after the end is published)."""
        notifier.send(self.ticket, self.pipeline, self.hook, self.ctx, self.value, self.scope)


def run_end(
    pipeline: Pipeline, ctx: dict[str, Any], outcome: Outcome, span: OpenSpan
) -> RunEnd | None:
    """``after_run`` for a completed run, ``on_run_error`` for a failed or cancelled
    one (None when no plugin implements it): notifications, so whatever they do, the
    outcome stands. Their hooks run in the run's trace, under `span` (still open)."""
    value: Any
    match outcome:
        case Completed(output=output):
            hook, value = "after_run", output
        case Failed(reason=reason) | Cancelled(reason=reason):
            hook, value = "on_run_error", {"reason": reason_tag(reason)}
        case _:
            return None
    if not pipeline or not pipeline.implements(hook):
        return None
    scope = _trace_scope(span)  # before the ticket: nothing may raise between announce and send
    return RunEnd(notifier.announce(), pipeline, hook, ctx, value, scope)


def _trace_scope(span: OpenSpan) -> notifier.Scope | None:
    """Makes `span`'s context current again in the notifier (None without a span)."""
    with span.activate():
        parent = tracing.current()
    return None if parent is None else partial(tracing.remote_parent, parent)


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
