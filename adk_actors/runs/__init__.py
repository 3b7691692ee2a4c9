"""Stable runs (`adk.runs`): supervised Runner invocations that outlive their caller.

run_id = adk.runs.start(runner, "user-1", "s", "Explain.")
run_id = await adk.runs.start_async(runner, "user-1", "s", "Explain.")  # in a coroutine
for item in adk.runs.subscribe(run_id): ...   # RunEvent(seq, event) ..., RunTerminal(seq, outcome)
outcome = adk.runs.wait(run_id, timeout=120.0)
"""

from adk_actors.runs.api import (
    cancel,
    pending,
    resume,
    start,
    start_async,
    stats,
    status,
    subscribe,
    subscribe_credit,
    subscribe_credit_async,
    wait,
    wait_async,
)
from adk_actors.runs.api import list_runs as list
from adk_actors.runs.subscription import CreditSubscription, Subscription
from adk_actors.runs.values import (
    CANCEL_GRACE,
    DEFAULT_MAX_BUFFERED_EVENTS,
    DEFAULT_RETENTION,
    MAX_RETAINED_TERMINAL_RUNS,
    RunError,
    RunEvent,
    RunTerminal,
    RunTimeout,
)

__all__ = [
    "CANCEL_GRACE",
    "DEFAULT_MAX_BUFFERED_EVENTS",
    "DEFAULT_RETENTION",
    "MAX_RETAINED_TERMINAL_RUNS",
    "CreditSubscription",
    "RunError",
    "RunEvent",
    "RunTerminal",
    "RunTimeout",
    "Subscription",
    "cancel",
    "list",
    "pending",
    "resume",
    "start",
    "start_async",
    "stats",
    "status",
    "subscribe",
    "subscribe_credit",
    "subscribe_credit_async",
    "wait",
    "wait_async",
]
