"""Shared by the ledger tests: a metadata and checkpoints, tokens, live owners, and the
`owner`, `ledger` (MemoryLedger, LmdbLedger) and `store` (also SqliteLedger) fixtures."""

from __future__ import annotations

import secrets
import threading
import time

import pytest

from adk_actors.workflows.checkpoint import Checkpoint, Remaining, SequentialCursor
from adk_actors.workflows.ledger import MemoryLedger
from adk_actors.workflows.ledger_lmdb import LmdbLedger
from providers.errors import AdkError
from supervision import Task

from ._sql_ledger import SqliteLedger

META = {"workflow_id": "lease-workflow", "workflow_version": 1, "kind": "sequential"}


def checkpoint(revision: int, **state) -> Checkpoint:
    return Checkpoint(
        workflow_id="lease-workflow",
        workflow_version=1,
        kind="sequential",
        cursor=SequentialCursor(next_index=min(revision, 2)),
        state={"revision": revision, **state},
        remaining=Remaining(steps=4, transfers=0),
    )


CP0, CP1 = checkpoint(0), checkpoint(1)


def token() -> str:
    return secrets.token_hex(32)


def reason(fn) -> object:
    with pytest.raises(AdkError) as info:
        fn()
    return info.value.reason


class LiveOwner:
    """An owner process that lives until `stop` (a task blocked on an event)."""

    def __init__(self) -> None:
        self._release = threading.Event()
        self._task = Task.start(self._release.wait, 30)
        self.pid = self._task.pid

    def stop(self) -> None:
        self._release.set()
        while self.pid.is_alive():  # a killed one is already gone
            time.sleep(0.001)

    def kill(self) -> None:
        self._task.kill()
        self._release.set()


@pytest.fixture
def owner():
    live = LiveOwner()
    yield live
    live.stop()


@pytest.fixture(params=["memory", "lmdb"])
def ledger(request, tmp_path):
    if request.param == "memory":
        yield MemoryLedger()
    else:
        store = LmdbLedger(tmp_path / "ledger")
        yield store
        store.close()


@pytest.fixture(params=["memory", "lmdb", "sqlite"])
def store(request, tmp_path):
    """Any store of the protocol, for the tests that use nothing else."""
    if request.param == "memory":
        yield MemoryLedger()
    else:
        opened = (LmdbLedger if request.param == "lmdb" else SqliteLedger)(str(tmp_path / "ledger"))
        yield opened
        opened.close()
