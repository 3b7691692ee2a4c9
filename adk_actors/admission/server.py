"""`AdmissionController`: the GenServer that grants, queues and releases permits.

A queued `acquire` is a deferred call (`NoReply`) answered with `reply` when a permit
frees up, its deadline timer fires, it is cancelled, or its owner dies. The
controller monitors every owner (the process that called `acquire`, or the one a
`submit` named), so a permit held by a process that crashes or is killed is released
exactly once, and a queued request whose owner dies is dropped (its requester, when
another process, hears ``owner_down``); a queued request whose requester dies is
dropped too. Cancelling a request releases its permit if it was granted, once.
Replies are typed (`Granted`, `Refused`); `api.py` turns them into a `Permit` or an
`AdkError`.

Metrics (`default_metrics()`): ``adk.admission.queue{lane}`` goes up when a request
is queued and down exactly once when it leaves the queue (granted, cancelled,
abandoned, expired, its owner or requester died, or the controller stopped, even
killed: `QueueGauge`), so it reads the requests waiting now; ``adk.admission.rejected{lane, reason}`` counts the
controller's refusals by reason (a request its caller cancelled, abandoned or left by
exiting is answered `Refused` too, but not counted). `lane` is the limit that made the request wait or
refused it: the agent's name for its own limit, `GLOBAL_LANE` for the global limit,
the queue bound or a malformed request.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

from adk_actors import collector
from adk_actors.admission.config import MAX_TIMEOUT, AdmissionConfig, Overflow
from adk_actors.admission.ledger import Grant, Ledger, Scope, Waiter
from adk_actors.observability.metrics import Metrics, default_metrics
from supervision import (
    Down,
    ExitSignal,
    From,
    GenServer,
    NoReply,
    Pid,
    Reason,
    Ref,
    Reply,
    Stop,
    cancel_timer,
    demonitor,
    monitor,
    reply,
    self_pid,
    send_after,
    trap_exit,
)
from supervision.logs import get_logger

_log = get_logger("adk.admission")

GLOBAL_LANE = "_global"
"""The metrics lane of what the global limit, the queue bound or a malformed request decided."""


# -- the protocol: what clients send (see `api.py`) and what the controller answers ------


class Acquire(NamedTuple):
    """Call: a permit for one invocation of `agent`, owned by `owner` (checked by the
    caller's side: see `AcquireArguments`). Answered `Granted` or `Refused`, at once or
    when the queued request is admitted, expires, is cancelled or its owner dies.
    `requester` is the caller when it is not the owner (a `submit` for another
    process): while queued, both are watched."""

    request_id: str
    agent: str
    owner: Pid
    overflow: Overflow | None
    deadline: float | None
    timeout: float | None
    requester: Pid | None = None


class Release(NamedTuple):
    """Call: give a granted permit back. Answered True the first time, else False."""

    permit_id: str


class Cancel(NamedTuple):
    """Call: drop a queued request (its caller gets ``Refused("cancelled")``), or
    release the permit it was granted. True if either was done (so once at most)."""

    request_id: str


class Withdraw(NamedTuple):
    """Call from the requester: drop its request whatever became of it, queued (as
    `Cancel`) or already granted to `owner` (released). True if either was done."""

    request_id: str
    owner: Pid


class Status(NamedTuple):
    """Call: JSON-safe counts and limits (a dict)."""


class Abandon(NamedTuple):
    """Cast: the caller stopped waiting for its `Acquire`; drop it or release its permit."""

    request_id: str


class Granted(NamedTuple):
    """Answer to `Acquire`: the permit `permit_id` for `agent`, asked as `request_id`."""

    permit_id: str
    request_id: str
    agent: str


class Refused(NamedTuple):
    """Answer to `Acquire` (or to a malformed message): a stable `reason` and a detail."""

    reason: str
    detail: str


class _Expire(NamedTuple):
    """Timer message: the queued request `request_id` (queued as `seq`) reached its deadline."""

    request_id: str
    seq: int


class QueueGauge:
    """What one controller has counted in ``adk.admission.queue``, by lane: up when a
    request is queued, down when it leaves the queue, and whatever is still counted
    given back once when the controller ends (`give_back`), so the gauge never keeps
    the queue of a controller that is gone. It holds no reference to the controller's
    state, so it can be given back by a finalizer of that state (a killed controller
    runs no `terminate`)."""

    __slots__ = ("counted", "metrics")

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.counted: dict[str, int] = {}

    def up(self, lane: str) -> None:
        self.counted[lane] = self.counted.get(lane, 0) + 1
        self.metrics.admission_queued(lane, 1)

    def down(self, lane: str) -> None:
        left = self.counted.get(lane, 0) - 1
        if left > 0:
            self.counted[lane] = left
        else:
            self.counted.pop(lane, None)
        self.metrics.admission_queued(lane, -1)

    def give_back(self) -> None:
        """Take every request still counted out of the gauge (idempotent)."""
        counted, self.counted = self.counted, {}
        for lane, count in counted.items():
            self.metrics.admission_queued(lane, -count)


class ControllerState:
    """The ledger plus one monitor per owner, and the metrics it reports to; the
    controller's explicit state. Invariant: `queue` counts exactly the ledger's
    waiters, by lane."""

    __slots__ = ("__weakref__", "ledger", "metrics", "monitors", "queue")

    def __init__(self, config: AdmissionConfig) -> None:
        self.ledger = Ledger(config)
        self.monitors: dict[Pid, Ref] = {}
        self.metrics: Metrics = default_metrics()
        self.queue = QueueGauge(self.metrics)


class AdmissionController(GenServer):
    """Owns the permits of one node: global and per-agent limits, a bounded FIFO queue."""

    def init(self, config: AdmissionConfig) -> ControllerState:
        """`config` was validated by `start_link`. Traps exits, so a shutdown runs
        `terminate` (see `handle_info` for the other exit signals). A killed controller
        runs no `terminate`: its queue leaves the gauge once its state is dropped."""
        trap_exit(True)
        state = ControllerState(config)
        # a killed controller runs no `terminate`: its queue is given back once its state
        # is freed (by the kill; or, if a collection frees it, by the next controller's
        # init or terminate, not on the acquire path: see `collector.finalize`)
        collector.finalize(state, state.queue.give_back)
        collector.run_deferred()
        return state

    def terminate(self, reason: Reason, state: ControllerState) -> None:
        """The requests still queued leave the queue metric (their callers see the
        controller exit)."""
        state.queue.give_back()
        collector.run_deferred()

    def handle_call(self, request: Any, from_: From, state: ControllerState) -> Any:
        """`Acquire`, `Release`, `Cancel`, `Withdraw`, `Status`; anything else (an unknown
        or malformed message) is answered `Refused("invalid_admission_request")` and
        changes nothing."""
        match request:
            case Acquire(
                request_id=str(),
                agent=str(),
                owner=Pid(),
                overflow=None | "reject" | "queue",
                deadline=None | float(),
                timeout=None | float(),
                requester=None | Pid(),
            ):
                return self._acquire(request, from_, state)
            case Release(permit_id=str() as permit_id):
                return Reply(self._release(state, permit_id, "release"), state)
            case Cancel(request_id=str() as request_id):
                return Reply(self._cancel(state, request_id), state)
            case Withdraw(request_id=str() as request_id, owner=Pid() as owner):
                return Reply(self._withdraw(state, request_id, owner), state)
            case Status():
                return Reply(state.ledger.status(), state)
            case _:
                _log.warning("adk.admission.invalid_message", kind=type(request).__name__)
                refused = _refuse(
                    state, GLOBAL_LANE, "invalid_admission_request", "unknown request"
                )
                return Reply(refused, state)

    def handle_cast(self, msg: Any, state: ControllerState) -> ControllerState:
        """`Abandon`: the caller gave up waiting for its reply. Anything else is ignored."""
        match msg:
            case Abandon(request_id=str() as request_id):
                self._abandon(state, request_id)
            case _:
                _log.warning("adk.admission.invalid_message", kind=type(msg).__name__)
        return state

    def handle_info(self, msg: Any, state: ControllerState) -> Any:
        """Deadline timers and owner `Down`s. An exit signal other than ``normal``
        from a linked process (or `exit(pid, reason)`) stops it with that reason, as
        without trapping; its parent's exit, whatever its reason, stops it too (the
        kernel's rule for a trapping server, OTP's)."""
        match msg:
            case _Expire():
                self._expire(state, msg)
            case Down():
                self._owner_down(state, msg)
            case ExitSignal(reason=reason) if reason != "normal":
                return Stop(reason, state)
        return state

    # -- acquire ----------------------------------------------------------------------

    def _acquire(self, req: Acquire, from_: From, state: ControllerState) -> Any:
        ledger = state.ledger
        config = ledger.config
        if req.request_id in ledger.requests:
            refused = _refuse(state, req.agent, "duplicate_request_id", "request id already in use")
            return Reply(refused, state)
        blocked = ledger.blocked_by(req.agent)
        if blocked is None:
            grant = self._grant(state, req.request_id, req.agent, req.owner, waited=False)
            return Reply(Granted(grant.permit_id, grant.request_id, grant.agent), state)
        lane = _lane(req.agent, blocked)
        overflow = req.overflow or config.overflow
        if overflow == "reject":
            _log.info(
                "adk.admission.rejected",
                agent=req.agent,
                reason="concurrency_limit_reached",
                scope=blocked,
            )
            refused = _refuse(
                state, lane, "concurrency_limit_reached", f"{blocked} concurrency limit reached"
            )
            return Reply(refused, state)
        if ledger.queued >= config.max_queue:
            _log.info(
                "adk.admission.rejected",
                agent=req.agent,
                reason="admission_queue_full",
                scope="queue",
            )
            refused = _refuse(
                state,
                GLOBAL_LANE,
                "admission_queue_full",
                f"admission queue is full ({config.max_queue})",
            )
            return Reply(refused, state)
        now = time.monotonic()
        deadline = _deadline(req, config, now)
        if deadline <= now:
            _log.info("adk.admission.expired", agent=req.agent, queued=False)
            refused = _refuse(
                state, lane, "queue_deadline_exceeded", "deadline passed before admission"
            )
            return Reply(refused, state)
        requester = req.requester or req.owner
        waiter = ledger.enqueue(
            req.request_id, req.agent, req.owner, requester, from_, deadline, lane
        )
        state.queue.up(lane)
        self._watch(state, req.owner)
        self._watch(state, requester)
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

    def _release(self, state: ControllerState, permit_id: str, cause: str) -> bool:
        grant = state.ledger.release(permit_id)
        if grant is None:
            return False
        _log.debug(
            "adk.admission.released", agent=grant.agent, cause=cause, active=state.ledger.active
        )
        self._unwatch_if_idle(state, grant.owner)
        self._admit_waiters(state)
        return True

    def _cancel(self, state: ControllerState, request_id: str) -> bool:
        """Drop the request if queued, or release the permit it holds; True if either."""
        if self._cancel_queued(state, request_id):
            return True
        item = state.ledger.requests.get(request_id)
        return isinstance(item, Grant) and self._release(state, item.permit_id, "cancelled")

    def _cancel_queued(self, state: ControllerState, request_id: str) -> bool:
        waiter = _dequeue(state, request_id)
        if waiter is None:
            return False
        self._finish_waiter(state, waiter, "cancelled", "the queued request was cancelled")
        _log.info("adk.admission.cancelled", agent=waiter.agent)
        return True

    def _withdraw(self, state: ControllerState, request_id: str, owner: Pid) -> bool:
        """Cancel the request if queued; release its permit if granted to `owner`."""
        if self._cancel_queued(state, request_id):
            return True
        item = state.ledger.requests.get(request_id)
        if isinstance(item, Grant) and item.owner == owner:
            return self._release(state, item.permit_id, "withdrawn")
        return False

    def _abandon(self, state: ControllerState, request_id: str) -> None:
        item = state.ledger.requests.get(request_id)
        if isinstance(item, Waiter):
            _dequeue(state, request_id)
            self._finish_waiter(state, item, "abandoned", "the caller stopped waiting")
            _log.info("adk.admission.abandoned", agent=item.agent, queued=True)
        elif isinstance(item, Grant):  # granted, but the reply came too late for the caller
            _log.info("adk.admission.abandoned", agent=item.agent, queued=False)
            self._release(state, item.permit_id, "abandoned")

    def _expire(self, state: ControllerState, msg: _Expire) -> None:
        item = state.ledger.requests.get(msg.request_id)
        if not isinstance(item, Waiter) or item.seq != msg.seq:
            return  # admitted, cancelled or gone meanwhile: a stale timer
        _dequeue(state, msg.request_id)
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
            _dequeue(state, waiter.request_id)
            if waiter.requester != owner:  # the owner named by a live requester died
                self._finish_waiter(state, waiter, "owner_down", "the permit's owner exited")
                _log.info("adk.admission.owner_down", agent=waiter.agent)
                continue
            # The requester is gone; the reply only frees a fenced thread still in call.
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
            _dequeue(state, waiter.request_id)
            if waiter.timer is not None:
                cancel_timer(waiter.timer)
            grant = self._grant(state, waiter.request_id, waiter.agent, waiter.owner, waited=True)
            self._unwatch_if_idle(state, waiter.requester)  # from now on only the owner
            reply(waiter.from_, Granted(grant.permit_id, grant.request_id, grant.agent))

    def _finish_waiter(
        self, state: ControllerState, waiter: Waiter, reason: str, detail: str
    ) -> None:
        """Answer a waiter that was just dequeued with an error; drop its timer and monitor."""
        if waiter.timer is not None:
            cancel_timer(waiter.timer)
        if reason in _WITHDRAWN:  # the caller's own doing, not a refusal: not counted
            reply(waiter.from_, Refused(reason, detail))
        else:
            reply(waiter.from_, _refuse(state, waiter.lane, reason, detail))
        self._unwatch_if_idle(state, waiter.owner)
        self._unwatch_if_idle(state, waiter.requester)

    def _watch(self, state: ControllerState, owner: Pid) -> None:
        if owner not in state.monitors:
            state.monitors[owner] = monitor(owner)

    def _unwatch_if_idle(self, state: ControllerState, owner: Pid) -> None:
        if not state.ledger.has_owner(owner):
            ref = state.monitors.pop(owner, None)
            if ref is not None:
                demonitor(ref, flush=True)


def _lane(agent: str, blocked: Scope) -> str:
    """The metrics lane of a request `blocked` by its agent's limit or the global one."""
    return agent if blocked == "agent" else GLOBAL_LANE


_WITHDRAWN = frozenset({"cancelled", "abandoned", "requester_down"})
"""How a queued request ends when its caller withdrew, gave up or exited: answered
`Refused` like any end, but not counted in ``adk.admission.rejected``."""


def _refuse(state: ControllerState, lane: str, reason: str, detail: str) -> Refused:
    """A `Refused` answer, counted in ``adk.admission.rejected{lane, reason}``."""
    state.metrics.admission_rejected(lane, reason)
    return Refused(reason, detail)


def _dequeue(state: ControllerState, request_id: str) -> Waiter | None:
    """Take a request out of the queue (None if it is not queued); the one place a
    request leaves it, so the queue metric goes down exactly once per request."""
    waiter = state.ledger.dequeue(request_id)
    if waiter is not None:
        state.queue.down(waiter.lane)
    return waiter


def _deadline(req: Acquire, config: AdmissionConfig, now: float) -> float:
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
