"""A blocking send is one call, answered as its task settles: a sender slower than the
retention still gets its task, and a sender that goes away leaves nothing held.

Session 28, Low leftovers, item 2: ``test_a_store_leaves_nothing_behind`` failed once
under load with ``retention`` 0.0. `TaskStore.send` made two calls, ``Create`` then
``Settle``: the run could end and retention forget the task between them, and the
``Settle`` found no task (-32001 for a task just created). Commit c48b015 then held
the task until its ``Settle``; the review of it (/tmp/s28/REVIEW_LOWS.md) found:

- A1: a sender cancelled between the two calls never sent its ``Settle``, so the task
  (and a paused run in the store's ledger) was kept past ``retention`` for good;
- A2: a task collected after its retention was over was forgotten up to one
  ``retention`` late (the `Prune` timer of a later task was not moved earlier).

Now the blocking ``Create``/``Continue`` registers its caller as a waiter, so there is
no second call, no hold, and retention runs on its own timer. The interleavings are
forced, not hoped for: the sending coroutine has told its request after one loop step
(`aio.call` sends before it awaits), and then either is cancelled or has its event
loop blocked while the test watches the store.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
from adk_actors.a2a.tasks import TaskStore, principal_scope
from adk_actors.runner import Runner
from adk_actors.sessions import InMemorySessionService
from adk_actors.tools.suspension import request_human_approval
from tests.adk_actors.a2a.store_helpers import (
    ALICE,
    APPROVAL,
    request,
    start_store,
    stopped_after,
)
from tests.helpers import wait_until

GENEROUS = 10.0
"""The bound on anything the store does on its own (a run, a `Prune` timer)."""
HELD = 60.0
"""How long at most a `SlowSender` blocks its loop (a test that fails lets it go at once:
longer than every wait, so no wait can pass because the sender came back)."""
IDLE = {"tasks": 0, "active": 0, "subscribers": 0, "runs": 0}
"""`TaskStore.stats` of a store that holds nothing."""


@pytest.fixture
def sessions():
    service = InMemorySessionService()
    yield service
    service.close()


@pytest.fixture
def stores(sessions):
    yield from stopped_after()


def echo_store(stores: list[TaskStore], name: str, ran: threading.Event) -> TaskStore:
    """A store with retention 0.0 whose model sets `ran` (proof that the send's request
    reached the store and its run started) and echoes."""

    def model(history, tools):
        ran.set()
        return {"text": f"echo: {history[-1].text_value()}"}

    return start_store(stores, adk.ScriptedProvider(fn=model), name=name, retention=0.0)


def paused_store(stores, sessions, name: str, ran: threading.Event, **options) -> TaskStore:
    """A store whose task pauses for approval (INPUT_REQUIRED, a paused run behind it);
    its model sets `ran` (the send's request reached the store, its run started)."""

    def model(history, tools):
        ran.set()
        return APPROVAL

    provider = adk.ScriptedProvider(fn=model)
    return start_store(stores, provider, [request_human_approval], name, sessions, **options)


def pending_pauses(sessions, name: str) -> list[str]:
    """The paused runs of app ``a2a.a2a-test-<name>`` still resumable, read from the
    sessions: never a call to the store (which would prune first)."""
    runner = Runner(name, f"a2a.a2a-test-{name}", sessions)
    return [item["run_id"] for item in adk.runs.pending(runner, principal_scope(ALICE))]


def cancel_after_telling(store: TaskStore, message: str) -> None:
    """Cancel a blocking send once it has told its request, before any answer (as an
    ``asyncio.wait_for``, a server shutdown or any caller-side timeout does)."""

    async def main() -> None:
        sending = asyncio.create_task(store.send(ALICE, request(message)))
        await asyncio.sleep(0)  # its first step ran: the request is told, the reply awaited
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending

    asyncio.run(main())


class SlowSender:
    """A blocking send on a thread of its own whose event loop is blocked right after
    the request is told, until `go_on`: the sender cannot take any answer meanwhile."""

    def __init__(self, store: TaskStore, message: str) -> None:
        self.told, self.go_on = threading.Event(), threading.Event()
        self.answers: list[pb.Task | BaseException] = []
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._send(store, message),), daemon=True
        )
        self._thread.start()

    async def _send(self, store: TaskStore, message: str) -> None:
        sending = asyncio.create_task(store.send(ALICE, request(message)))
        await asyncio.sleep(0)  # the request is told
        self.told.set()
        self.go_on.wait(HELD)  # blocks the loop: no reply can be taken
        try:
            self.answers.append(await sending)
        except BaseException as error:  # the assertion on `answer` shows it
            self.answers.append(error)

    def answer(self) -> pb.Task | BaseException:
        self.go_on.set()
        self._thread.join(GENEROUS)
        assert not self._thread.is_alive()
        (answer,) = self.answers
        return answer


