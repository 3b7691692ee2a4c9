"""What an agent process understands: one small typed class per request.

Calls answer ``("ok", value)`` or ``("error", reason)``; `EnterLane` is answered
only when its lane slot is granted (``("ok", spec)``), so a caller that must stay
responsive sends it with `supervision.send_request`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, NamedTuple

from adk_actors.agents.scope import Scope, TurnOptions
from providers.content import Content
from supervision import Pid

Lane = tuple[str, ...]
"""A lane key: ``("compat",)``, ``("unscoped",)`` or ``("scoped", app, user, session)``."""


class Prompt(NamedTuple):
    """A turn of the agent's own conversation (the compat FIFO). `context` is the
    caller's `contextvars` (its current trace span, say): the turn runs in a copy."""

    message: Content
    caller: Pid | None
    options: TurnOptions
    context: contextvars.Context | None = None


class Invoke(NamedTuple):
    """A fresh invocation in the lane of `scope`, run in a copy of `context` (the
    caller's, as for `Prompt`)."""

    message: Content
    scope: Scope
    caller: Pid | None
    options: TurnOptions
    context: contextvars.Context | None = None


class Delegate(NamedTuple):
    """Cast: a compat-lane turn whose result goes to `respond` (or nowhere), run in a
    copy of `context` (the caller's, as for `Prompt`)."""

    message: Content
    respond: Callable[[tuple[Any, ...]], None] | None
    caller: Pid | None
    context: contextvars.Context | None = None


class EnterLane(NamedTuple):
    """An invocation process asks for a slot in `lane`; answered ``("ok", spec)`` when
    granted. The holder is monitored: its exit, or `LeaveLane`, frees the slot."""

    lane: Lane
    holder: Pid


class LeaveLane(NamedTuple):
    """Cast: `holder` gives its slot back, or stops waiting for one."""

    holder: Pid


class Info(NamedTuple):
    """Status counters."""


class GetSpec(NamedTuple):
    """The agent's compiled spec."""
