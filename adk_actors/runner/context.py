"""`ContextPolicy`: which past events a model call sees, and how big a request may be.

Before each invocation the Runner selects history from the session: filters (author,
invocation, content type, time range, partial, final) drop whole exchanges, never half
of one (a model's function calls travel with their responses); each include or
exclude filter also takes ``"all"`` (include all: no filter; exclude all: no past
event); then a byte/token
budget over the selected events either fails (``error``), keeps the newest complete
exchanges (``truncate``) or hands them to a compressor task owned by the invocation
(``compress``), whose output is checked before use. The current user event is always
kept. Separately, ``max_request_bytes``/``max_request_tokens`` bound the complete
request envelope (instructions, settings, history, input, tool declarations) and fail
``request_context_budget_exceeded`` before any provider I/O. Telemetry carries counts,
estimates and fingerprints, never content. Tokens are estimated as bytes / 4.
A policy without any filter or budget keeps every past event: selection is then
skipped (no per-event work, no ``adk.context.build`` event).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import operator
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import msgspec

from adk_actors.events import Event
from providers import content as content_codec
from providers.content import Content, FunctionCallPart, FunctionResponsePart, canonical
from providers.errors import AdkError, decode_options, is_secret_key
from supervision import Task, TaskFailed, TaskTimeout
from supervision.logs import get_logger

_log = get_logger("adk.context")

DEFAULT_MAX_INPUT_EVENTS = 10_000
MAX_INPUT_EVENTS = 100_000
MAX_BUDGET_BYTES = 1 << 30
DEFAULT_COMPRESSOR_TIMEOUT = 10.0
DEFAULT_MAX_COMPRESSOR_EVENTS = 1_000
_POLICY_ERROR = "invalid_context_policy"
_PARTIAL = operator.attrgetter("partial")

Names = frozenset[Annotated[str, msgspec.Meta(min_length=1)]]
PartKind = Literal[
    "text", "thought", "inline_data", "file_data", "function_call", "function_response"
]
All = Literal["all"]
"""Where a filter takes a list it also takes ``"all"``: every name, every kind."""
_INCLUDES = ("authors", "invocations", "content_types")
_EXCLUDES = ("exclude_authors", "exclude_invocations", "exclude_content_types")


class _Everything(Container[str]):
    """An exclude filter's ``"all"``: it holds every name and every kind."""

    def __contains__(self, item: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "'all'"


EVERYTHING: Container[str] = _Everything()
Overflow = Literal["truncate", "error", "compress"]
OVERFLOWS: tuple[str, ...] = get_args(Overflow)
PART_KINDS: tuple[str, ...] = get_args(PartKind)
Budget = Annotated[int, msgspec.Meta(ge=1, le=MAX_BUDGET_BYTES)]
Instant = Annotated[float, msgspec.Meta(ge=0)]


class ContextOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A context policy as written: the keys, their types and bounds (see `compile`).

    Name filters are lists (or sets) of non-empty strings, or ``"all"``; ``None`` for
    `authors`, `invocations` and `content_types` means no filter (as ``"all"`` does),
    ``"all"`` for an exclude filter drops every past event. `compressor` is any
    callable ``events -> events``, checked by `ContextPolicy.compile` (a type cannot
    say it).
    """

    authors: Names | All | None = None
    exclude_authors: Names | All = frozenset()
    invocations: Names | All | None = None
    exclude_invocations: Names | All = frozenset()
    content_types: frozenset[PartKind] | All | None = None
    exclude_content_types: frozenset[PartKind] | All = frozenset()
    since: Instant | None = None
    until: Instant | None = None
    include_partial: bool = False
    final_only: bool = False
    max_bytes: Budget | None = None
    max_tokens: Budget | None = None
    max_request_bytes: Budget | None = None
    max_request_tokens: Budget | None = None
    overflow: Overflow = "error"
    compressor: Any = None
    compressor_timeout: Annotated[float, msgspec.Meta(ge=0.001, le=3600)] = (
        DEFAULT_COMPRESSOR_TIMEOUT
    )
    max_compressor_events: Annotated[int, msgspec.Meta(ge=1, le=MAX_INPUT_EVENTS)] = (
        DEFAULT_MAX_COMPRESSOR_EVENTS
    )
    max_input_events: Annotated[int, msgspec.Meta(ge=1, le=MAX_INPUT_EVENTS)] = (
        DEFAULT_MAX_INPUT_EVENTS
    )


def estimate_tokens(size: int) -> int:
    return math.ceil(size / 4)


@dataclass(frozen=True)
class ContextPolicy:
    """A compiled context policy; build it with `ContextPolicy.compile(mapping)`.
    An include filter's ``"all"`` is compiled to None, an exclude filter's to
    `EVERYTHING`."""

    authors: frozenset[str] | None = None
    exclude_authors: Container[str] = frozenset()
    invocations: frozenset[str] | None = None
    exclude_invocations: Container[str] = frozenset()
    content_types: frozenset[str] | None = None
    exclude_content_types: Container[str] = frozenset()
    since: float | None = None
    until: float | None = None
    include_partial: bool = False
    final_only: bool = False
    max_bytes: int | None = None
    max_tokens: int | None = None
    max_request_bytes: int | None = None
    max_request_tokens: int | None = None
    overflow: Overflow = "error"
    compressor: Callable[[tuple[Event, ...]], Sequence[Event]] | None = None
    compressor_timeout: float = DEFAULT_COMPRESSOR_TIMEOUT
    max_compressor_events: int = DEFAULT_MAX_COMPRESSOR_EVENTS
    max_input_events: int = DEFAULT_MAX_INPUT_EVENTS

    @classmethod
    def compile(cls, config: Mapping[str, Any] | ContextPolicy | None) -> ContextPolicy:
        """Check every key and value once (see `ContextOptions`); a compiled policy passes.

        A bad value fails as ``AdkError(("invalid_context_policy", key))``; unknown keys
        as ``AdkError(("invalid_context_policy", ("unknown_keys", [names...])))``.
        """
        if isinstance(config, ContextPolicy):
            return config
        options = decode_options(ContextOptions, config, _POLICY_ERROR, what="context_policy")
        if options.compressor is not None and not callable(options.compressor):
            raise AdkError(
                (_POLICY_ERROR, "compressor"), "context_policy 'compressor' must be a callable"
            )
        if options.overflow == "compress" and options.compressor is None:
            raise AdkError(
                (_POLICY_ERROR, "compressor"),
                "context_policy 'compressor' is required by overflow 'compress': "
                "a callable events -> events",
            )
        fields = msgspec.structs.asdict(options)
        for key in _INCLUDES:
            if fields[key] == "all":
                fields[key] = None
        for key in _EXCLUDES:
            if fields[key] == "all":
                fields[key] = EVERYTHING
        return cls(**fields)

    @property
    def budgeted(self) -> bool:
        return self.max_bytes is not None or self.max_tokens is not None

    # -- selection ---------------------------------------------------------------------

    @property
    def runs_user_code(self) -> bool:
        """Does choosing the history call user code (a compressor) that may block?"""
        return self.overflow == "compress"

    @functools.cached_property
    def selects(self) -> bool:
        """Does this policy drop anything (a filter or a budget)? Without either,
        `select` keeps every past event as it is, at no cost per event."""
        unset: frozenset[str] = frozenset()
        return (
            self.authors is not None
            or self.invocations is not None
            or self.content_types is not None
            or self.exclude_authors != unset
            or self.exclude_invocations != unset
            or self.exclude_content_types != unset
            or self.since is not None
            or self.until is not None
            or self.final_only
            or self.budgeted
        )

    def select(self, past: Sequence[Event], current: Event, agent: str) -> list[Event]:
        """The events the next model call sees, ending with `current` (always kept)."""
        candidates = [*past, current]
        if len(candidates) > self.max_input_events:
            raise AdkError(
                ("context_input_too_many_events", len(candidates)),
                f"at most {self.max_input_events} events are considered",
            )
        if not self.selects and (self.include_partial or not any(map(_PARTIAL, past))):
            return candidates  # nothing to drop: what the filters below would keep
        units = _exchanges(past)
        kept_units = [unit for unit in units if all(self._passes(event) for event in unit)]
        selected = [event for unit in kept_units for event in unit] + [current]
        dropped_by_filter = len(past) - (len(selected) - 1)
        action = "none"
        if self._over(selected):
            if self.overflow == "error":
                raise AdkError(
                    ("context_budget_exceeded", self._measure(selected)),
                    "the selected history is over the context budget",
                )
            if self.overflow == "truncate":
                selected = self._truncate(kept_units, current)
                action = "truncated"
            else:
                selected = self._compress(tuple(selected), current)
                action = "compressed"
        # sizes cost a JSON encoding per event: measured only when a budget needs them
        measured = self._measure(selected) if self.budgeted else {}
        _log.debug(
            "adk.context.build",
            agent=agent,
            input_events=len(candidates),
            selected_events=len(selected),
            dropped_events=max(0, len(candidates) - len(selected)),
            filtered_events=dropped_by_filter,
            overflow_action=action,
            selected_bytes=measured.get("bytes"),
            estimated_tokens=measured.get("tokens"),
            fingerprint=_fingerprint(event.id for event in selected),
        )
        return selected

    def _passes(self, event: Event) -> bool:
        if self.authors is not None and event.author not in self.authors:
            return False
        if event.author in self.exclude_authors:
            return False
        if self.invocations is not None and event.invocation_id not in self.invocations:
            return False
        if event.invocation_id in self.exclude_invocations:
            return False
        if self.since is not None and event.timestamp < self.since:
            return False
        if self.until is not None and event.timestamp > self.until:
            return False
        if event.partial and not self.include_partial:
            return False
        if self.final_only and event.author != "user" and not event.is_final:
            return False
        if self.exclude_content_types and (
            self.exclude_content_types is EVERYTHING
            or (
                event.content is not None
                and any(_kind(part) in self.exclude_content_types for part in event.content.parts)
            )
        ):
            return False
        if self.content_types is not None and event.content is not None:
            return all(_kind(part) in self.content_types for part in event.content.parts)
        return True

    @property
    def _byte_limit(self) -> float:
        """One limit in bytes: tokens are estimated as bytes / 4, rounded up."""
        limits = [float("inf")]
        if self.max_bytes is not None:
            limits.append(self.max_bytes)
        if self.max_tokens is not None:
            limits.append(self.max_tokens * 4)
        return min(limits)

    def _over(self, events: Sequence[Event]) -> bool:
        return self.budgeted and sum(_size(event) for event in events) > self._byte_limit

    def _measure(self, events: Sequence[Event]) -> dict[str, int]:
        size = sum(_size(event) for event in events)
        measured = {"bytes": size, "tokens": estimate_tokens(size), "events": len(events)}
        if self.max_bytes is not None:
            measured["max_bytes"] = self.max_bytes
        if self.max_tokens is not None:
            measured["max_tokens"] = self.max_tokens
        return measured

    def _truncate(self, units: list[list[Event]], current: Event) -> list[Event]:
        """The newest whole exchanges that fit with the current event (one pass)."""
        total = _size(current)
        if total > self._byte_limit:
            raise AdkError(
                ("context_budget_exceeded", self._measure([current])),
                "the current input alone is over the context budget",
            )
        first = len(units)
        while first > 0:
            unit_size = sum(_size(event) for event in units[first - 1])
            if total + unit_size > self._byte_limit:
                break
            total += unit_size
            first -= 1
        return [event for unit in units[first:] for event in unit] + [current]

    def _compress(self, events: tuple[Event, ...], current: Event) -> list[Event]:
        """Run the compressor as a task owned by this invocation; check what it returns."""
        assert self.compressor is not None
        task = Task.start(
            self.compressor, events, deadline=time.monotonic() + self.compressor_timeout
        )
        try:
            output = task.wait(self.compressor_timeout + 1.0)
        except TaskTimeout:
            task.kill()
            raise AdkError("compressor_timeout", "the compressor ran past its timeout") from None
        except TaskFailed:
            raise AdkError("compressor_crashed", "the compressor raised") from None
        checked = _checked_output(output, events, current, self.max_compressor_events)
        if self._over(checked):
            raise AdkError(
                ("context_budget_exceeded", self._measure(checked)),
                "the compressed history is still over the context budget",
            )
        return checked

    # -- the request envelope ----------------------------------------------------------

    def check_request(
        self, config: Mapping[str, Any], contents: Sequence[Content], tools: Sequence[Any]
    ) -> None:
        """Fail ``request_context_budget_exceeded`` if the whole request is too big."""
        if self.max_request_bytes is None and self.max_request_tokens is None:
            return
        envelope = msgspec.json.encode(
            {
                "config": _settings(config),
                "contents": [content_codec.to_dict(item) for item in contents],
                "tools": list(tools),
            },
            order="sorted",
        )
        size = len(envelope)
        tokens = estimate_tokens(size)
        fingerprint = hashlib.sha256(envelope).hexdigest()[:16]
        _log.debug(
            "adk.context.envelope",
            request_bytes=size,
            estimated_tokens=tokens,
            contents=len(contents),
            tools=len(tools),
            fingerprint=fingerprint,
        )
        if (self.max_request_bytes is not None and size > self.max_request_bytes) or (
            self.max_request_tokens is not None and tokens > self.max_request_tokens
        ):
            details = {"bytes": size, "tokens": tokens, "fingerprint": fingerprint}
            if self.max_request_bytes is not None:
                details["max_request_bytes"] = self.max_request_bytes
            if self.max_request_tokens is not None:
                details["max_request_tokens"] = self.max_request_tokens
            raise AdkError(
                ("request_context_budget_exceeded", details),
                "the complete model request is over its budget",
            )


def _exchanges(events: Sequence[Event]) -> list[list[Event]]:
    """Group events into units: a model event with function calls and the events that
    answer them form one unit; every other event is a unit of its own."""
    units: list[list[Event]] = []
    waiting: set[str | None] = set()
    for event in events:
        parts = event.content.parts if event.content is not None else ()
        responses = {p.id or p.name for p in parts if isinstance(p, FunctionResponsePart)}
        if waiting and responses and responses <= waiting:
            units[-1].append(event)
            waiting -= responses
            continue
        units.append([event])
        waiting = {p.id or p.name for p in parts if isinstance(p, FunctionCallPart)}
    return units


def _checked_output(
    output: Any, events: tuple[Event, ...], current: Event, max_events: int
) -> list[Event]:
    if not isinstance(output, list | tuple) or not all(isinstance(e, Event) for e in output):
        raise AdkError("invalid_compressor_output", "a compressor returns a list of Events")
    if len(output) > max_events:
        raise AdkError("compressor_output_too_large", f"at most {max_events} events")
    originals = {event.id: event for event in events}
    seen: set[str] = set()
    for event in output:
        if event.id in seen:
            raise AdkError("duplicate_event_id", "the compressor repeated an event id")
        seen.add(event.id)
        if event.id in originals and event != originals[event.id]:
            raise AdkError("retained_event_modified", "a kept event must stay as it was")
    if any(later.timestamp < earlier.timestamp for earlier, later in itertools.pairwise(output)):
        raise AdkError("non_chronological_events", "compressed events must stay in time order")
    if not output or output[-1].id != current.id:
        raise AdkError("current_event_missing", "the current user event must end the output")
    for unit in _exchanges(output[:-1]):
        calls = {
            p.id or p.name
            for e in unit
            for p in (e.content.parts if e.content else ())
            if isinstance(p, FunctionCallPart)
        }
        answers = {
            p.id or p.name
            for e in unit
            for p in (e.content.parts if e.content else ())
            if isinstance(p, FunctionResponsePart)
        }
        if calls != answers:
            raise AdkError("partial_tool_exchange", "a function call lost its response")
    return list(output)


def _size(event: Event) -> int:
    """Bytes of the event's canonical content, as the model would receive it."""
    return 0 if event.content is None else len(content_codec.encode(canonical(event.content)))


def _kind(part: Any) -> str:
    kind = type(part).__name__
    if kind == "TextPart":
        return "thought" if part.thought else "text"
    return {
        "InlineDataPart": "inline_data",
        "FileDataPart": "file_data",
        "FunctionCallPart": "function_call",
        "FunctionResponsePart": "function_response",
    }.get(kind, kind)


def _settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-safe, credential-free part of a provider config (what is sent)."""
    safe: dict[str, Any] = {}
    for key, value in config.items():
        if is_secret_key(key):
            continue
        try:
            msgspec.json.encode(value)
        except (TypeError, msgspec.EncodeError):
            continue  # a provider instance or a callable: not part of the request
        safe[key] = value
    return safe


def _fingerprint(ids: Any) -> str:
    digest = hashlib.sha256()
    for item in ids:
        digest.update(item.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
