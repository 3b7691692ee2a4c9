"""`AdmissionController`: the GenServer that grants, queues and releases permits.

A queued `acquire` is a deferred call (`NoReply`) answered with `reply` when a permit
frees up, its deadline timer fires, it is cancelled, or its owner dies. The
controller monitors every owner (the process that called `acquire`), so a permit
held by a process that crashes or is killed is released exactly once, and a queued
request whose owner dies is dropped. Replies are plain tuples; `api.py` turns them
into a `Permit` or an `AdkError`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

import structlog

from adk_actors.admission.config import MAX_TIMEOUT, AdmissionConfig, Overflow
from adk_actors.admission.ledger import Grant, Ledger, Waiter
from supervision import (
    Down,
    From,
    GenServer,
    NoReply,
    Pid,
    Ref,
    Reply,
    cancel_timer,
    demonitor,
    monitor,
    reply,
    self_pid,
    send_after,
)

_log = structlog.get_logger("adk.admission")


class AcquireRequest(NamedTuple):
    """What `acquire` sends: already validated by the caller's side."""

    request_id: str
    agent: str
    owner: Pid
    overflow: Overflow | None
    deadline: float | None
    timeout: float | None


class _Expire(NamedTuple):
    """Timer message: the queued request `request_id` (queued as `seq`) reached its deadline."""

    request_id: str
    seq: int


class ControllerState:
    """The ledger plus one monitor per owner; the controller's explicit state."""

    __slots__ = ("ledger", "monitors")

    def __init__(self, config: AdmissionConfig) -> None:
        self.ledger = Ledger(config)
        self.monitors: dict[Pid, Ref] = {}


def _error(reason: str, detail: str) -> tuple[str, str, str]:
    return ("error", reason, detail)


