"""The A2A task store: start it under the root tree, and the handle the HTTP layer uses.

`start_task_store(agent, options, child_id=...)` adds a `TaskStoreServer`
(`tasks_server`) as a child of the root tree, registered under
``("adk.a2a.tasks", child_id)``, with a Runner for `agent`; `stop_task_store` removes it
(its `terminate` cancels the runs still going). `TaskStore` is the handle: every method
is a coroutine that never blocks the event loop (one `aio.call` to the server, which
never waits on a run, see `task_runs`: it answers at once, except a blocking send,
answered when its task settles); the pure work of a request (a message's byte size, a
new task's id, what the agent receives) is done here, on the caller's side, so the
store's mailbox holds no rendering. A disconnected request owns nothing: the
task goes on, bounded by ``task_timeout``. `start_task_store` also starts the
kernel's runtime (reactor, task supervisor, pool), so no store handler pays for it.

`TaskSubscription` is an async iterator of ``(seq, pb.StreamResponse)``: the snapshot
first, then the task's events in strictly increasing ``seq``, ending after the event
that makes the task terminal or interrupted. Live events come into a private `Inbox`
with credit: each one read is acknowledged when the next is asked for, and a reader
``max_subscriber_queue`` events behind is detached (`detached` is then True; reconnect
with ``after=`` the last seq read, inside the replay window of ``max_events``); the
event that ends the stream reaches it even at that ceiling.

Errors are `errors.RpcError`: unknown and other principals' tasks are the same -32001;
a cancel of a terminal task -32002; capacity (``max_active``, ``max_tasks`` with nothing
evictable, ``max_subscribers_per_task``) -32004; a follow-up to a terminal task -32004,
to a task not waiting for input -32602; a message past ``max_message_bytes`` -32602;
a subscription to a terminal task -32004 unless it resumes inside the replay window.
A ListTasks page holds at most ``max_list_bytes`` of tasks (at least one): it ends
early, with a ``nextPageToken``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from a2a.types import a2a_pb2 as pb

from adk_actors.a2a import errors, wire
from adk_actors.a2a.server_options import A2AServerOptions, server_options
from adk_actors.a2a.task_runs import RunLedger
from adk_actors.a2a.tasks_model import principal_scope, public_task
from adk_actors.a2a.tasks_protocol import (
    Ack,
    CancelTask,
    Continue,
    Create,
    Detached,
    Drain,
    Get,
    ListPage,
    Opened,
    ReplyWhenSettled,
    Stats,
    StoreArgs,
    Subscribe,
    TaskEvent,
    Unsubscribe,
)
from adk_actors.a2a.tasks_server import TaskStoreServer
from adk_actors.app import APP_NAME, ensure_started
from adk_actors.runner import Runner
from adk_actors.sessions import InMemorySessionService, SessionService
from providers.errors import AdkError
from supervision import (
    CallTimeout,
    ChildSpec,
    Down,
    Inbox,
    ProcessExit,
    Supervisor,
    SupervisorError,
    aio,
    call,
    cast,
    default_sync_pool,
    default_task_supervisor,
    reactor_loop,
    whereis,
)

__all__ = [
    "TaskStore",
    "TaskSubscription",
    "principal_scope",
    "start_task_store",
    "stop_task_store",
]

STORE_NAME = "adk.a2a.tasks"
CALL_TIMEOUT = 5.0
"""A round trip to the store (it never waits on a run, so this is generous)."""
BLOCKING_SEND_GRACE = 10.0
"""How long past ``task_timeout`` a blocking send's one call waits for the store's
reply: a run past its deadline is cancelled, and its task settles ``FAILED`` within
the bridge's wait for the cancel (5 s). The call also covers the time the request
waits in a busy store's mailbox. Past it, one ordinary round trip (`CALL_TIMEOUT`)
reads the task as it is: a blocking send takes at most ``task_timeout`` + 15 s."""
SHUTDOWN = 10.0


def _unavailable() -> errors.RpcError:
    return errors.RpcError(errors.INTERNAL_ERROR, "the task store is unavailable")


class TaskStore:
    """The handle of one running task store (see the module docstring)."""

    def __init__(
        self,
        name: Any,
        child_id: str,
        options: A2AServerOptions,
        sessions: InMemorySessionService | None,
    ) -> None:
        self.name = name
        self.child_id = child_id
        self.options = options
        self._owned_sessions = sessions

    async def _call(self, request: Any, timeout: float = CALL_TIMEOUT) -> Any:
        try:
            status, value = await aio.call(self.name, request, timeout)
        except (ProcessExit, CallTimeout):
            raise _unavailable() from None
        if status == "error":
            raise value
        return value

    def _queue(self, max_queue: int | None) -> int:
        if max_queue is None:
            return self.options.max_subscriber_queue
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise errors.invalid_params("max_queue is an int >= 1")
        return min(max_queue, self.options.max_subscriber_queue)

    async def send(self, principal: str, request: pb.SendMessageRequest) -> pb.Task:
        """Start a task (or continue one waiting for input) and return it: at once when
        ``configuration.returnImmediately``, else once it is terminal or interrupted.

        A blocking send is one call: the store replies to it when the task settles, so
        there is no moment when the task exists and nobody waits for it. (It was two
        calls, a ``Create`` then a ``Settle``: with a short retention the task could
        settle and be forgotten between them, -32001 for a task just created; and a
        hold on the task until the ``Settle`` came outlived a sender cancelled in
        between: session 28, review of the Low leftovers, A1.)

        Its bound: the call waits ``task_timeout`` + `BLOCKING_SEND_GRACE` (the run is
        cancelled at ``task_timeout`` and its task settles ``FAILED``), then a `get`
        (`CALL_TIMEOUT`) answers with the task as it is, WORKING if the store was too
        busy to reply in time. So a store that takes requests and never replies fails
        the send -32603 after ``task_timeout`` + 15 s, not after `CALL_TIMEOUT` as a
        separate ``Create`` call did (second review of bd5d6c5, A-1); a store that
        dies fails it at once."""
        scope = principal_scope(principal)
        history_length = (
            request.configuration.history_length
            if request.configuration.HasField("history_length")
            else None
        )
        if request.configuration.return_immediately:  # the snapshot: WORKING
            opened: Opened = await self._call(_submit_request(scope, request, None, 0))
            snapshot = opened.frames[0][1].task
            return public_task(snapshot, history_length, include_artifacts=True)
        submit = _submit_request(
            scope, request, None, 0, when_settled=ReplyWhenSettled(history_length)
        )
        try:
            status, value = await aio.call(
                self.name, submit, self.options.task_timeout + BLOCKING_SEND_GRACE
            )
        except CallTimeout:  # its run is past its deadline and being cancelled: as it is now
            task_id = submit.task_id if isinstance(submit, Create) else submit.message.task_id
            return await self.get(principal, task_id, history_length)
        except ProcessExit:
            raise _unavailable() from None
        if status == "error":
            raise value
        task: pb.Task = value
        return task

    async def send_streaming(
        self, principal: str, request: pb.SendMessageRequest, *, max_queue: int | None = None
    ) -> TaskSubscription:
        """As `send`, then the task's stream from its creation (the snapshot first)."""
        scope = principal_scope(principal)
        queue = self._queue(max_queue)
        return await self._open(lambda inbox: _submit_request(scope, request, inbox, queue))

    async def get(self, principal: str, task_id: str, history_length: int | None = None) -> pb.Task:
        """The task (its last `history_length` messages); -32001 unknown or not yours."""
        if history_length is not None and history_length < 0:
            raise errors.invalid_params("historyLength is >= 0")
        task: pb.Task = await self._call(Get(principal_scope(principal), task_id, history_length))
        return task

    async def list(self, principal: str, request: pb.ListTasksRequest) -> pb.ListTasksResponse:
        """The principal's tasks, newest first, a page at a time."""
        response: pb.ListTasksResponse = await self._call(
            ListPage(principal_scope(principal), request)
        )
        return response

    async def cancel(self, principal: str, task_id: str) -> pb.Task:
        """Cancel the task (its run too): CANCELED; -32002 once it is terminal."""
        task: pb.Task = await self._call(CancelTask(principal_scope(principal), task_id))
        return task

    async def subscribe(
        self,
        principal: str,
        task_id: str,
        *,
        after: int | None = None,
        max_queue: int | None = None,
    ) -> TaskSubscription:
        """The task's stream: the snapshot, the retained events after `after` (a
        Last-Event-ID inside the window), then live events."""
        if after is not None and (
            isinstance(after, bool) or not isinstance(after, int) or after < 0
        ):
            raise errors.invalid_params("Last-Event-ID is an int >= 0")
        scope = principal_scope(principal)
        queue = self._queue(max_queue)
        return await self._open(lambda inbox: Subscribe(scope, task_id, after, inbox, queue))

    async def _open(self, request_for: Any) -> TaskSubscription:
        """A subscription whose inbox (made on this thread, the event loop's) watches the
        store, opened by the request `request_for(inbox_pid)` builds."""
        inbox = Inbox(label="a2a task subscription")
        try:
            inbox.monitor(self.name)
            opened: Opened = await self._call(request_for(inbox.pid))
        except BaseException:
            inbox.close()
            raise
        return TaskSubscription(self, inbox, opened)

    def drain(self, timeout: float) -> bool:
        """Make the store refuse new work (Create and Continue answer -32603 "server
        stopping", `StoreStopping`) and wait, at most `timeout`, until no run is being
        started or resumed: after it, the store's running runs are all listed by
        `adk.runs`. A blocking call (`A2AServer.stop`); False when it timed out or the
        store is gone."""
        try:
            call(self.name, Drain(), max(timeout, 0.001))
        except (ProcessExit, CallTimeout):
            return False
        return True

    def stats(self) -> dict[str, int]:
        """Live counts: ``tasks`` (retained), ``active``, ``subscribers``, ``runs``
        (started and not ended). A blocking call: for tests and tools, not the loop."""
        try:
            counts: dict[str, int] = call(self.name, Stats(), CALL_TIMEOUT)
        except (ProcessExit, CallTimeout):
            return {"tasks": 0, "active": 0, "subscribers": 0, "runs": 0}
        return counts


