"""The ``"thread"`` dispatcher: each server owns a pykka `ThreadingActor` thread.

The actor's inbox is the server's mailbox; `on_receive` hands each envelope to
`ServerProcess.handle`. A blocked handler blocks only its own server.
"""

from __future__ import annotations

from typing import Any

import pykka

from supervision.process import Process, bind_thread
from supervision.server_process import ServerProcess
from supervision.signals import Ref


class _ServerActor(pykka.ThreadingActor):
    """The pykka actor that owns a server's thread and mailbox."""

    use_daemon_thread = True

    def __init__(self, process: ThreadServerProcess) -> None:
        super().__init__()
        self._process = process

    def on_start(self) -> None:
        bind_thread(self._process)

    def on_receive(self, message: Any) -> None:
        self._process.handle(message)


class ThreadServerProcess(ServerProcess):
    """A server on its own pykka actor thread."""

    def __init__(self, server: Any, parent: Process | None) -> None:
        super().__init__(server, parent)
        self._actor_ref = _ServerActor.start(self)
        self._tell = self._actor_ref.tell

    def tell(self, envelope: tuple[Any, ...]) -> None:
        try:
            self._tell(envelope)
        except pykka.ActorDeadError:
            pass  # the process died meanwhile: like any message to a dead pid, dropped

    def mailbox_size(self) -> int:
        return self._actor_ref.actor_inbox.qsize()  # type: ignore[attr-defined,no-any-return]

    def on_exit(self) -> None:
        self.state = None
        self._actor_ref.stop(block=False)

    def remove_down_message(self, ref: Ref) -> None:
        inbox = self._actor_ref.actor_inbox
        with inbox.mutex:  # type: ignore[attr-defined]
            for envelope in inbox.queue:  # type: ignore[attr-defined]
                if self.is_down_envelope(envelope.message, ref):
                    inbox.queue.remove(envelope)  # type: ignore[attr-defined]
                    return
