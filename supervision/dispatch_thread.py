"""The ``"thread"`` dispatcher: each server owns a pykka `ThreadingActor` thread.

The actor's inbox is the server's mailbox; each envelope goes straight to
`ServerProcess.handle`. The inbox is a `queue.SimpleQueue` (pykka's default is a
`queue.Queue`, which costs a condition variable per message). A blocked handler
blocks only its own server.
"""

from __future__ import annotations

import queue
from typing import Any

import pykka

from supervision.envelopes import CAST
from supervision.process import Process, bind_thread
from supervision.server_process import ServerProcess


class _ServerActor(pykka.ThreadingActor):
    """The pykka actor that owns a server's thread and mailbox."""

    use_daemon_thread = True

    def __init__(self, process: ThreadServerProcess) -> None:
        super().__init__()
        self._process = process
        self.on_receive = process.handle  # type: ignore[method-assign]

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.SimpleQueue()

    def on_start(self) -> None:
        bind_thread(self._process)


class ThreadServerProcess(ServerProcess):
    """A server on its own pykka actor thread."""

    __slots__ = ("_actor_ref", "_tell")

    def __init__(self, server: Any, parent: Process | None) -> None:
        super().__init__(server, parent)
        self._actor_ref = _ServerActor.start(self)
        self._tell = self._actor_ref.tell

    def tell(self, envelope: tuple[Any, ...]) -> None:
        try:
            self._tell(envelope)
        except pykka.ActorDeadError:
            pass  # the process died meanwhile: like any message to a dead pid, dropped

    def cast(self, message: Any) -> None:
        try:
            self._tell((CAST, message))
        except pykka.ActorDeadError:
            pass

    def mailbox_size(self) -> int:
        inbox: queue.SimpleQueue[Any] = self._actor_ref.actor_inbox  # type: ignore[assignment]
        return inbox.qsize()

    def on_exit(self) -> None:
        self.state = None
        self._idle = None
        self._actor_ref.stop(block=False)