def test_a_task_forgotten_while_its_sender_is_slow_is_still_answered(stores):
    """Item 2 (the flake) and review A1: with retention 0.0 the task is forgotten as
    soon as its run ends, although its sender has not taken the answer yet (c48b015
    kept it until a ``Settle``), and the sender still gets it (before c48b015: -32001)."""
    ran = threading.Event()
    store = echo_store(stores, "SlowSender", ran)
    sender = SlowSender(store, "one")
    try:
        assert sender.told.wait(GENEROUS)
        assert ran.wait(GENEROUS)  # the task exists and its run has started
        wait_until(lambda: store.stats() == IDLE, GENEROUS)
    finally:
        answer = sender.answer()
    assert isinstance(answer, pb.Task), answer
    assert answer.status.state == pb.TASK_STATE_COMPLETED


def test_review_a1_a_cancelled_blocking_send_leaves_no_task_behind(stores):
    """Review A1 (a2a_uncollected_task_kept.py): the send is cancelled after its request
    reached the store; the task still runs (a disconnected request owns nothing) and is
    forgotten once its retention (0.0) is over, as any other (c48b015 kept it)."""
    ran = threading.Event()
    store = echo_store(stores, "Cancelled", ran)
    cancel_after_telling(store, "one")
    assert ran.wait(GENEROUS)  # the task was created: its run started
    wait_until(lambda: store.stats()["tasks"] == 0, GENEROUS)


def test_review_a1_a_cancelled_send_of_a_task_that_pauses_releases_its_paused_run(stores, sessions):
    """Review A1, INPUT_REQUIRED (a2a_uncollected_paused_run_kept.py): the paused run
    leaves the store's ledger and its pause the sessions once the task expires (c48b015
    kept both)."""
    ran = threading.Event()
    store = paused_store(stores, sessions, "CancelledPause", ran, retention=0.0)
    cancel_after_telling(store, "go")
    assert ran.wait(GENEROUS)  # the task was created: its run started
    wait_until(lambda: store.stats() == IDLE, GENEROUS)
    wait_until(lambda: pending_pauses(sessions, "CancelledPause") == [], GENEROUS)


def test_review_a2_a_slow_senders_paused_task_is_released_by_its_timer(stores, sessions):
    """Review A2 (a2a_collected_prune_late.py): a task whose retention ends while its
    sender is slow is released on its own `Prune` timer, with no call to the store in
    between (its pause leaves the sessions), not when the sender comes back or some
    later task's timer fires; and the sender still gets the INPUT_REQUIRED task."""
    ran = threading.Event()
    store = paused_store(stores, sessions, "SlowPause", ran, retention=1.0)
    sender = SlowSender(store, "go")
    try:
        assert sender.told.wait(GENEROUS)
        assert ran.wait(GENEROUS)
        (run_id,) = wait_until(lambda: pending_pauses(sessions, "SlowPause"), GENEROUS)
        wait_until(lambda: run_id not in pending_pauses(sessions, "SlowPause"), GENEROUS)
    finally:
        answer = sender.answer()
    assert isinstance(answer, pb.Task), answer
    assert answer.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert store.stats() == IDLE
