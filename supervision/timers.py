"""`send_after` / `cancel_timer`: one timer service thread for every timer.

Timers live in a heap ordered by their monotonic due time (`timer_service.py`). A
timer aimed at a pid is cancelled when that process exits, so dead processes leave no
timers behind; a timer aimed at a name resolves the name when it fires.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

from supervision.pid import Pid
from supervision.process import is_fenced_thread, resolve
from supervision.timer_service import TimerRef, service


def send_after(dest: Pid | Hashable, message: Any, seconds: float) -> TimerRef:
    """Deliver `message` to `dest` (a pid or a registered name) after `seconds`.

    The message arrives as a plain message (`handle_info` for a GenServer).
    """
    if seconds < 0:
        raise ValueError("send_after: seconds must be >= 0")
    target = resolve(dest) if type(dest) is Pid else None
    timer = TimerRef(dest, target, message, time.monotonic() + seconds)
    # A killed process's timers never fire, nor does one aimed at a pid that is gone.
    if not is_fenced_thread() and (target is not None or type(dest) is not Pid):
        service.schedule(timer)
    return timer


def cancel_timer(timer: TimerRef) -> float | None:
    """Cancel a timer: the seconds it had left, or None if it already fired or was cancelled."""
    if service.cancel(timer):
        return max(0.0, timer.due - time.monotonic())
    return None


def timer_count() -> int:
    """Timers scheduled and not yet fired or cancelled."""
    return service.active_count()
