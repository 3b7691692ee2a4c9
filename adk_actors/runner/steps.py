"""The events an invocation stores, built from its turn's steps and its end.

Streamed deltas (`Partials`) wait for their model round to end: a round that ends
in tool calls stores them before its calls; the final round's deltas wait for the
final-output policy, and a round over `max_stream_output_bytes` stores none.
"""

from __future__ import annotations

from typing import Any

import msgspec

from adk_actors.events import Event, EventActions, EventError
from adk_actors.outcomes import OUTCOME_TYPES, Outcome
from providers import content as content_codec
from providers.content import Content

RUNNER_AUTHOR = "runner"
"""The author of what the runtime itself records in a conversation: a pause, and a
resume's claim (never the user: a resume stores no user-authored event)."""
_STATES = {kind: kind.__struct_config__.tag for kind in OUTCOME_TYPES}


class Partials:
    """One model round's streamed deltas, as partial events not yet stored."""

    __slots__ = ("events", "streamed")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.streamed = 0

    def add(self, author: str, invocation_id: str, delta: Any, limit: int) -> bool:
        """Keep one delta (text or a Content frame); False once the round is over `limit`."""
        if isinstance(delta, Content):
            frame = delta
            self.streamed += len(content_codec.encode(delta))
        else:
            frame = content_codec.from_text(delta, role="model")
            self.streamed += len(delta.encode())
        if self.streamed > limit:
            return False
        self.events.append(Event.new(author, invocation_id, frame, partial=True))
        return True

    def take(self) -> list[Event]:
        """The round's partial events, to store now; the next round starts empty."""
        events, self.events, self.streamed = self.events, [], 0
        return events

    def clear(self) -> None:
        self.events, self.streamed = [], 0


def has_calls(value: Any) -> bool:
    return isinstance(value, Content) and bool(value.function_calls())


def final_event(spec: Any, invocation_id: str, output: Any, content: Any, metadata: Any) -> Event:
    """The final answer; an agent's `output_key` is committed in the same event."""
    delta: dict[str, Any] = {}
    if spec.output_key is not None:
        delta[spec.output_key] = output.text_value() if isinstance(output, Content) else output
    return Event.new(
        spec.name,
        invocation_id,
        content,
        is_final=True,
        provider_metadata=metadata,
        actions=EventActions(state_delta=delta),
    )


def error_event(state: Any, reason: Any, message: str) -> Event:
    """An error end (a failure, a cancel) by the invocation's agent."""
    author = state.spec.name if state.spec is not None else state.runner.agent_name
    return Event.new(author, state.invocation_id, error=EventError(reason=reason, message=message))


def outcome_builtins(outcome: Outcome | None) -> Any:
    """An outcome as JSON-safe builtins (a reason that is not JSON-safe is shown by repr)."""
    if outcome is None:
        return None
    try:
        return msgspec.to_builtins(outcome)
    except (TypeError, msgspec.EncodeError):
        return {"type": _STATES[type(outcome)], "reason": repr(getattr(outcome, "reason", None))}
