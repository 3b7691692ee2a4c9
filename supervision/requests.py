"""Asynchronous calls: `send_request` (OTP's ``gen_server:send_request/2``).

A process that must stay responsive while a server works on its request (an
invocation waiting for an admission permit or a lane slot) sends the request and
goes on; the answer arrives later in its own mailbox as one `Response` message:

    request_id = send_request(controller, Acquire(...))
    ...
    def handle_info(self, msg, state):
        match msg:
            case Response(request_id=rid, ok=True, value=permit) if rid == state.pending: ...
            case Response(ok=False, value=reason): ...   # the server died or was not there

The server sees an ordinary call (`handle_call` with a `From`; `Reply`, or
`NoReply` then `reply(from_, value)`), so no server needs to know how it was called.
Exactly one `Response` arrives per request: the reply, or ``ok=False`` with the
server's exit reason if it dies first (``"noproc"`` if it was not alive). A request
can be abandoned with `cancel_request`: no `Response` arrives for it afterwards
(unless it was already in the mailbox), though the server may still act on it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

from supervision.envelopes import CALL
from supervision.errors import KernelError, ProcessExit
from supervision.gen_server import _server
from supervision.pid import Pid
from supervision.process import Process, current_process
from supervision.reply_slot import From
from supervision.signals import Reason, Ref


class Response(NamedTuple):
    """The answer to `send_request`: ``ok`` with the reply, or not ``ok`` with the
    server's exit reason."""

    request_id: Ref
    ok: bool
    value: Any


class _MessageFrom(From):
    """A reply slot that delivers the answer as a `Response` to the requester."""

    __slots__ = ("_callee", "_request_id", "_requester")

    def __init__(self, requester: Process, callee: Process, request_id: Ref) -> None:
        super().__init__()
        self._requester = requester
        self._callee = callee
        self._request_id = request_id

    def _wake(self) -> None:
        _pending.pop(self._request_id, None)
        self._callee.remove_watcher(self)  # a no-op when the callee is exiting
        self._requester.deliver(Response(self._request_id, not self.failed, self.value))

    def notify_down(self, ref: Hashable, pid: Pid, reason: Reason) -> None:
        self.settle(reason, True)


_pending: dict[Ref, _MessageFrom] = {}
"""Requests not answered yet, so `cancel_request` can find their slot."""


def send_request(dest: Pid | Hashable, request: Any) -> Ref:
    """Send `request` to a server (pid or name) as a call whose answer arrives later as
    a `Response` message in the caller's mailbox; returns its request id."""
    me = current_process()
    if me is None or (not me.alive and not me.is_pseudo):
        raise ProcessExit(
            getattr(me, "exit_reason", "noproc"), "a killed process cannot send requests"
        )
    request_id = Ref()
    process = _server(dest)
    if process is None:
        me.deliver(Response(request_id, False, "noproc"))
        return request_id
    if process is me:
        raise KernelError("calling_self", "a server cannot send a request to itself")
    slot = _MessageFrom(me, process, request_id)
    if not process.add_watcher(slot, slot):
        me.deliver(Response(request_id, False, "noproc"))
        return request_id
    _pending[request_id] = slot
    process.tell((CALL, request, slot))
    return request_id


def cancel_request(request_id: Ref, dest: Pid | Hashable | None = None) -> bool:
    """Stop waiting for `request_id`: its `Response` is not delivered after this
    (one already in the mailbox stays). True if it was still unanswered."""
    del dest  # kept for symmetry with OTP's signature; the slot knows its server
    slot = _pending.pop(request_id, None)
    if slot is None or not slot.claim_for_timeout():
        return False
    slot._callee.remove_watcher(slot)
    return True
