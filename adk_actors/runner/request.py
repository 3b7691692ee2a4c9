"""What starts an invocation server: the request, and the one-shot handoff it crosses.

The invocation supervisor's child spec carries only an opaque reference; the request
(runner, message or continuation, options) waits in `handoffs` (the kernel's
`OneShotHandoffs`, with this area's reasons) under it and the server takes it exactly
once in `init`, so a restarted or duplicated child can never run a request twice, and
the starter withdraws whatever was not taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adk_actors.agents.turn_outcome import Answer, Continuation
from providers.content import Content
from providers.errors import AdkError
from supervision import HandoffError, HandoffsFull, OneShotHandoffs, Pid

if TYPE_CHECKING:
    from adk_actors.runner.runner import Runner

MAX_PENDING_HANDOFFS = 10_000


@dataclass(frozen=True)
class Fresh:
    """A new invocation: the user's message (history is read once the lane is ours)."""

    message: Content


@dataclass(frozen=True)
class Resumed:
    """A resume: the stored continuation to claim, the checked answer, and the
    invocation so far (history before it, its own contents)."""

    stored: dict[str, Any]
    continuation: Continuation
    answer: Answer
    history: list[Content]
    contents: list[Content]
    state: dict[str, Any]


@dataclass(frozen=True)
class RunIdentity:
    """What makes an invocation a stable run: its id, retention, replay window, and
    the registry that retains it (told `Terminal` at its end)."""

    run_id: str
    retention: float
    max_buffered_events: int
    registry: Any
    parent_run_id: str | None = None


def run_name(run_id: str) -> tuple[str, str]:
    """The registered name of a run's invocation server."""
    return ("adk.run", run_id)


def stream_name(run_id: str) -> tuple[str, str]:
    """The registered name of a run's credit stream."""
    return ("adk.run_stream", run_id)


@dataclass(frozen=True)
class InvocationRequest:
    """Everything an invocation server needs; crosses the handoff, never the child spec."""

    runner: Runner
    user_id: str
    session_id: str
    invocation_id: str
    token: str
    work: Fresh | Resumed
    owner: Pid | None = None
    """A caller whose exit cancels the invocation (`Runner.run`); None for a run."""
    subscriber: Pid | None = None
    """Subscribed to the event stream before anything is published."""
    run: RunIdentity | None = None
    max_buffered_events: int = 256
    outcome_only: bool = False
    """A plain invocation's `subscriber` wants only its end (`Runner.run`): it is sent
    the `StreamTerminal` alone, no `StreamOpened` and no `StreamItem` per event (it
    monitors the server it started instead). Every event is still stored, seen by the
    plugins and counted in the stream's sequence exactly as for a streaming caller."""


class Handoffs(OneShotHandoffs[InvocationRequest]):
    """The kernel's one-shot table of requests waiting for their server, refusing with
    the runner's public reasons: ``busy`` (`put`, the table is full) and
    ``handoff_taken`` (`take`, taken already or withdrawn)."""

    def __init__(self, max_pending: int = MAX_PENDING_HANDOFFS) -> None:
        super().__init__(max_pending)

    def put(self, value: InvocationRequest) -> str:
        try:
            return super().put(value)
        except HandoffsFull as full:
            raise AdkError("busy", f"{full.max_pending} invocation starts are in flight") from None

    def take(self, ref: object) -> InvocationRequest:
        try:
            return super().take(ref)
        except HandoffError:
            raise AdkError("handoff_taken", "this handoff was already taken or withdrawn") from None


handoffs = Handoffs()
"""The process-wide table starters put into and invocation servers take from."""
