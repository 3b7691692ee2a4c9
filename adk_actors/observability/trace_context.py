"""Strict W3C Trace Context: `traceparent` and `tracestate`, parsed and formatted.

A header is accepted whole or refused whole with a `TraceContextError` (an `AdkError`
whose `reason` says which rule failed): malformed syntax, upper-case hex, a version
``ff``, an all-zero trace or parent id, a value past its size bound, a duplicated
`traceparent` header or a duplicated `tracestate` key. Nothing is partly accepted.
`TraceContext.child()` keeps the trace id, the sampled flag and the state, with a
fresh span id. `to_otel` / `from_otel` cross to OpenTelemetry's `SpanContext`.

Trace identifiers are correlation, never authorization.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace

from providers.errors import AdkError

MAX_TRACEPARENT_CHARS = 512
MAX_TRACESTATE_CHARS = 512
MAX_TRACESTATE_MEMBERS = 32
SAMPLED = 0x01

_HEX = re.compile(r"[0-9a-f]+")
_KEY = re.compile(
    r"(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
)
_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


class TraceContextError(AdkError):
    """A `traceparent` or `tracestate` refused whole. `reason` is a pair such as
    ``("invalid_traceparent", "all_zero_trace_id")``."""


def _refuse(header: str, why: str) -> TraceContextError:
    return TraceContextError((f"invalid_{header}", why), f"{header} refused: {why}")


@dataclass(frozen=True, slots=True)
class TraceState:
    """An ordered, duplicate-free list of ``(key, value)`` vendor entries."""

    entries: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        keys = [key for key, _ in self.entries]
        if len(keys) > MAX_TRACESTATE_MEMBERS:
            raise _refuse("tracestate", "too_many_members")
        if len(set(keys)) != len(keys):
            raise _refuse("tracestate", "duplicate_key")
        for key, value in self.entries:
            if not isinstance(key, str) or not _KEY.fullmatch(key):
                raise _refuse("tracestate", "invalid_key")
            if not isinstance(value, str) or not _VALUE.fullmatch(value):
                raise _refuse("tracestate", "invalid_value")
        if len(self.format()) > MAX_TRACESTATE_CHARS:
            raise _refuse("tracestate", "oversized")

    @classmethod
    def parse(cls, header: str | Sequence[str]) -> TraceState:
        """Parse one header value, or several (combined in order, as the spec says)."""
        values = [header] if isinstance(header, str) else list(header)
        if not all(isinstance(value, str) for value in values):
            raise _refuse("tracestate", "not_text")
        text = ",".join(values)
        if len(text) > MAX_TRACESTATE_CHARS:
            raise _refuse("tracestate", "oversized")
        entries: list[tuple[str, str]] = []
        for member in text.split(","):
            member = member.strip(" \t")
            if not member:
                continue  # empty list members are allowed and carry nothing
            key, sep, value = member.partition("=")
            if not sep:
                raise _refuse("tracestate", "malformed_member")
            entries.append((key, value))
        return cls(tuple(entries))

    def format(self) -> str:
        return ",".join(f"{key}={value}" for key, value in self.entries)

    def get(self, key: str) -> str | None:
        return next((value for found, value in self.entries if found == key), None)


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A parsed `traceparent` (version 00 fields) and its `tracestate`."""

    trace_id: str
    span_id: str
    flags: int = SAMPLED
    state: TraceState = field(default_factory=TraceState)

    def __post_init__(self) -> None:
        if not (isinstance(self.trace_id, str) and len(self.trace_id) == 32):
            raise _refuse("traceparent", "invalid_trace_id")
        if not _HEX.fullmatch(self.trace_id):
            raise _refuse("traceparent", "invalid_trace_id")
        if self.trace_id == _ZERO_TRACE:
            raise _refuse("traceparent", "all_zero_trace_id")
        if not (isinstance(self.span_id, str) and len(self.span_id) == 16):
            raise _refuse("traceparent", "invalid_parent_id")
        if not _HEX.fullmatch(self.span_id):
            raise _refuse("traceparent", "invalid_parent_id")
        if self.span_id == _ZERO_SPAN:
            raise _refuse("traceparent", "all_zero_parent_id")
        if type(self.flags) is not int or not 0 <= self.flags <= 0xFF:
            raise _refuse("traceparent", "invalid_flags")
        if not isinstance(self.state, TraceState):
            raise _refuse("tracestate", "not_a_trace_state")

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    @classmethod
    def parse(cls, traceparent: str, tracestate: str | Sequence[str] | None = None) -> TraceContext:
        """Parse a `traceparent` (and optionally its `tracestate`): both or neither."""
        if not isinstance(traceparent, str):
            raise _refuse("traceparent", "not_text")
        if len(traceparent) > MAX_TRACEPARENT_CHARS:
            raise _refuse("traceparent", "oversized")
        if len(traceparent) < 55:
            raise _refuse("traceparent", "malformed")
        version = traceparent[:2]
        if not _HEX.fullmatch(version) or traceparent[2:3] != "-":
            raise _refuse("traceparent", "malformed")
        if version == "ff":
            raise _refuse("traceparent", "unsupported_version")
        if version == "00" and len(traceparent) != 55:
            raise _refuse("traceparent", "malformed")
        if len(traceparent) > 55 and traceparent[55] != "-":
            raise _refuse("traceparent", "malformed")  # a later version may only append
        parts = traceparent[:55].split("-")
        if len(parts) != 4 or [len(part) for part in parts] != [2, 32, 16, 2]:
            raise _refuse("traceparent", "malformed")
        if not _HEX.fullmatch(parts[3]):
            raise _refuse("traceparent", "invalid_flags")
        state = TraceState() if tracestate is None else TraceState.parse(tracestate)
        return cls(parts[1], parts[2], int(parts[3], 16), state)

    @classmethod
    def from_headers(
        cls, headers: Mapping[str, str] | Iterable[tuple[str, str]]
    ) -> TraceContext | None:
        """The context carried by HTTP headers (names case-insensitive); None when
        there is no `traceparent`. Two `traceparent` headers are refused; several
        `tracestate` headers are combined."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        parents: list[str] = []
        states: list[str] = []
        for name, value in pairs:
            lowered = name.lower() if isinstance(name, str) else ""
            if lowered == "traceparent":
                parents.append(value)
            elif lowered == "tracestate":
                states.append(value)
        if not parents:
            return None
        if len(parents) > 1:
            raise _refuse("traceparent", "duplicate_header")
        return cls.parse(parents[0], states or None)

    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags:02x}"

    def headers(self) -> dict[str, str]:
        """``traceparent`` (and ``tracestate`` when not empty) to send on."""
        out = {"traceparent": self.traceparent()}
        if self.state.entries:
            out["tracestate"] = self.state.format()
        return out

    def child(self) -> TraceContext:
        """The same trace, sampling decision and state, with a fresh span id."""
        return TraceContext(self.trace_id, new_span_id(), self.flags, self.state)

    def to_otel(self) -> trace.SpanContext:
        """A remote `SpanContext` (what a propagator extracts), to parent spans on."""
        return trace.SpanContext(
            trace_id=int(self.trace_id, 16),
            span_id=int(self.span_id, 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(self.flags),
            trace_state=trace.TraceState(list(self.state.entries)),
        )

    @classmethod
    def from_otel(cls, context: trace.SpanContext) -> TraceContext | None:
        """The context of an OpenTelemetry span; None for an invalid one."""
        if not context.is_valid:
            return None
        state = TraceState(tuple(context.trace_state.items()))
        return cls(
            f"{context.trace_id:032x}", f"{context.span_id:016x}", int(context.trace_flags), state
        )


def new_span_id() -> str:
    """A random, never all-zero span id (16 lower-case hex digits)."""
    while True:
        value = secrets.token_hex(8)
        if value != _ZERO_SPAN:
            return value


def new_trace_id() -> str:
    """A random, never all-zero trace id (32 lower-case hex digits)."""
    while True:
        value = secrets.token_hex(16)
        if value != _ZERO_TRACE:
            return value
