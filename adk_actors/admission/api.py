"""The client side of admission control: `acquire`, `release`, `cancel`, `status`.

Also `Permit`, `start_link` and `child_spec`. Every function talks to the controller
by pid or registered name (``adk.admission`` by default), resolved at call time, so
a caller reaches a restarted controller. Errors are `AdkError`s with stable reasons.
"""

from __future__ import annotations

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
    check_agent_name,
    check_deadline,
    check_overflow,
    check_request_id,
    check_timeout,
    validate_config,
)
from adk_actors.admission.server import AcquireRequest, AdmissionController
from providers.errors import AdkError
from supervision import CallTimeout, ChildSpec, Pid, ProcessExit, call, cast, self_pid

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
    request = AcquireRequest(
        request_id=new_request_id() if request_id is None else check_request_id(request_id),
        agent=check_agent_name(agent_name),
        owner=self_pid(),
        overflow=check_overflow(overflow),
        deadline=check_deadline(deadline),
        timeout=check_timeout(timeout),
    )
    wait = _wait_bound(request)
    try:
        answer = call(server, ("acquire", request), timeout=wait)
    except CallTimeout:
        cast(server, ("abandon", request.request_id))  # frees a permit granted too late
        raise AdkError("admission_unavailable", "the admission controller did not answer") from None
    except ProcessExit:
        raise AdkError("admission_unavailable", "the admission controller is not running") from None
    if answer[0] == "ok":
        return Permit(answer[1], request.request_id, answer[2], server)
    raise AdkError(answer[1], answer[2])


def release(permit: Permit) -> bool:
    """Give a permit back and admit waiters; True the first time, False afterwards.

    False also when the controller that granted it is gone (its permits went with it).
    """
    if not isinstance(permit, Permit):
        raise AdkError("invalid_admission_request", "release expects a Permit")
    try:
        return bool(call(permit.server, ("release", permit.id), timeout=SHORT_CALL_TIMEOUT))
    except ProcessExit:
        return False
    except CallTimeout:
        raise AdkError("admission_unavailable", "the admission controller did not answer") from None


def cancel(request_id: str, *, server: Server = NAME) -> bool:
    """Cancel a queued request: its `acquire` raises ``cancelled``. False if not queued."""
    return bool(_short_call(server, ("cancel", check_request_id(request_id))))


def status(server: Server = NAME) -> dict[str, Any]:
    """JSON-safe counts and limits: active, queued, per-agent active/queued/limit."""
    result: dict[str, Any] = _short_call(server, ("status",))
    return result


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


def _wait_bound(request: AcquireRequest) -> float:
    """How long the caller's `call` may wait: past every deadline the controller enforces."""
    now = time.monotonic()
    if request.deadline is not None:
        return max(0.0, min(request.deadline - now, MAX_TIMEOUT)) + CALL_GRACE
    if request.timeout is not None:
        return request.timeout + CALL_GRACE
    return MAX_TIMEOUT + CALL_GRACE


def _short_call(server: Server, request: tuple[Any, ...]) -> Any:
    try:
        return call(server, request, timeout=SHORT_CALL_TIMEOUT)
    except ProcessExit:
        raise AdkError("admission_unavailable", "the admission controller is not running") from None
    except CallTimeout:
        raise AdkError("admission_unavailable", "the admission controller did not answer") from None
