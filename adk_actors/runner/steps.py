"""The events an invocation stores, built from its turn's steps and its end.

Streamed deltas (`Partials`) wait for their model round to end: a round that ends
in tool calls stores them before its calls; the final round's deltas wait for the
final-output policy, and a round over `max_stream_output_bytes` stores none. A
round stores at most `max_partial_events` partial events: past that many deltas,
adjacent ones are coalesced (pairwise, so each stored partial holds about as many
deltas as the next), never dropped: the stored partials of a round, in order, hold
exactly its streamed text and parts.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from adk_actors.events import Event, EventActions, EventError
from adk_actors.outcomes import OUTCOME_TYPES, Outcome
from adk_actors.runner.options import DEFAULT_MAX_PARTIAL_EVENTS
from providers import content as content_codec
from providers.content import Content, Part, TextPart

RUNNER_AUTHOR = "runner"
"""The author of what the runtime itself records in a conversation: a pause, and a
resume's claim (never the user: a resume stores no user-authored event)."""
_STATES = {kind: kind.__struct_config__.tag for kind in OUTCOME_TYPES}

Frame = str | Content
"""A streamed delta: text (``streaming_mode="text"``) or a content frame."""


class Partials:
    """One model round's streamed deltas, kept as at most `max_events` chunks of
    adjacent deltas until the round ends (then `take` makes one partial event of each).

    A chunk closes after `per_chunk` deltas; when a delta finds `max_events` chunks
    closed, they are merged pairwise and `per_chunk` doubles. So however many deltas come (200,000
    one-byte ones, say) a round stores at most `max_events` events, each built once,
    and a round of at most `max_events` deltas stores one event per delta."""

    __slots__ = ("_chunks", "_open", "_per_chunk", "max_events", "streamed")

    def __init__(self, max_events: int = DEFAULT_MAX_PARTIAL_EVENTS) -> None:
        self.max_events = max_events
        self.streamed = 0
        self._chunks: list[list[Frame]] = []
        self._open: list[Frame] = []
        self._per_chunk = 1

    def add(self, author: str, invocation_id: str, delta: Any, limit: int) -> bool:
        """Keep one delta (text or a Content frame); False once the round is over `limit`."""
        if isinstance(delta, Content):
            self.streamed += len(content_codec.encode(delta))
        else:
            self.streamed += len(delta.encode())
        if self.streamed > limit:
            return False
        if len(self._open) >= self._per_chunk:
            self._chunks.append(self._open)
            self._open = []
        if not self._open and len(self._chunks) >= self.max_events:  # no room for another
            chunks = self._chunks
            if len(chunks) == 1:  # max_events 1: one chunk that keeps growing
                self._open, self._chunks, self._per_chunk = chunks[0], [], sys.maxsize
            else:
                self._chunks = [
                    chunks[i] + chunks[i + 1] if i + 1 < len(chunks) else chunks[i]
                    for i in range(0, len(chunks), 2)
                ]
                self._per_chunk *= 2
        self._open.append(delta)
        return True

    def take(self, author: str, invocation_id: str) -> list[Event]:
        """The round's partial events, to store now; the next round starts empty."""
        chunks = [*self._chunks, self._open] if self._open else self._chunks
        self.clear()
        return [Event.new(author, invocation_id, _joined(chunk), partial=True) for chunk in chunks]

    def clear(self) -> None:
        self._chunks, self._open, self._per_chunk, self.streamed = [], [], 1, 0


def _joined(frames: list[Frame]) -> Content:
    """One content of adjacent deltas: text joined; frames' parts in order, adjacent
    plain text merged. Each delta was checked when it came; so is the whole, by size
    (`max_stream_output_bytes`), so it is built without checking again."""
    if all(isinstance(frame, str) for frame in frames):
        return Content("model", (TextPart("".join(frames)),))  # type: ignore[arg-type]
    if len(frames) == 1 and isinstance(frames[0], Content):
        return frames[0]
    parts: list[Part] = []
    for frame in frames:
        for part in (TextPart(frame),) if isinstance(frame, str) else frame.parts:
            if _plain(part) and parts and _plain(parts[-1]):
                part = TextPart(parts.pop().text + part.text)  # type: ignore[union-attr]
            parts.append(part)
    return Content("model", tuple(parts))


def _plain(part: Any) -> bool:
    return isinstance(part, TextPart) and not part.thought and part.thought_signature is None


def has_calls(value: Any) -> bool:
    return isinstance(value, Content) and bool(value.function_calls())


def is_final_answer(kind: str, value: Any) -> bool:
    """A turn's step that is its final answer: a model step without calls. The one
    place this rule lives: the turn's observer keeps such a step in `FinalAnswer`
    (not a message), and the server stores it only at the end (`final_event`)."""
    return kind == "model" and not has_calls(value)


class FinalAnswer:
    """The turn's final answer, ``(content, metadata)`` in `value`, kept for the end.

    The turn's observer writes it on the turn's thread (`turn_call`), the server reads
    it once the turn's `TaskResult` has come; a holder of its own, so the turn never
    holds the server's state (a killed server's state must be freed by reference
    counting, which ends its span)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: tuple[Any, Any] = (None, None)


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
