"""Shared by the durable workflow tests: `Blocked` (a 2-step workflow whose second
step blocks; with `tail`, a third step follows), the `ledger` fixture (an LMDB ledger), waits and coordinator kills."""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
from adk_actors import workflows
from adk_actors.workflows import LmdbLedger
from adk_actors.workflows.checkpoint import SequentialCursor
from adk_actors.workflows.launch import workflow_name
from providers.errors import AdkError
from supervision import DynamicSupervisor, exit, is_fenced_thread, self_pid, whereis

SEED = "SEED-5f1d-never-stored"
WAIT = 10.0


def reason(fn) -> object:
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


def eventually(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def children() -> int:
    return DynamicSupervisor.count_children("adk.workflows")["active"]


@pytest.fixture
def ledger(tmp_path):
    store = LmdbLedger(tmp_path / "ledger")
    yield store
    store.close()


class Blocked:
    """A 2-step sequential workflow whose second step blocks until `allow`; counts the
    calls of each step and keeps the contexts and task pids it saw. A killed sync
    worker's thread is abandoned, not stopped: it is fenced, and its late return is
    discarded, so only unfenced completions count. With `tail`, a third step
    (``third``, counted in `third_calls`) follows the blocking one, so the second
    step's result is a commit of its own rather than the run's completion."""

    def __init__(self, workflow_id: str = "durable-workflow", *, tail: bool = False) -> None:
        self.first_calls = 0
        self.second_calls = 0
        self.third_calls = 0
        self.second_started = threading.Event()
        self.allow = threading.Event()
        self.contexts: list[dict] = []
        self.second_pids: list = []
        self.wf = adk.compile_workflow(
            {
                "version": 1,
                "id": workflow_id,
                "kind": "sequential",
                "max_steps": 4,
                "steps": [
                    {"id": "first", "run": self.first},
                    {"id": "second", "run": self.second},
                    *([{"id": "third", "run": self.third}] if tail else []),
                ],
            }
        )

    def first(self, state, context):
        self.first_calls += 1
        self.contexts.append(context)
        return {"first_committed": True}

    def second(self, state, context):

        self.contexts.append(context)
        self.second_pids.append(self_pid())
        self.second_started.set()
        self.allow.wait(30)
        if not is_fenced_thread():
            self.second_calls += 1
        return {"second_committed": True}

    def third(self, state):
        self.third_calls += 1
        return {"third_committed": True}

    def start(self, ledger, invocation_id: str, **options) -> str:
        iid, ref = workflows.start_durable(
            self.wf, {}, ledger=ledger, invocation_id=invocation_id, **options
        )
        assert iid == invocation_id
        assert self.second_started.wait(WAIT)
        return ref

    def release(self) -> None:
        self.allow.set()


def assert_second_checkpoint(record) -> None:
    assert record.checkpoint.cursor == SequentialCursor(next_index=1)
    assert record.checkpoint.state == {"first_committed": True}


def kill_coordinator(ref: str) -> None:
    pid = whereis(workflow_name(ref))
    assert pid is not None
    exit(pid, "kill")
    eventually(lambda: not pid.is_alive())


def seeded_failure(workflow_id: str):
    """A 1-step workflow whose step fails with an HTTP-like error carrying `SEED`."""
    return adk.compile_workflow(
        {
            "version": 1,
            "id": workflow_id,
            "kind": "sequential",
            "steps": [
                {
                    "id": "step",
                    "run": lambda state: workflows.Error(("http_error", 503, {"body": SEED})),
                }
            ],
        }
    )
