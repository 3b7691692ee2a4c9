"""The client side of admission control: `acquire`, `release`, `cancel`, `status`.

`acquire` blocks its caller while the request is queued; a process that must stay
responsive (an invocation server) uses `request_permit` instead: the answer arrives
later in its mailbox as a `supervision.Response`, which `permit_from_response` turns
into a `Permit` or the `AdkError` `acquire` would raise, and `withdraw` gives the
request up. `submit`/`await_permit` (the spec's ``submit``/``await``) are the same
protocol for a plain thread, with an explicit owner: `submit` returns an
`AdmissionRequest` at once, `await_permit` waits for its answer with a timeout.
Also `Permit`, `start_link` and `child_spec`. Every function talks to the
controller by pid or registered name (``adk.admission`` by default), resolved at call
time, so a caller reaches a restarted controller. Errors are `AdkError`s with stable
reasons.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from adk_actors.admission.config import (
    MAX_TIMEOUT,
    AdmissionConfig,
    Overflow,
    check_arguments,
    check_request_id,
    validate_config,
)
from adk_actors.admission.server import (
    Abandon,
    Acquire,
    AdmissionController,
    Cancel,
    Granted,
    Refused,
    Release,
    Status,
    Withdraw,
)
from providers.errors import AdkError
from supervision import (
    CallTimeout,
    ChildSpec,
    KernelError,
    Pid,
    ProcessExit,
    Ref,
    Response,
    call,
    cancel_request,
    cast,
    receive,
    self_pid,
    send_request,
)

NAME = "adk.admission"
"""The registered name of the application's controller (see `child_spec`)."""
CHILD_ID = "admission_control"
"""The child id in the application tree."""

CALL_GRACE = 5.0
"""Seconds a caller waits past a request's deadline for the controller's own answer."""
SHORT_CALL_TIMEOUT = 5.0
"""Timeout of calls that never wait in the queue (release, cancel, status)."""

Server = Pid | Hashable


@dataclass(frozen=True, slots=True)
class Permit:
    """Proof of admission, owned by the process that called `acquire`.

    Release it exactly once with `release(permit)` (or `permit.release()`, or use it as a
    context manager); if the owner dies first, the controller releases it.
    """

    id: str
    request_id: str
    agent: str
    server: Server = field(repr=False, compare=False)

    def release(self) -> bool:
        """Same as `release(self)`."""
        return release(self)

    def __enter__(self) -> Permit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        release(self)


@dataclass(slots=True, eq=False)
class AdmissionRequest:
    """A submitted request (`submit`): `request_id` (for `cancel`) and the agent.

    Its answer arrives in the mailbox of the process that submitted it, `requester`;
    `await_permit` (or `wait`) takes it from there. Once its submitter cancels it, the
    answer is dropped from that mailbox and awaiting it raises ``cancelled``.
    """

    request_id: str
    agent: str
    requester: Pid = field(repr=False)
    server: Server = field(repr=False)
    ref: Ref = field(repr=False)
    cancelled: bool = field(default=False, repr=False)

    def wait(self, timeout: float | None = None) -> Permit:
        """Same as `await_permit(self, timeout)`."""
        return await_permit(self, timeout)


def new_request_id() -> str:
    """A fresh request id, to pass to `acquire` when the request may have to be cancelled."""
    return uuid.uuid4().hex


def acquire(
    agent_name: str,
    *,
    overflow: Overflow | None = None,
    deadline: float | None = None,
    timeout: float | None = None,
    request_id: str | None = None,
    server: Server = NAME,
) -> Permit:
    """Take a permit for one invocation of `agent_name`; the calling process owns it.

    `overflow` overrides the controller's mode for this call. In queue mode the request
    waits at most until `deadline` (absolute `time.monotonic()`) or `timeout` seconds
    from now, whichever is earlier (default: the controller's `default_queue_timeout`).
    `request_id` (see `new_request_id`) lets another thread `cancel` a queued request.
    Raises `AdkError` with reason ``concurrency_limit_reached``, ``admission_queue_full``,
    ``queue_deadline_exceeded``, ``cancelled``, ``duplicate_request_id``,
    ``invalid_admission_request`` or ``admission_unavailable``.
    """
    request = _acquire_message(agent_name, overflow, deadline, timeout, request_id)
    wait = _wait_bound(request)
    try:
        answer = call(server, request, timeout=wait)
    except CallTimeout:
        cast(server, Abandon(request.request_id))  # frees a permit granted too late
        raise AdkError("admission_unavailable", "the admission controller did not answer") from None
    except ProcessExit:
        raise AdkError("admission_unavailable", "the admission controller is not running") from None
    return _permit(answer, server)


