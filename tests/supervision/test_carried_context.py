"""Work carries its starter's contextvars: tasks, spawned servers, start_child."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

import supervision as sv
from supervision import aio
from supervision.child_spec import StartChild
from supervision.tasks import Task
from tests.helpers import wait_until

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")

pytestmark = pytest.mark.usefixtures("each_dispatcher")


async def read_async():
    return request_id.get()


def test_a_task_runs_in_a_copy_of_its_starters_context():
    token = request_id.set("req-1")
    try:
        sync_task = Task.start(request_id.get)
        async_task = Task.start(read_async)
        assert sync_task.wait(2) == "req-1"
        assert async_task.wait(2) == "req-1"
    finally:
        request_id.reset(token)
    assert Task.start(request_id.get).wait(2) == "none"  # the pool thread kept nothing


def test_a_tasks_own_changes_stay_in_the_task():
    def change():
        request_id.set("changed")
        return request_id.get()

    token = request_id.set("req-2")
    try:
        assert Task.start(change).wait(2) == "changed"
        assert request_id.get() == "req-2"
    finally:
        request_id.reset(token)


class Reader(sv.GenServer):
    def init(self, args):
        return {"init": request_id.get()}

    def handle_call(self, request, from_, state):
        if request == "set":
            request_id.set(f"set-by-{id(self)}")
            return sv.Reply("ok", state)
        if request == "task":
            return sv.Reply(Task.start(request_id.get).wait(2), state)
        return sv.Reply((state["init"], request_id.get()), state)


def test_a_server_runs_init_and_callbacks_in_its_spawners_context():
    token = request_id.set("spawner")
    try:
        pid = Reader.start_link()
    finally:
        request_id.reset(token)
    assert sv.call(pid, "get") == ("spawner", "spawner")
    assert sv.call(pid, "task") == "spawner"  # and so do the tasks it starts
    sv.stop(pid)


def test_a_variable_a_server_sets_stays_its_own():
    first, second = Reader.start_link(), Reader.start_link()
    assert sv.call(first, "set") == "ok"
    value = sv.call(first, "get")[1]
    assert value.startswith("set-by-")
    assert sv.call(first, "get")[1] == value  # kept across its callbacks
    assert sv.call(second, "get") == ("none", "none")  # never leaks to another server
    sv.stop(first)
    sv.stop(second)


def test_start_child_starts_the_child_in_the_callers_context_and_restarts_in_the_supervisors():
    dyn = sv.DynamicSupervisor.start_link()
    static = sv.Supervisor.start_link([])
    token = request_id.set("request-7")
    try:
        dyn_child = sv.DynamicSupervisor.start_child(
            dyn, sv.ChildSpec("r", Reader.start_link, restart="permanent")
        )
        static_child = sv.Supervisor.start_child(
            static, sv.ChildSpec("r", Reader.start_link, restart="permanent")
        )
    finally:
        request_id.reset(token)
    assert sv.call(dyn_child, "get") == ("request-7", "request-7")
    assert sv.call(static_child, "get") == ("request-7", "request-7")
    sv.exit(dyn_child, "kill")
    wait_until(lambda: len(sv.DynamicSupervisor.which_children(dyn)) == 1)
    wait_until(lambda: sv.DynamicSupervisor.which_children(dyn)[0].pid not in (None, dyn_child))
    restarted = sv.DynamicSupervisor.which_children(dyn)[0].pid
    assert sv.call(restarted, "get") == ("none", "none")  # not the old request's
    sv.stop(dyn)
    sv.stop(static)


def test_a_malformed_context_in_start_child_is_refused():
    dyn = sv.DynamicSupervisor.start_link()
    answer = sv.call(dyn, StartChild(sv.ChildSpec("r", Reader.start_link), "not a context"))
    assert isinstance(answer, sv.Refused)
    sv.stop(dyn)


def test_aio_blocking_calls_and_iteration_steps_run_in_the_awaiting_coroutines_context():

    def values():
        yield request_id.get()
        yield request_id.get()

    async def main():
        request_id.set("coroutine")
        blocking = await aio.run_blocking(request_id.get)
        stepped = [item async for item in aio.iterate(values())]
        return blocking, stepped

    assert asyncio.run(main()) == ("coroutine", ["coroutine", "coroutine"])
