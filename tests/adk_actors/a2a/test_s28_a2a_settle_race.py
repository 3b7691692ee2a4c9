"""A blocking send whose task settles and expires before its `Settle` arrives still gets
the task (session 28, Low leftovers, item 2: ``test_a_store_leaves_nothing_behind``
failed once under load with ``retention`` 0.0).

`TaskStore.send` makes two calls: ``Create`` (the task starts) and ``Settle`` (answer
once it is terminal). Under load the run could end, and a retention of 0.0 forget the
task (every store call prunes first), between the two: ``Settle`` found no task and the
send raised -32001 for the task it had just created. The store now keeps a task until
its blocking send collects it. The interleaving is forced, not hoped for: a trace hook
holds the sending coroutine just before its ``Settle`` call while the test makes sure
the run has ended and the store has pruned.
"""

from __future__ import annotations

import sys
import threading

import pytest
from a2a.types import a2a_pb2 as pb

import adk_actors as adk
from adk_actors.a2a.tasks import TaskStore
from supervision import aio
from tests.adk_actors.a2a.store_helpers import ALICE, echo, request, run, start_store, stopped_after
from tests.helpers import wait_until


@pytest.fixture
def stores():
    yield from stopped_after()


def _hold_before_settle(
    looked_up: threading.Event, go_on: threading.Event
):  # a sys.settrace function
    """Stop the thread when `TaskStore.send` calls `aio.call` itself (its ``Settle``:
    its ``Create`` goes through `TaskStore._call`) until `go_on` is set."""

    def trace(frame, event, arg):
        caller = frame.f_back
        if (
            event == "call"
            and frame.f_code is aio.call.__code__
            and caller is not None
            and caller.f_code is TaskStore.send.__code__
        ):
            looked_up.set()
            go_on.wait(10)
        return None

    return trace


def test_a_task_that_expires_before_its_settle_is_still_answered(stores):
    store = start_store(stores, adk.ScriptedProvider(fn=echo), name="Settling", retention=0.0)
    held, go_on = threading.Event(), threading.Event()
    answers: list[pb.Task | BaseException] = []

    def sender() -> None:
        sys.settrace(_hold_before_settle(held, go_on))
        try:
            answers.append(run(store.send(ALICE, request("one"))))
        except BaseException as error:  # the assertion below shows it
            answers.append(error)
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=sender)
    thread.start()
    try:
        assert held.wait(10)  # created, its Settle not sent yet
        wait_until(lambda: store.stats()["active"] == 0)  # the run has ended: settled
        store.stats()  # a call: the store prunes what has expired first
    finally:
        go_on.set()
        thread.join(10)
    assert not thread.is_alive()
    (answer,) = answers
    assert isinstance(answer, pb.Task), answer  # was RpcError -32001: task not found
    assert answer.status.state == pb.TASK_STATE_COMPLETED
    wait_until(lambda: store.stats()["tasks"] == 0)  # collected: retention forgets it
