"""Ambient background invocations (`adk.ambient`): triggers, events and schedules.

adk.ambient.register_trigger("inbox", runner, max_concurrency=8, max_queue=256,
                             session_policy={"mode": "per_event", "user_id": "worker"})
receipt = adk.ambient.submit("inbox", {"payload": "Summarize 42", "idempotency_key": "m:42"})
outcome = adk.ambient.wait(receipt, timeout=120.0)   # Completed | Paused | Failed | Cancelled | TimedOut
outcome = await adk.ambient.wait_async(receipt, timeout=120.0)   # the same, from asyncio code
"""

from adk_actors.ambient.api import (
    cancel,
    register_trigger,
    run,
    status,
    submit,
    trigger_status,
    triggers,
    unregister_trigger,
    wait,
    wait_async,
)
from adk_actors.ambient.options import (
    Explicit,
    PerEvent,
    RetryOptions,
    Shared,
    TriggerOptions,
    trigger_options,
)
from adk_actors.ambient.schedule import schedule_status, start_schedule, stop_schedule
from adk_actors.ambient.values import (
    AmbientError,
    AmbientOutcome,
    AmbientTimeout,
    Phase,
    Submitted,
    TimedOut,
)

__all__ = [
    "AmbientError",
    "AmbientOutcome",
    "AmbientTimeout",
    "Explicit",
    "PerEvent",
    "Phase",
    "RetryOptions",
    "Shared",
    "Submitted",
    "TimedOut",
    "TriggerOptions",
    "cancel",
    "register_trigger",
    "run",
    "schedule_status",
    "start_schedule",
    "status",
    "stop_schedule",
    "submit",
    "trigger_options",
    "trigger_status",
    "triggers",
    "unregister_trigger",
    "wait",
    "wait_async",
]
