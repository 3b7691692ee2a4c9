"""The A2A task store's protocol and state: its typed requests, what subscribers receive,
and the records the server keeps (the handle in `tasks` builds the requests; the server
in `tasks_server` dispatches them with ``match``)."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from a2a.types import a2a_pb2 as pb

from adk_actors.a2a import errors
from adk_actors.a2a.server_options import A2AServerOptions
from adk_actors.a2a.task_runs import RunLedger
from adk_actors.a2a.tasks_model import TaskSizes
from providers.content import Content
from supervision import From, Pid, Ref


class Phase(enum.Enum):
    """Where a task's work is: a run being started or resumed, running, waiting for
    input, or over."""

    STARTING = "starting"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    TERMINAL = "terminal"


ACTIVE = (Phase.STARTING, Phase.RUNNING)


# -- requests (the handle in tasks.py builds them) ------------------------------------------


class ReplyWhenSettled(NamedTuple):
    """A blocking send's request: the store replies to the call once the task is
    terminal or interrupted (the task with its last `history_length` messages, or the
    refusal of a resume's answer), not at once with an `Opened`. The waiter is
    registered as the task starts, so no retention, however short, forgets the task
    before its sender has the reply, and a sender that goes away leaves nothing held
    for it. (Not `runner.continuations.Answer`, a paused run's resume answer.)"""

    history_length: int | None


class Create(NamedTuple):
    """A new task for `message`; its byte size, its id and the agent's `content` are
    worked out by the caller (pure work kept out of the store's mailbox)."""

    scope: str
    message: pb.Message
    subscriber: Pid | None
    max_queue: int
    message_bytes: int
    content: Content
    task_id: str
    when_settled: ReplyWhenSettled | None = None


class Continue(NamedTuple):
    """A follow-up `message` (of `message_bytes`) to the task waiting for input that
    ``message.task_id`` names (its one source); `when_settled` as `Create.when_settled`."""

    scope: str
    message: pb.Message
    subscriber: Pid | None
    max_queue: int
    message_bytes: int
    when_settled: ReplyWhenSettled | None = None


class Get(NamedTuple):
    scope: str
    task_id: str
    history_length: int | None


class ListPage(NamedTuple):
    scope: str
    request: pb.ListTasksRequest


class CancelTask(NamedTuple):
    scope: str
    task_id: str


class Subscribe(NamedTuple):
    scope: str
    task_id: str
    after: int | None
    subscriber: Pid
    max_queue: int


class Ack(NamedTuple):
    task_id: str
    sub_id: int
    seq: int


class Unsubscribe(NamedTuple):
    task_id: str
    sub_id: int


class Stats(NamedTuple):
    pass


class Drain(NamedTuple):
    """Refuse new work from now on (`StoreStopping`); answered once no task's run is
    still being started or resumed, so a listing of the running runs after it is
    complete (`A2AServer.stop`, Review2 1)."""


class Prune(NamedTuple):
    """Forget the tasks whose retention is over (a timer set as each task settles, so
    an expired task's paused run is released on time, not on the next request)."""


class StoreStopping(errors.RpcError):
    """The refusal of new work by a draining store: -32603 "server stopping" (the HTTP
    layer answers it 503, as a request that arrives once the server stops)."""

    def __init__(self) -> None:
        super().__init__(errors.INTERNAL_ERROR, "server stopping")


# -- what subscribers receive ---------------------------------------------------------------


class TaskEvent(NamedTuple):
    sub_id: int
    seq: int
    event: pb.StreamResponse
    final: bool


class Detached(NamedTuple):
    sub_id: int


class Opened(NamedTuple):
    """A submitted task or a subscription's start: its frames (the snapshot first) and
    the subscriber id (None when it has already ended: `ended`)."""

    task_id: str
    frames: list[tuple[int, pb.StreamResponse]]
    sub_id: int | None
    ended: bool


# -- state ---------------------------------------------------------------------------------


@dataclass
class Subscriber:
    """A subscriber's inbox, the monitor on it, its credit and the seqs it has not acked."""

    pid: Pid
    watch: Ref
    max_queue: int
    unacked: deque[int] = field(default_factory=deque)


@dataclass
class Entry:
    """One task: its `pb.Task`, owner scope, creation order, phase, run, events, readers."""

    task: pb.Task
    scope: str
    order: int
    phase: Phase = Phase.STARTING
    run_id: str | None = None
    generation: int = 0
    seq: int = 0
    events: deque[tuple[int, pb.StreamResponse]] = field(default_factory=deque)
    subscribers: dict[int, Subscriber] = field(default_factory=dict)
    waiters: list[tuple[From, int | None]] = field(default_factory=list)
    settled_at: float | None = None
    """When it became terminal or interrupted (monotonic); None while active."""
    pause_status: pb.TaskStatus | None = None
    """The INPUT_REQUIRED status a resume under way restores if the run refuses the answer."""
    sizes: TaskSizes = field(default_factory=TaskSizes)
    """The byte sizes of the task's parts, kept as they change (never a re-render)."""


class StoreArgs(NamedTuple):
    """What the child spec starts every incarnation of the server with."""

    runner: Any
    options: A2AServerOptions
    ledger: RunLedger


@dataclass
class State:
    """The server's state: the runner and bounds, the ledger epoch, the page-token secret
    and the tasks."""

    runner: Any
    options: A2AServerOptions
    ledger: RunLedger
    epoch: int
    secret: bytes
    tasks: dict[str, Entry] = field(default_factory=dict)
    """In creation order (never re-inserted): reversed, newest first."""
    settled: dict[str, None] = field(default_factory=dict)
    """The ids of terminal and interrupted tasks, oldest settled first."""
    bridges: dict[Pid, tuple[str, int]] = field(default_factory=dict)
    watches: dict[Ref, tuple[str, int]] = field(default_factory=dict)
    orders: int = 0
    sub_ids: int = 0
    prune_armed: bool = False
    """Whether a `Prune` timer is set (one at a time, for the oldest settled task)."""
    draining: bool = False
    """Set by `Drain`: Create and Continue are refused (`StoreStopping`)."""
    drain_waiters: list[From] = field(default_factory=list)
    """The `Drain` calls to answer once no task is in `Phase.STARTING`."""
