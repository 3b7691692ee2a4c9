"""The A2A task store's server: one kernel GenServer per served agent.

It keeps every task of its agent (bounded: `A2AServerOptions`), numbers each task's
events, holds a replay window of ``max_events`` per task and pushes live events to
subscribers with credit: a subscriber (a private inbox of the HTTP side) gets at most
``max_subscriber_queue`` unacknowledged events and is detached at that ceiling, so a
slow reader never blocks the store or the run. Tasks are backed by stable runs, each
followed by a bridge (`task_runs.follow_run`, a coroutine task owned by this server)
that casts `RunStarted` / `RunRefused` / `RunEnded` here; the server itself never
waits on a run. Only ``principal_scope(principal)`` is kept of a principal.

Supervision: the server traps exits, so a shutdown runs `terminate`, which releases
every run of the `RunLedger` (running ones cancelled, paused ones, kept there while
their task waits for input, have their continuation dropped: `task_runs.release_run`).
A server killed outright skips `terminate`: its bridges stop with it (they are its
tasks), and its successor, started by the root tree, opens a new epoch of the ledger
its child spec keeps and releases, in kernel tasks, the runs its predecessor left
(reason ``a2a_task_store_restarted``). The successor starts empty: the old task ids
are unknown (-32001). A cancelled, expired (a `Prune` timer: on time) or evicted task's
paused run is released the same way: no paused run outlives its task. After a `Drain`
(`A2AServer.stop`) new work is refused (`StoreStopping`).
"""

from __future__ import annotations

import functools
import secrets
import time
import uuid
from typing import Any

from a2a.types import a2a_pb2 as pb

from adk_actors import runs
from adk_actors.a2a import errors, wire
from adk_actors.a2a import tasks_model as model
from adk_actors.a2a.task_runs import (
    STORE_RESTARTED_REASON,
    STORE_STOPPED_REASON,
    TIMEOUT_REASON,
    PauseRef,
    RetryRelease,
    RunEnded,
    RunPlan,
    RunRefused,
    RunStarted,
    follow_run,
    release_run,
)
from adk_actors.a2a.tasks_list import list_page, store_stats
from adk_actors.a2a.tasks_protocol import (
    ACTIVE,
    Ack,
    CancelTask,
    Continue,
    Create,
    Detached,
    Drain,
    Entry,
    Get,
    ListPage,
    Opened,
    Phase,
    Prune,
    State,
    Stats,
    StoreArgs,
    StoreStopping,
    Subscribe,
    Subscriber,
    TaskEvent,
    Unsubscribe,
)
from adk_actors.a2a.tasks_retention import arm_prune, evict_one, prune, release_later
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome, Paused
from supervision import (
    Down,
    From,
    GenServer,
    NoReply,
    Pid,
    Reply,
    Task,
    TaskResult,
    demonitor,
    monitor,
    reply,
    self_pid,
    send,
    trap_exit,
)
from supervision.logs import get_logger

_log = get_logger("adk_actors.a2a")


def _ok(value: Any) -> tuple[str, Any]:
    return ("ok", value)


def _error(error: errors.RpcError) -> tuple[str, Any]:
    return ("error", error)


def _capacity(why: str) -> errors.RpcError:
    return errors.RpcError(errors.UNSUPPORTED_OPERATION, why)


CREATION_SEQ = 1
"""A task's first event, its creation (a replay from it starts with the snapshot)."""