def request_permit(
    agent_name: str,
    *,
    overflow: Overflow | None = None,
    deadline: float | None = None,
    timeout: float | None = None,
    request_id: str | None = None,
    server: Server = NAME,
) -> Ref:
    """Ask for a permit without blocking; returns the `supervision.send_request` id.

    For a process that must stay responsive while its request waits in the queue: the
    answer arrives later in its own mailbox as one ``supervision.Response(ref, ok,
    value)`` (``ref`` is the returned id); pass it to `permit_from_response`. Exactly
    one arrives: the controller enforces the request's deadline, as for `acquire`
    (same arguments), and a controller that is gone or dies answers ``ok=False``.
    The calling process owns the permit: the controller monitors it and releases its
    permits, or drops its queued request, when it exits. Pass a `request_id` (see
    `new_request_id`) to be able to `withdraw` the request. Bad arguments raise
    ``invalid_admission_request`` at once; nothing is sent.
    """
    return send_request(
        server, _acquire_message(agent_name, overflow, deadline, timeout, request_id)
    )


def submit(
    agent_name: str,
    *,
    owner: Pid | None = None,
    overflow: Overflow | None = None,
    deadline: float | None = None,
    timeout: float | None = None,
    request_id: str | None = None,
    server: Server = NAME,
) -> AdmissionRequest:
    """Submit a request without blocking; returns its `AdmissionRequest` at once.

    The same request as `request_permit` (same arguments, deadline and answers), for
    a plain thread, which then calls `await_permit`. The permit is owned by `owner`
    (default: the caller): the controller releases it when the owner exits, and a
    queued request whose owner exits is answered ``owner_down``; one whose requester
    (the caller) exits is dropped. `cancel(request.request_id)` cancels it while
    queued (its answer is ``cancelled``), or releases its permit once granted. Bad
    arguments raise ``invalid_admission_request`` at once; nothing is sent.
    """
    if owner is not None and not isinstance(owner, Pid):
        raise AdkError("invalid_admission_request", "owner is a process id (Pid)")
    message = _acquire_message(agent_name, overflow, deadline, timeout, request_id)
    me = message.owner
    if owner is not None and owner != me:
        message = message._replace(owner=owner, requester=me)
    ref = send_request(server, message)
    return AdmissionRequest(message.request_id, message.agent, me, server, ref)


def await_permit(request: AdmissionRequest, timeout: float | None = None) -> Permit:
    """Wait up to `timeout` seconds (None: until it comes) for a submitted request's
    answer: the `Permit`, or the `AdkError` `acquire` would raise (``owner_down`` when
    the owner exited while it was queued).

    ``await_timeout`` when no answer came in time: the request is untouched, so
    await it again, or `cancel` it. Only the process that submitted it can await it,
    and only a plain thread (a server takes the `Response` in `handle_info`):
    otherwise, or for a bad `timeout`, ``invalid_await``. An answer is taken once.
    """
    if not isinstance(request, AdmissionRequest) or not _valid_wait(timeout):
        raise AdkError("invalid_await", "await an AdmissionRequest, timeout None or 0..86400 s")
    if self_pid() != request.requester:
        raise AdkError("invalid_await", "only the process that submitted it can await it")
    if request.cancelled:
        raise AdkError("cancelled", "the request was cancelled by its submitter")
    ref = request.ref
    try:
        response = receive(timeout, lambda m: type(m) is Response and m.request_id == ref)
    except TimeoutError:
        raise AdkError("await_timeout", f"no answer within {timeout} s") from None
    except ProcessExit:
        raise  # this thread's process was killed: it must hear of it
    except KernelError:
        raise AdkError("invalid_await", "a server takes its answer in handle_info") from None
    return permit_from_response(response, request.server)


def permit_from_response(response: Response, server: Server = NAME) -> Permit:
    """The `Permit` a `request_permit` answer grants, or the `AdkError` `acquire` raises.

    ``admission_unavailable`` when the controller was not running or died before it
    answered (``ok`` False). `server` is the controller the request went to (the
    permit's `release` goes there).
    """
    if not isinstance(response, Response):
        raise AdkError("invalid_admission_request", "expected a supervision.Response")
    if not response.ok:
        raise AdkError("admission_unavailable", "the admission controller is not running")
    return _permit(response.value, server)


def withdraw(request_id: str, *, server: Server = NAME) -> bool:
    """Give up a `request_permit` request of the calling process, whatever became of it.

    A queued request is cancelled (as `cancel`: its answer is ``cancelled``); one
    already granted to the caller (its `Granted` answer may still be on its way) is
    released. True if either happened; False if the request is unknown (refused,
    expired, released, or never made). The caller can then ignore its `Response`, or
    drop it first with `supervision.cancel_request`.
    """
    return _bool_answer(_short_call(server, Withdraw(check_request_id(request_id), self_pid())))


