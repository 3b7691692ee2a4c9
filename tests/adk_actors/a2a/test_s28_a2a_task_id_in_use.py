"""A ``Create`` whose task id the store holds already is an internal error that says
nothing about whose task it is (second review of bd5d6c5, A-2).

No client chooses a new task's id: `tasks._submit_request` makes a fresh uuid, and a
message with a ``taskId`` is a ``Continue``. So the refusal can only come from a broken
handle: -32603 (internal), not -32602 (bd5d6c5 blamed the client's params), and the
same for the task's owner and any other principal (elsewhere another principal's task
is "not found"; this answer tells neither apart). The request is built as the handle
builds it and sent through the handle's own call, to the real store.
"""

from __future__ import annotations

import pytest

import adk_actors as adk
from adk_actors.a2a import errors, tasks
from adk_actors.a2a.tasks import TaskStore, principal_scope
from adk_actors.a2a.tasks_protocol import Create
from tests.adk_actors.a2a.store_helpers import (
    ALICE,
    BOB,
    echo,
    refusal,
    request,
    run,
    start_store,
    stopped_after,
)


@pytest.fixture
def stores():
    yield from stopped_after()


def create_with_id(principal: str, task_id: str) -> Create:
    """The ``Create`` the handle sends for a new message, with `task_id` instead of a
    fresh one."""
    submit = tasks._submit_request(principal_scope(principal), request("again"), None, 0)
    assert isinstance(submit, Create)
    return submit._replace(task_id=task_id)


def test_review2_a2_a_task_id_in_use_is_an_internal_error_for_every_principal(stores):
    store: TaskStore = start_store(stores, adk.ScriptedProvider(fn=echo), name="IdInUse")
    task = run(store.send(ALICE, request("one")))
    before = store.stats()
    by_owner = refusal(store._call(create_with_id(ALICE, task.id)))
    by_other = refusal(store._call(create_with_id(BOB, task.id)))
    for refused in (by_owner, by_other):
        assert refused.code == errors.INTERNAL_ERROR  # was -32602 (invalid params)
        assert str(refused) == str(by_owner)  # the owner's and Bob's: the same answer
    assert store.stats() == before  # nothing created, nothing started
    kept = run(store.get(ALICE, task.id))
    assert kept.status.state == task.status.state and kept.history == task.history
