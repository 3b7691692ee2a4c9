"""What an invocation carries besides its message: who it belongs to, and its options.

A leaf module: the turn, the agent's messages, the low-level calls and the facade all
use these, and none of them may import another for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from adk_actors.plugins import Pipeline
from providers import content as content_model
from providers.content import Content, FunctionCallPart
from providers.errors import AdkError

MAX_DELEGATION_DEPTH = 64


@dataclass(frozen=True)
class Scope:
    """Who an invocation belongs to: it keys the lane and reaches tools."""

    app_name: str | None = None
    user_id: str | None = None
    session_id: str | None = None

    def lane(self) -> tuple[str, ...]:
        if self.app_name and self.user_id and self.session_id:
            return ("scoped", self.app_name, self.user_id, self.session_id)
        return ("unscoped",)


@dataclass(frozen=True)
class TurnOptions:
    """What a turn carries besides its message: the delegation chain, the root's
    global instruction, and a read-only state snapshot for templates and tools."""

    ancestry: tuple[str, ...] = ()
    global_instruction: str | None = None
    state: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    observer: Callable[[str, Any, Any], None] | None = None
    """Told each step: ("model", Content, metadata), ("tool", Content, None),
    ("delta", text, None). The Runner turns these into stored events."""
    max_llm_calls: int | None = None
    max_tool_rounds: int | None = None
    streaming: str = "none"
    """"text": visible text deltas; "content": one Content per provider frame."""
    before_request: Callable[[Mapping[str, Any], list[Content], list[Any]], None] | None = None
    """Checks the complete request just before provider I/O (the Runner's envelope
    budget); raising `AdkError` fails the turn with nothing sent."""
    tool_gate: Callable[[FunctionCallPart], dict[str, Any] | None] | None = None
    """Runtime policy for a call with valid arguments: None lets it run, a payload is
    the error the model sees instead (no approval, no callbacks, no execution)."""
    result_gate: Callable[[FunctionCallPart, dict[str, Any]], dict[str, Any]] | None = None
    """Runtime policy for a tool's final result: the payload, or an error in its place."""
    pausable: bool = False
    """Under a Runner: approvals and long-running tools pause the turn (`TurnPaused`)
    instead of failing ``tool_confirmation_requires_runner``."""
    plugins: Pipeline | None = None
    """A Runner's global plugins (they run before the agent's own callbacks); carried
    to the sub-agents this turn calls."""
    plugin_run: bool = False
    """This turn is a Runner's invocation: the run-level plugin hooks ``on_user_message``
    and ``before_run`` apply to it, not to sub-agents (the Runner itself runs
    ``after_run`` and ``on_run_error``, once the run's end is stored)."""
    own_span: bool = True
    """The turn opens its ``invoke_agent`` span; False when its caller owns one (a
    Runner's invocation server opens it around admission, the turn and the end)."""


def as_content(message: str | Content) -> Content:
    if isinstance(message, Content):
        return content_model.validate(message)
    if isinstance(message, str):
        return content_model.from_text(message)
    raise AdkError("invalid_message", "a message is a str or a Content")


def check_ancestry(target: str, ancestry: Sequence[str]) -> tuple[str, ...]:
    """Refuse to enter `target` below the delegation chain `ancestry` (root first):
    ``invalid_delegation_path`` for a chain that is not distinct agent names,
    ``delegation_depth_exceeded`` for a chain of `MAX_DELEGATION_DEPTH` agents,
    ``delegation_cycle`` for a target already in it. Checked before anything is sent
    to the target, so its provider never runs; the chain, as a tuple, otherwise."""
    if isinstance(ancestry, str) or not isinstance(ancestry, Sequence):
        raise AdkError("invalid_delegation_path", "ancestry is a sequence of agent names")
    chain = tuple(ancestry)
    if not all(isinstance(name, str) for name in chain) or len(set(chain)) != len(chain):
        raise AdkError("invalid_delegation_path", "ancestry holds distinct agent names")
    if len(chain) >= MAX_DELEGATION_DEPTH:
        raise AdkError(
            "delegation_depth_exceeded",
            f"delegation chains stop at {MAX_DELEGATION_DEPTH} agents",
        )
    if target in chain:
        raise AdkError("delegation_cycle", f"{target} is already in this delegation chain")
    return chain