def release(permit: Permit) -> bool:
    """Give a permit back and admit waiters; True the first time, False afterwards.

    False also when the controller that granted it is gone (its permits went with it).
    """
    if not isinstance(permit, Permit):
        raise AdkError("invalid_admission_request", "release expects a Permit")
    try:
        answer = call(permit.server, Release(permit.id), timeout=SHORT_CALL_TIMEOUT)
    except ProcessExit:
        return False
    except CallTimeout:
        raise AdkError("admission_unavailable", "the admission controller did not answer") from None
    return _bool_answer(answer)


def cancel(request_id: str | AdmissionRequest, *, server: Server = NAME) -> bool:
    """Cancel a request: a queued one is dropped (its `acquire` or `await_permit` raises
    ``cancelled``); a granted one has its permit released. True if either was done,
    so at most once: False afterwards (and a later `release` of that permit is False
    too), or when the request is unknown. An `AdmissionRequest` names its controller."""
    handle = request_id if isinstance(request_id, AdmissionRequest) else None
    if handle is not None:
        server, request_id = handle.server, handle.request_id
    done = _bool_answer(_short_call(server, Cancel(check_request_id(request_id))))
    if handle is not None and self_pid() == handle.requester:
        handle.cancelled = True
        _forget_answer(handle.ref)
    return done


def _forget_answer(ref: Ref) -> None:
    """The submitter cancelled: its answer is never awaited, so it must not stay in the
    mailbox (nor arrive later)."""
    cancel_request(ref)
    with contextlib.suppress(TimeoutError, KernelError):
        receive(0, lambda m: type(m) is Response and m.request_id == ref)


def status(server: Server = NAME) -> dict[str, Any]:
    """JSON-safe counts and limits: active, queued, per-agent active/queued/limit."""
    answer = _short_call(server, Status())
    if not isinstance(answer, dict):
        raise _unexpected(answer)
    return answer


def start_link(
    config: Mapping[str, Any] | AdmissionConfig | None = None, *, name: Hashable | None = None
) -> Pid:
    """Start a controller linked to the caller; `config` is validated first (`AdkError`)."""
    return AdmissionController.start_link(validate_config(config), name=name)


def child_spec(
    config: Mapping[str, Any] | AdmissionConfig | None = None, *, name: Hashable = NAME
) -> ChildSpec:
    """The application's controller: registered as `name` (``adk.admission``), permanent.

    The config is validated now, so a bad one fails before the tree starts.
    """
    checked = validate_config(config)
    return ChildSpec(CHILD_ID, lambda: AdmissionController.start_link(checked, name=name))


def _acquire_message(
    agent_name: Any, overflow: Any, deadline: Any, timeout: Any, request_id: Any
) -> Acquire:
    """The checked `Acquire` message, owned by the calling process."""
    arguments = check_arguments(agent_name, overflow, deadline, timeout, request_id)
    return Acquire(
        request_id=arguments.request_id or new_request_id(),
        agent=arguments.agent_name,
        owner=self_pid(),
        overflow=arguments.overflow,
        deadline=arguments.deadline,
        timeout=arguments.timeout,
    )


def _permit(answer: Any, server: Server) -> Permit:
    """The permit of a `Granted` answer; a `Refused` one raises its reason."""
    match answer:
        case Granted(permit_id=permit_id, request_id=request_id, agent=agent):
            return Permit(permit_id, request_id, agent, server)
        case Refused(reason=reason, detail=detail):
            raise AdkError(reason, detail)
        case _:
            raise _unexpected(answer)


def _bool_answer(answer: Any) -> bool:
    """The answer of `Release`, `Cancel` or `Withdraw`; a `Refused` one raises its reason."""
    match answer:
        case bool():
            return answer
        case Refused(reason=reason, detail=detail):
            raise AdkError(reason, detail)
        case _:
            raise _unexpected(answer)


def _unexpected(answer: Any) -> AdkError:
    return AdkError(
        "admission_unavailable", f"unexpected answer from the controller: {type(answer).__name__}"
    )


def _valid_wait(timeout: Any) -> bool:
    if timeout is None:
        return True
    return (
        not isinstance(timeout, bool)
        and isinstance(timeout, int | float)
        and 0 <= timeout <= MAX_TIMEOUT
    )


def _wait_bound(request: Acquire) -> float:
    """How long the caller's `call` may wait: past every deadline the controller enforces."""
    now = time.monotonic()
    if request.deadline is not None:
        return max(0.0, min(request.deadline - now, MAX_TIMEOUT)) + CALL_GRACE
    if request.timeout is not None:
        return request.timeout + CALL_GRACE
    return MAX_TIMEOUT + CALL_GRACE


def _short_call(server: Server, request: Withdraw | Cancel | Status) -> Any:
    try:
        return call(server, request, timeout=SHORT_CALL_TIMEOUT)
    except ProcessExit:
        raise AdkError("admission_unavailable", "the admission controller is not running") from None
    except CallTimeout:
        raise AdkError("admission_unavailable", "the admission controller did not answer") from None