def _submit_request(
    scope: str,
    request: pb.SendMessageRequest,
    subscriber: Any,
    max_queue: int,
    when_settled: ReplyWhenSettled | None = None,
) -> Create | Continue:
    """The store's request for `request`, with the pure work done here, on the caller's
    side: the message's byte size, and for a new task its id and what the agent
    receives (-32602 when the content model refuses it). The id is made here so that a
    blocking send whose reply is late can still read the task (`TaskStore.send`); a
    follow-up's task is ``message.task_id``."""
    message = request.message
    size = wire.json_bytes(message)
    if message.task_id:
        return Continue(scope, message, subscriber, max_queue, size, when_settled)
    content = wire.user_content(message)
    task_id = f"task-{uuid.uuid4().hex}"
    return Create(scope, message, subscriber, max_queue, size, content, task_id, when_settled)


class TaskSubscription:
    """An async iterator of ``(seq, pb.StreamResponse)`` (see the module docstring)."""

    def __init__(self, store: TaskStore, inbox: Inbox, opened: Opened) -> None:
        self._store = store
        self._inbox = inbox
        self.task_id = opened.task_id
        self._frames = list(opened.frames)
        self._sub_id = opened.sub_id
        self._ended = opened.ended or opened.sub_id is None
        self.detached = False
        if self._ended:
            inbox.close()

    def __aiter__(self) -> AsyncIterator[tuple[int, pb.StreamResponse]]:
        return self._items()

    async def _items(self) -> AsyncIterator[tuple[int, pb.StreamResponse]]:
        try:
            for frame in self._frames:
                yield frame
            self._frames = []
            last = None
            while not self._ended:
                if last is not None:
                    cast(self._store.name, Ack(self.task_id, self._sub_id or 0, last))
                try:
                    message = await self._inbox.areceive()
                except ProcessExit:
                    return
                match message:
                    case TaskEvent(_, seq, event, final):
                        last = seq
                        if final:
                            self._ended = True
                        yield seq, event
                    case Detached():
                        self.detached = True
                        return
                    case Down():
                        return
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop reading: the store forgets this subscriber; the task goes on."""
        if self._sub_id is not None and not self._ended:
            cast(self._store.name, Unsubscribe(self.task_id, self._sub_id))
        self._ended = True
        self._inbox.close()


def start_task_store(
    agent: Any,
    options: A2AServerOptions | Any = None,
    *,
    child_id: str,
    app_name: str | None = None,
    sessions: SessionService | None = None,
) -> TaskStore:
    """Start a task store for `agent` (a name or an `AgentRef`) as a child of the root
    tree; its runs use a Runner on `sessions` (by default an in-memory service the
    store owns). ``("a2a_task_store_start_failed", reason)`` when it does not start."""
    checked = server_options(options)
    ensure_started()
    reactor_loop()  # the kernel runtime starts here, not in the store's first Create
    default_task_supervisor()
    default_sync_pool()
    owned = None
    if sessions is None:
        sessions = owned = InMemorySessionService()
    runner = Runner(agent, app_name or f"a2a.{child_id}", sessions)
    name = (STORE_NAME, child_id)
    args = StoreArgs(runner, checked, RunLedger())
    spec = ChildSpec(
        child_id,
        lambda: TaskStoreServer.start_link(args, name=name),
        restart="permanent",
        shutdown=SHUTDOWN,
    )
    try:
        Supervisor.start_child(APP_NAME, spec)
    except SupervisorError as error:
        if owned is not None:
            owned.close()
        raise AdkError(
            ("a2a_task_store_start_failed", error.reason), "the A2A task store did not start"
        ) from None
    return TaskStore(name, child_id, checked, owned)


def stop_task_store(store: TaskStore) -> None:
    """Stop the store (its runs are cancelled) and remove it from the root tree;
    idempotent."""
    if whereis(APP_NAME) is not None:
        try:
            Supervisor.terminate_child(APP_NAME, store.child_id)
            Supervisor.delete_child(APP_NAME, store.child_id)
        except (SupervisorError, AdkError, ProcessExit):
            pass
    sessions, store._owned_sessions = store._owned_sessions, None
    if sessions is not None:
        sessions.close()