class TaskStoreServer(GenServer):
    """The task store (see the module docstring); requests come from `tasks.TaskStore`."""

    def init(self, args: StoreArgs) -> State:
        trap_exit(True)
        epoch, left = args.ledger.open_epoch()
        state = State(args.runner, args.options, args.ledger, epoch, secrets.token_bytes(32))
        for run_id in left:  # a killed predecessor's runs, paused ones too: released in
            release_later(state, run_id, STORE_RESTARTED_REASON)  # tasks, not here
        if left:
            _log.warning("adk.a2a.task_store_restarted", cancelled_runs=len(left))
        return state

    def terminate(self, reason: Any, state: Any) -> None:
        if isinstance(state, State):
            _, left = state.ledger.open_epoch()  # a start still under way cancels itself
            for run_id in left:  # running and paused: nothing of the store's is left
                release_run(state.runner, state.ledger, run_id, STORE_STOPPED_REASON)

    def handle_call(self, request: Any, from_: From, state: State) -> Any:
        prune(state)
        match request:
            case Create() | Continue() if state.draining:
                return Reply(_error(StoreStopping()), state)
            case Create() | Continue():
                try:
                    opened = self._submit(request, state)
                except errors.RpcError as error:
                    return Reply(_error(error), state)
                if request.when_settled is None:
                    return Reply(_ok(opened), state)
                # a blocking send: answered by `_settle` (its run has not even started)
                waiter = (from_, request.when_settled.history_length)
                state.tasks[opened.task_id].waiters.append(waiter)
                return NoReply(state)
            case Get(scope, task_id, history_length):
                entry = self._visible(state, scope, task_id)
                if entry is None:
                    return Reply(_error(errors.task_not_found()), state)
                return Reply(_ok(model.public_task(entry.task, history_length, True)), state)
            case ListPage(scope, list_request):
                try:
                    return Reply(_ok(list_page(scope, list_request, state)), state)
                except errors.RpcError as error:
                    return Reply(_error(error), state)
            case CancelTask(scope, task_id):
                try:
                    return Reply(_ok(self._cancel(scope, task_id, state)), state)
                except errors.RpcError as error:
                    return Reply(_error(error), state)
            case Subscribe():
                try:
                    return Reply(_ok(self._subscribe(request, state)), state)
                except errors.RpcError as error:
                    return Reply(_error(error), state)
            case Stats():
                return Reply(store_stats(state), state)
            case Drain():
                state.draining = True
                if self._starting(state):
                    state.drain_waiters.append(from_)
                    return NoReply(state)
                return Reply(_ok(None), state)
        return Reply(_error(errors.RpcError(errors.INTERNAL_ERROR, "unsupported request")), state)

    def handle_cast(self, msg: Any, state: State) -> State:
        match msg:
            case Ack(task_id, sub_id, seq):
                entry = state.tasks.get(task_id)
                sub = entry.subscribers.get(sub_id) if entry is not None else None
                if sub is not None:
                    while sub.unacked and sub.unacked[0] <= seq:
                        sub.unacked.popleft()
            case Unsubscribe(task_id, sub_id):
                self._drop_subscriber(state, task_id, sub_id)
            case RunStarted(task_id, generation, run_id):
                self._run_started(state, task_id, generation, run_id)
            case RunRefused(task_id, generation, reason):
                self._run_refused(state, task_id, generation, reason)
            case RunEnded(task_id, generation, run_id, outcome):
                if not isinstance(outcome, Paused):  # a paused run is released later
                    state.ledger.discard(run_id)
                self._run_ended(state, task_id, generation, run_id, outcome)
        self._answer_drain(state)
        return state

    def handle_info(self, msg: Any, state: State) -> State:
        match msg:
            case Down(ref=ref):
                where = state.watches.pop(ref, None)
                if where is not None:
                    self._drop_subscriber(state, *where)
            case TaskResult(pid, ok, _):
                where = state.bridges.pop(pid, None)
                if where is not None and not ok:
                    task_id, generation = where
                    _log.warning("adk.a2a.bridge_failed", task_id=task_id)
                    entry = self._current(state, task_id, generation)
                    if entry is not None and entry.run_id is not None:
                        release_later(state, entry.run_id)  # nobody follows it
                    failed = Failed("a2a_bridge_failed")
                    self._run_ended(state, task_id, generation, "", failed)
            case RetryRelease(run_id, reason):
                release_later(state, run_id, reason)
            case Prune():
                state.prune_armed = False
                prune(state)
                arm_prune(state)
        self._answer_drain(state)
        return state

    def _starting(self, state: State) -> bool:
        """Whether a task's run is still being started or resumed (its id unknown yet)."""
        return any(entry.phase is Phase.STARTING for entry in state.tasks.values())

    def _answer_drain(self, state: State) -> None:
        """Answer the `Drain` calls once no run is being started or resumed."""
        if state.drain_waiters and not self._starting(state):
            waiters, state.drain_waiters = state.drain_waiters, []
            for from_ in waiters:
                reply(from_, _ok(None))

    # -- submit ----------------------------------------------------------------------------

    def _submit(self, request: Create | Continue, state: State) -> Opened:
        options = state.options
        if request.message_bytes > options.max_message_bytes:
            raise errors.invalid_params("message too large")
        if isinstance(request, Create):
            entry = self._create(request, state)
        else:
            entry = self._continue(request, state)
        frames = [(entry.seq, model.snapshot_event(model.public_task(entry.task, None, True)))]
        sub_id = None
        if request.subscriber is not None:
            sub_id = self._add_subscriber(state, entry, request.subscriber, request.max_queue)
        return Opened(entry.task.id, frames, sub_id, False)

    def _admit(self, state: State, *, new_task: bool) -> None:
        """Refuse past ``max_active``; a new task also needs room under ``max_tasks``
        (the task settled longest ago is evicted for it, never an active one)."""
        options = state.options
        if len(state.tasks) - len(state.settled) >= options.max_active:
            raise _capacity("too many active tasks")
        if new_task and len(state.tasks) >= options.max_tasks and not evict_one(state):
            raise _capacity("too many retained tasks")

    def _create(self, request: Create, state: State) -> Entry:
        task_id = request.task_id  # made by the caller: `tasks._submit_request`
        if task_id in state.tasks:  # a fresh uuid: never, unless the handle is broken
            # an internal error, not -32602: no client chooses a new task's id; and
            # scope-blind, since it tells a client nothing (second review of bd5d6c5, A-2)
            raise errors.RpcError(errors.INTERNAL_ERROR, "task id already in use")
        self._admit(state, new_task=True)
        message = pb.Message()
        message.CopyFrom(request.message)
        message.task_id = task_id
        if not message.context_id:
            message.context_id = f"ctx-{uuid.uuid4().hex}"
        state.orders += 1
        task, sizes = model.new_task(task_id, message.context_id, message, request.message_bytes)
        entry = Entry(task, request.scope, state.orders, sizes=sizes)
        model.trim_history(task, sizes, state.options)
        state.tasks[task_id] = entry
        entry.seq = CREATION_SEQ  # its snapshot goes to the creator only: never kept
        start = functools.partial(
            runs.start,
            state.runner,
            request.scope,
            message.context_id,
            request.content,
            retention=max(state.options.retention, 1.0),
            max_buffered_events=state.options.run_max_buffered_events,
        )
        self._launch(state, entry, start)
        return entry

    def _continue(self, request: Continue, state: State) -> Entry:
        message = request.message
        entry = self._visible(state, request.scope, message.task_id)
        if entry is None:
            raise errors.task_not_found()
        if entry.phase is Phase.TERMINAL:
            raise errors.RpcError(errors.UNSUPPORTED_OPERATION, "task is terminal")
        if entry.phase is not Phase.INTERRUPTED or entry.run_id is None:
            raise errors.invalid_params("task is not awaiting input")
        if message.context_id and message.context_id != entry.task.context_id:
            raise errors.invalid_params("contextId does not match the task's")
        self._admit(state, new_task=False)
        copy = pb.Message()
        copy.CopyFrom(message)
        copy.context_id = entry.task.context_id
        size = request.message_bytes + model.MESSAGE_IDS
        model.add_history(entry.task, entry.sizes, copy, size, state.options)
        start = functools.partial(
            runs.resume,
            entry.run_id,
            model.human_answer(wire.response_value(copy)),
            runner=state.runner,
            user_id=entry.scope,
            retention=max(state.options.retention, 1.0),
            max_buffered_events=state.options.run_max_buffered_events,
        )
        entry.pause_status = pb.TaskStatus()
        entry.pause_status.CopyFrom(entry.task.status)
        entry.settled_at = None
        state.settled.pop(entry.task.id, None)
        self._launch(state, entry, start)
        return entry

    def _launch(self, state: State, entry: Entry, start: Any) -> None:
        """Start the task's bridge (a new generation) and put the task in WORKING."""
        entry.generation += 1
        entry.phase = Phase.STARTING
        plan = RunPlan(
            self_pid(),
            entry.task.id,
            entry.generation,
            start,
            time.monotonic() + state.options.task_timeout,
            state.ledger,
            state.epoch,
        )
        bridge = Task.start(follow_run, plan, notify=True)
        state.bridges[bridge.pid] = (entry.task.id, entry.generation)
        model.set_status(entry.task, entry.sizes, pb.TASK_STATE_WORKING)
        self._publish(state, entry, model.status_event(entry.task))

    # -- run reports -----------------------------------------------------------------------

    def _current(self, state: State, task_id: str, generation: int) -> Entry | None:
        entry = state.tasks.get(task_id)
        if entry is None or entry.generation != generation:
            return None
        return entry

    def _run_started(self, state: State, task_id: str, generation: int, run_id: str) -> None:
        entry = self._current(state, task_id, generation)
        if entry is not None and entry.run_id is not None and entry.run_id != run_id:
            state.ledger.discard(entry.run_id)  # the paused run this one resumed
            entry.run_id = run_id
        if entry is None or entry.phase is Phase.TERMINAL:
            release_later(state, run_id)  # canceled or evicted meanwhile
            return
        entry.run_id = run_id
        entry.phase = Phase.RUNNING

    def _run_refused(self, state: State, task_id: str, generation: int, reason: Any) -> None:
        entry = self._current(state, task_id, generation)
        if entry is None or entry.phase is Phase.TERMINAL:
            if entry is not None and entry.pause_status is not None and entry.run_id:
                release_later(state, entry.run_id)  # canceled while its resume was refused
            return
        if entry.pause_status is not None:  # a refused resume: the task waits as before
            entry.task.status.CopyFrom(entry.pause_status)
            entry.phase = Phase.INTERRUPTED
            self._publish(state, entry, model.status_event(entry.task), final=True)
            refusal = errors.invalid_params(
                f"the response was refused: {model.reason_text(reason)}"
            )
            self._settle(state, entry, refusal)
            return
        self._finish(state, entry, pb.TASK_STATE_FAILED, model.failure_message(entry.task, reason))

    def _run_ended(
        self, state: State, task_id: str, generation: int, run_id: str, outcome: Outcome
    ) -> None:
        entry = self._current(state, task_id, generation)
        if entry is None or entry.phase is Phase.TERMINAL:
            if isinstance(outcome, Paused):  # it paused as its task ended: nobody resumes it
                release_later(state, run_id)
            return
        task = entry.task
        match outcome:
            case Completed(output):
                text = model.output_text(output)
                made = model.completion_artifact(text, task, state.options)
                if made is None:
                    reason = "agent response exceeded configured limits"
                    self._finish(
                        state, entry, pb.TASK_STATE_FAILED, model.failure_message(task, reason)
                    )
                    return
                artifact, size = made
                task.artifacts.append(artifact)
                entry.sizes.artifacts += size + 1
                self._publish(state, entry, model.artifact_event(task, artifact))
                final = wire.agent_message(text, context_id=task.context_id, task_id=task.id)
                # the final message is the artifact's text under the message's ids
                model.add_history(task, entry.sizes, final, size + model.MESSAGE_IDS, state.options)
                self._finish(state, entry, pb.TASK_STATE_COMPLETED, None)
            case Paused(event):
                pause = PauseRef(entry.scope, task.context_id, event.invocation_id)
                state.ledger.paused(run_id, pause)
                entry.pause_status = None
                model.set_status(
                    task,
                    entry.sizes,
                    pb.TASK_STATE_INPUT_REQUIRED,
                    model.pause_message(task, event),
                )
                entry.phase = Phase.INTERRUPTED
                if not model.fits_task(entry.sizes, state.options):
                    model.set_status(task, entry.sizes, pb.TASK_STATE_INPUT_REQUIRED)
                self._publish(state, entry, model.status_event(task), final=True)
                self._settle(state, entry)
            case Cancelled(reason) if reason == TIMEOUT_REASON:
                self._finish(
                    state, entry, pb.TASK_STATE_FAILED, model.failure_message(task, reason)
                )
            case Cancelled():
                message = wire.agent_message(
                    "task canceled", context_id=task.context_id, task_id=task.id
                )
                self._finish(state, entry, pb.TASK_STATE_CANCELED, message)
            case Failed(reason):
                self._finish(
                    state, entry, pb.TASK_STATE_FAILED, model.failure_message(task, reason)
                )

    def _finish(
        self, state: State, entry: Entry, task_state: int, message: pb.Message | None
    ) -> None:
        """Put the task in its terminal `task_state` and tell everyone who waits."""
        entry.phase = Phase.TERMINAL
        model.set_status(entry.task, entry.sizes, task_state, message)
        if not model.fits_task(entry.sizes, state.options):
            model.trim_history(entry.task, entry.sizes, state.options)
        self._publish(state, entry, model.status_event(entry.task), final=True)
        self._settle(state, entry)

    def _settle(self, state: State, entry: Entry, refusal: errors.RpcError | None = None) -> None:
        entry.settled_at = time.monotonic()
        state.settled.pop(entry.task.id, None)
        state.settled[entry.task.id] = None
        arm_prune(state)
        waiters, entry.waiters = entry.waiters, []
        for from_, history_length in waiters:
            if refusal is not None:
                reply(from_, _error(refusal))
            else:
                reply(from_, _ok(model.public_task(entry.task, history_length, True)))

    # -- cancel ----------------------------------------------------------------------------

    def _cancel(self, scope: str, task_id: str, state: State) -> pb.Task:
        entry = self._visible(state, scope, task_id)
        if entry is None:
            raise errors.task_not_found()
        if entry.phase is Phase.TERMINAL:
            raise errors.task_not_cancelable(wire.state_name(entry.task.status.state))
        if entry.phase in (Phase.RUNNING, Phase.INTERRUPTED) and entry.run_id is not None:
            release_later(state, entry.run_id)  # a paused run too: never resumable
        task = entry.task
        message = wire.agent_message("task canceled", context_id=task.context_id, task_id=task.id)
        self._finish(state, entry, pb.TASK_STATE_CANCELED, message)
        return model.public_task(task, None, True)

    # -- subscriptions ---------------------------------------------------------------------

    def _subscribe(self, request: Subscribe, state: State) -> Opened:
        entry = self._visible(state, request.scope, request.task_id)
        if entry is None:
            raise errors.task_not_found()
        after = request.after
        if after is not None and after > entry.seq:
            raise errors.invalid_params("Last-Event-ID is ahead of the task's events")
        oldest = entry.events[0][0] if entry.events else entry.seq + 1
        if oldest == CREATION_SEQ + 1:  # the creation is numbered, never kept (its snapshot
            oldest = CREATION_SEQ  # is the one a replay starts with anyway)
        in_window = after is not None and after >= oldest - 1
        snapshot = model.snapshot_event(model.public_task(entry.task, None, True))
        if entry.phase is Phase.TERMINAL and not in_window:
            raise errors.RpcError(errors.UNSUPPORTED_OPERATION, "task is terminal")
        if in_window:
            assert after is not None
            frames = [(after, snapshot)]
            frames.extend((seq, event) for seq, event in entry.events if seq > after)
        else:
            frames = [(entry.seq, snapshot)]
        if entry.phase not in ACTIVE:
            return Opened(entry.task.id, frames, None, True)
        sub_id = self._add_subscriber(state, entry, request.subscriber, request.max_queue)
        return Opened(entry.task.id, frames, sub_id, False)

    def _add_subscriber(self, state: State, entry: Entry, pid: Pid, max_queue: int) -> int:
        if len(entry.subscribers) >= state.options.max_subscribers_per_task:
            raise _capacity("too many subscribers for this task")
        state.sub_ids += 1
        watch = monitor(pid)
        entry.subscribers[state.sub_ids] = Subscriber(pid, watch, max_queue)
        state.watches[watch] = (entry.task.id, state.sub_ids)
        return state.sub_ids

    def _drop_subscriber(self, state: State, task_id: str, sub_id: int) -> None:
        entry = state.tasks.get(task_id)
        sub = entry.subscribers.pop(sub_id, None) if entry is not None else None
        if sub is not None:
            demonitor(sub.watch, flush=True)
            state.watches.pop(sub.watch, None)

    def _publish(
        self, state: State, entry: Entry, event: pb.StreamResponse, final: bool = False
    ) -> None:
        """Number `event`, keep it in the replay window and push it to every subscriber
        with credit left (one at the ceiling is detached); `final` ends subscriptions and
        reaches a subscriber even at its ceiling (it replaces the `Detached` it would get:
        the reader's credit counts the event it is still writing)."""
        entry.seq += 1
        seq = entry.seq
        entry.events.append((seq, event))
        while len(entry.events) > state.options.max_events:
            entry.events.popleft()
        for sub_id, sub in list(entry.subscribers.items()):
            if len(sub.unacked) >= sub.max_queue and not final:
                send(sub.pid, Detached(sub_id))
                self._drop_subscriber(state, entry.task.id, sub_id)
                _log.info("adk.a2a.subscriber_detached", task_id=entry.task.id)
                continue
            sub.unacked.append(seq)
            send(sub.pid, TaskEvent(sub_id, seq, event, final))
            if final:
                self._drop_subscriber(state, entry.task.id, sub_id)

    # -- lookup -----------------------------------------------------------

    def _visible(self, state: State, scope: str, task_id: str) -> Entry | None:
        entry = state.tasks.get(task_id)
        return entry if entry is not None and entry.scope == scope else None