class AdmissionController(GenServer):
    """Owns the permits of one node: global and per-agent limits, a bounded FIFO queue."""

    def init(self, config: AdmissionConfig) -> ControllerState:
        """`config` was validated by `start_link`."""
        return ControllerState(config)

    def handle_call(self, request: Any, from_: From, state: ControllerState) -> Any:
        """``acquire``, ``release``, ``cancel`` and ``status``; anything else is refused."""
        kind = request[0] if isinstance(request, tuple) and request else None
        if kind == "acquire" and len(request) == 2 and isinstance(request[1], AcquireRequest):
            return self._acquire(request[1], from_, state)
        if kind == "release" and len(request) == 2:
            return Reply(self._release(state, request[1], "release"), state)
        if kind == "cancel" and len(request) == 2:
            return Reply(self._cancel(state, request[1]), state)
        if kind == "status":
            return Reply(state.ledger.status(), state)
        return Reply(_error("invalid_admission_request", "unknown request"), state)

    def handle_cast(self, msg: Any, state: ControllerState) -> ControllerState:
        """``("abandon", request_id)``: the caller gave up waiting for its reply."""
        if isinstance(msg, tuple) and len(msg) == 2 and msg[0] == "abandon":
            self._abandon(state, msg[1])
        return state

    def handle_info(self, msg: Any, state: ControllerState) -> ControllerState:
        """Deadline timers and owner `Down`s."""
        if isinstance(msg, _Expire):
            self._expire(state, msg)
        elif isinstance(msg, Down):
            self._owner_down(state, msg)
        return state

    # -- acquire ----------------------------------------------------------------------

    def _acquire(self, req: AcquireRequest, from_: From, state: ControllerState) -> Any:
        ledger = state.ledger
        config = ledger.config
        if req.request_id in ledger.requests:
            return Reply(_error("duplicate_request_id", "request id already in use"), state)
        blocked = ledger.blocked_by(req.agent)
        if blocked is None:
            grant = self._grant(state, req.request_id, req.agent, req.owner, waited=False)
            return Reply(("ok", grant.permit_id, grant.agent), state)
        overflow = req.overflow or config.overflow
        if overflow == "reject":
            _log.info(
                "adk.admission.rejected",
                agent=req.agent,
                reason="concurrency_limit_reached",
                scope=blocked,
            )
            return Reply(
                _error("concurrency_limit_reached", f"{blocked} concurrency limit reached"), state
            )
        if ledger.queued >= config.max_queue:
            _log.info(
                "adk.admission.rejected",
                agent=req.agent,
                reason="admission_queue_full",
                scope="queue",
            )
            return Reply(
                _error("admission_queue_full", f"admission queue is full ({config.max_queue})"),
                state,
            )
        now = time.monotonic()
        deadline = _deadline(req, config, now)
        if deadline <= now:
            _log.info("adk.admission.expired", agent=req.agent, queued=False)
            return Reply(
                _error("queue_deadline_exceeded", "deadline passed before admission"), state
            )
        waiter = ledger.enqueue(req.request_id, req.agent, req.owner, from_, deadline)
        self._watch(state, req.owner)
        waiter.timer = send_after(
            self_pid(), _Expire(waiter.request_id, waiter.seq), deadline - now
        )
        _log.debug("adk.admission.queued", agent=req.agent, queued=ledger.queued, scope=blocked)
        return NoReply(state)

    def _grant(
        self, state: ControllerState, request_id: str, agent: str, owner: Pid, *, waited: bool
    ) -> Grant:
        grant = state.ledger.grant(uuid.uuid4().hex, request_id, agent, owner)
        self._watch(state, owner)
        _log.debug(
            "adk.admission.admitted",
            agent=agent,
            waited=waited,
            active=state.ledger.active,
            agent_active=state.ledger.agent_active[agent],
        )
        return grant

    # -- release, cancel, abandon, expiry, owner death ---------------------------------

    def _release(self, state: ControllerState, permit_id: Any, cause: str) -> bool:
        if not isinstance(permit_id, str):
            return False
        grant = state.ledger.release(permit_id)
        if grant is None:
            return False
        _log.debug(
            "adk.admission.released", agent=grant.agent, cause=cause, active=state.ledger.active
        )
        self._unwatch_if_idle(state, grant.owner)
        self._admit_waiters(state)
        return True

    def _cancel(self, state: ControllerState, request_id: Any) -> bool:
        waiter = state.ledger.dequeue(request_id) if isinstance(request_id, str) else None
        if waiter is None:
            return False
        self._finish_waiter(state, waiter, "cancelled", "the queued request was cancelled")
        _log.info("adk.admission.cancelled", agent=waiter.agent)
        return True

    def _abandon(self, state: ControllerState, request_id: Any) -> None:
        if not isinstance(request_id, str):
            return
        item = state.ledger.requests.get(request_id)
        if isinstance(item, Waiter):
            state.ledger.dequeue(request_id)
            self._finish_waiter(state, item, "abandoned", "the caller stopped waiting")
            _log.info("adk.admission.abandoned", agent=item.agent, queued=True)
        elif isinstance(item, Grant):  # granted, but the reply came too late for the caller
            _log.info("adk.admission.abandoned", agent=item.agent, queued=False)
            self._release(state, item.permit_id, "abandoned")

    def _expire(self, state: ControllerState, msg: _Expire) -> None:
        item = state.ledger.requests.get(msg.request_id)
        if not isinstance(item, Waiter) or item.seq != msg.seq:
            return  # admitted, cancelled or gone meanwhile: a stale timer
        state.ledger.dequeue(msg.request_id)
        item.timer = None  # it fired
        self._finish_waiter(state, item, "queue_deadline_exceeded", "queue deadline passed")
        _log.info("adk.admission.expired", agent=item.agent, queued=True)

    def _owner_down(self, state: ControllerState, down: Down) -> None:
        owner = down.pid
        if state.monitors.get(owner) != down.ref:
            return
        del state.monitors[owner]
        grants, waiters = state.ledger.owner_items(owner)
        for waiter in waiters:
            state.ledger.dequeue(waiter.request_id)
            # The owner is gone; the reply only frees a fenced thread still blocked in call.
            self._finish_waiter(state, waiter, "requester_down", "the requester exited")
            _log.info("adk.admission.requester_down", agent=waiter.agent)
        for grant in grants:
            state.ledger.release(grant.permit_id)
            _log.info(
                "adk.admission.released",
                agent=grant.agent,
                cause="owner_down",
                active=state.ledger.active,
            )
        if grants:
            self._admit_waiters(state)

    # -- helpers ----------------------------------------------------------------------

    def _admit_waiters(self, state: ControllerState) -> None:
        """Grant permits to the oldest eligible waiters while there is room."""
        ledger = state.ledger
        while (waiter := ledger.next_eligible()) is not None:
            ledger.dequeue(waiter.request_id)
            if waiter.timer is not None:
                cancel_timer(waiter.timer)
            grant = self._grant(state, waiter.request_id, waiter.agent, waiter.owner, waited=True)
            reply(waiter.from_, ("ok", grant.permit_id, grant.agent))

    def _finish_waiter(
        self, state: ControllerState, waiter: Waiter, reason: str, detail: str
    ) -> None:
        """Answer a waiter that was just dequeued with an error; drop its timer and monitor."""
        if waiter.timer is not None:
            cancel_timer(waiter.timer)
        reply(waiter.from_, _error(reason, detail))
        self._unwatch_if_idle(state, waiter.owner)

    def _watch(self, state: ControllerState, owner: Pid) -> None:
        if owner not in state.monitors:
            state.monitors[owner] = monitor(owner)

    def _unwatch_if_idle(self, state: ControllerState, owner: Pid) -> None:
        if not state.ledger.has_owner(owner):
            ref = state.monitors.pop(owner, None)
            if ref is not None:
                demonitor(ref, flush=True)


def _deadline(req: AcquireRequest, config: AdmissionConfig, now: float) -> float:
    """The absolute deadline of a queued request: the earliest given (or the default),
    never more than `MAX_TIMEOUT` from now."""
    if req.deadline is None and req.timeout is None:
        return now + config.default_queue_timeout
    candidates = [now + MAX_TIMEOUT]
    if req.deadline is not None:
        candidates.append(req.deadline)
    if req.timeout is not None:
        candidates.append(now + req.timeout)
    return min(candidates)
