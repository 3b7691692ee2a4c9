"""Server-sent events for the A2A client: the framing (``data:`` lines joined, ``id:``,
comments and unknown fields skipped; CRLF, CR and LF line ends) decoded incrementally
from the bounded body, and the rules of an A2A stream: event ids (when the server sends
them) non-negative integers strictly increasing, at most ``max_events`` events, the
first a ``task`` or ``message``, then task snapshots, status and artifact updates."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from providers.errors import AdkError

INVALID = "a2a_invalid_response"
MAX_ID_CHARS = 20
_FIRST = ("task", "message")
_LATER = ("task", "statusUpdate", "artifactUpdate")
"""After the first event a task snapshot may come again (the a2a-sdk servers and a
replay from Last-Event-ID send them); a message only ever comes first (and ends it)."""
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its ``data`` (lines joined by LF) and its id, if it had one."""

    data: str
    event_id: str | None


@dataclass
class SseDecoder:
    """Bytes in, whole events out (`feed`); a partial event at the end is dropped."""

    pending: bytearray = field(default_factory=bytearray)
    data: list[str] = field(default_factory=list)
    event_id: str | None = None
    saw_cr: bool = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events `chunk` completes. Only `chunk` is searched for line ends (the
        partial line before it waits in `pending`), so decoding is linear in the input
        however a long line is split."""
        if self.saw_cr and chunk.startswith(b"\n"):  # the LF of a CRLF split across chunks
            chunk = chunk[1:]
        self.saw_cr = False
        events: list[SseEvent] = []
        start = 0
        for end in _LINE_END.finditer(chunk):
            piece = chunk[start : end.start()]
            if self.pending:
                self.pending += piece
                piece = bytes(self.pending)
                self.pending.clear()
            try:
                line = piece.decode("utf-8")
            except UnicodeDecodeError:
                raise AdkError((INVALID, "sse_encoding"), "an SSE stream is UTF-8") from None
            start = end.end()
            self.saw_cr = end.group() == b"\r" and start == len(chunk)
            event = self._line(line)
            if event is not None:
                events.append(event)
        self.pending += chunk[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self.data:
                self.event_id = None
                return None
            event = SseEvent("\n".join(self.data), self.event_id)
            self.data, self.event_id = [], None
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self.data.append(value)
        elif name == "id":
            self.event_id = value
        return None  # "event", "retry" and unknown fields carry nothing for A2A


@dataclass
class StreamRules:
    """Checks each decoded stream result (a ``StreamResponse`` JSON object) in order."""

    max_events: int
    count: int = 0
    last_seq: int | None = None

    def sequence(self, event_id: str | None) -> int | None:
        """The event's sequence number; ids must increase strictly when present."""
        if event_id is None or event_id == "":
            return None
        if len(event_id) > MAX_ID_CHARS or not (event_id.isascii() and event_id.isdigit()):
            raise AdkError((INVALID, "sse_id"), "an SSE event id is a non-negative integer")
        seq = int(event_id)
        if self.last_seq is not None and seq <= self.last_seq:
            raise AdkError((INVALID, "sse_order"), "SSE event ids must increase")
        self.last_seq = seq
        return seq

    def admit(self, result: dict[str, Any]) -> None:
        """Count the event and check its position (first a task or message)."""
        self.count += 1
        if self.count > self.max_events:
            raise AdkError("a2a_response_too_large", "the stream passed max_stream_events")
        kinds = _FIRST if self.count == 1 else _LATER
        if not any(kind in result for kind in kinds):
            raise AdkError(
                (INVALID, "stream_order"),
                "a stream starts with a task or message, then task snapshots, status and "
                "artifact updates",
            )


def ends_stream(result: dict[str, Any], terminal_or_interrupted: frozenset[str]) -> bool:
    """Is this event the last one the server sends (a message, or a task put in a
    terminal or interrupted state)?"""
    if "message" in result:
        return True
    task = result.get("task") or result.get("statusUpdate")
    if isinstance(task, dict):
        status = task.get("status")
        return isinstance(status, dict) and status.get("state") in terminal_or_interrupted
    return False
