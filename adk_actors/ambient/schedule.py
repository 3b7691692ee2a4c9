"""The bundled schedule source: one fixed-delay timer that submits an event template
to a trigger through the same bounded `submit` (it is not a cron parser).

Each tick's idempotency key is ``<base>:<slot>``, the slot being the wall-clock
interval number, so a redelivered tick is a duplicate. The source is a temporary
child of the trigger supervisor; `start_schedule` returns its pid.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from adk_actors.ambient.api import submit_in
from adk_actors.ambient.options import MAX_KEY_BYTES, MAX_TIMEOUT, check_name
from adk_actors.ambient.supervisor import TRIGGER_SUPERVISOR
from adk_actors.ambient.values import AmbientError
from adk_actors.app import ensure_started
from providers.errors import AdkError
from supervision import (
    CallTimeout,
    ChildSpec,
    DynamicSupervisor,
    From,
    GenServer,
    KernelError,
    Pid,
    ProcessExit,
    Reply,
    Stop,
    TimerRef,
    call,
    cancel_timer,
    self_pid,
    send_after,
)


class _Tick(NamedTuple):
    pass


class _ScheduleStatus(NamedTuple):
    pass


class _Schedule:
    def __init__(
        self, trigger: str, schedule_id: str, interval: float, template: dict[str, Any], base: str
    ) -> None:
        self.trigger = trigger
        self.schedule_id = schedule_id
        self.interval = interval
        self.template = template
        self.base = base
        self.timer: TimerRef | None = None
        self.counts = {"submitted": 0, "duplicates": 0, "rejected": 0}
        self.last_ref: str | None = None
        self.last_error: Any = None


class ScheduleSource(GenServer):
    def init(self, args: tuple[_Schedule, float]) -> _Schedule:
        state, initial_delay = args
        state.timer = send_after(self_pid(), _Tick(), initial_delay)
        return state

    def handle_call(self, request: Any, from_: From, state: _Schedule) -> Reply:
        match request:
            case _ScheduleStatus():
                return Reply(
                    {
                        "type": "schedule",
                        "trigger": state.trigger,
                        "schedule_id": state.schedule_id,
                        "interval": state.interval,
                        **state.counts,
                        "last_event_ref": state.last_ref,
                        "last_error": state.last_error,
                    },
                    state,
                )
        return Reply(None, state)

    def handle_info(self, msg: Any, state: _Schedule) -> Any:
        match msg:
            case _Tick():
                state.timer = None
                if not self._tick(state):
                    return Stop("normal", state)  # its trigger was unregistered
                state.timer = send_after(self_pid(), _Tick(), state.interval)
        return state

    def terminate(self, reason: Any, state: _Schedule) -> None:
        if state.timer is not None:
            cancel_timer(state.timer)

    @staticmethod
    def _tick(state: _Schedule) -> bool:
        """Submit this tick's event; False once the trigger is gone."""
        slot = int(time.time() // state.interval)
        metadata = dict(state.template.get("metadata", {}))
        metadata.update({"schedule_id": state.schedule_id, "slot": slot})
        event = {**state.template, "idempotency_key": f"{state.base}:{slot}", "metadata": metadata}
        try:
            answer = submit_in(state.trigger, event, contextvars.Context())
        except AdkError as error:
            state.counts["rejected"] += 1
            state.last_error = error.reason
            return bool(error.reason != "trigger_not_found")
        state.counts["duplicates" if answer.duplicate else "submitted"] += 1
        state.last_ref, state.last_error = answer.ref, None
        return True


def start_schedule(
    trigger: str,
    schedule_id: str,
    interval: float,
    event: Mapping[str, Any],
    *,
    initial_delay: float | None = None,
) -> Pid:
    """Submit `event` (a template with ``payload``; its ``idempotency_key``, if any, is
    the key's base, else `schedule_id`) to `trigger` every `interval` seconds, first
    after `initial_delay` (default: one interval). ``invalid_schedule_options``."""
    check_name(trigger)
    check_name(schedule_id, "schedule")
    if (
        isinstance(interval, bool)
        or not isinstance(interval, int | float)
        or not 0 < interval <= MAX_TIMEOUT
    ):
        raise AmbientError(("invalid_schedule_options", "interval"), "seconds in (0, 86400]")
    delay = interval if initial_delay is None else initial_delay
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not 0 <= delay <= MAX_TIMEOUT
    ):
        raise AmbientError(("invalid_schedule_options", "initial_delay"), "seconds in [0, 86400]")
    if not isinstance(event, Mapping) or "payload" not in event:
        raise AmbientError(("invalid_schedule_options", "event"), "a template with a payload")
    base = event.get("idempotency_key", schedule_id)
    if not isinstance(base, str) or not base or len(base.encode()) > MAX_KEY_BYTES - 32:
        raise AmbientError(("invalid_schedule_options", "idempotency_key"), "1..480 bytes")
    state = _Schedule(trigger, schedule_id, float(interval), dict(event), base)
    ensure_started()
    spec = ChildSpec(
        ("schedule", schedule_id, id(state)),
        lambda: ScheduleSource.start_link((state, float(delay))),
        restart="temporary",
    )
    try:
        pid = DynamicSupervisor.start_child(TRIGGER_SUPERVISOR, spec)
    except KernelError as error:
        raise AmbientError(("schedule_start_failed", error.reason)) from None
    assert pid is not None
    return pid


def schedule_status(source: Pid) -> dict[str, Any]:
    """``{"type": "schedule", "interval", "submitted", "duplicates", "rejected", ...}``."""
    try:
        view: dict[str, Any] = call(source, _ScheduleStatus(), 5.0)
    except (ProcessExit, CallTimeout):
        raise AmbientError("not_found", "no such schedule source") from None
    return view


def stop_schedule(source: Pid) -> None:
    """Stop a schedule source; ``not_found`` if it is not running."""
    try:
        DynamicSupervisor.terminate_child(TRIGGER_SUPERVISOR, source)
    except (KernelError, ProcessExit):
        raise AmbientError("not_found", "no such schedule source") from None
