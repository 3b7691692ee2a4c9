"""The `adk.ambient` facade: register triggers, submit events, status, wait, cancel.

Every call finds its trigger server by its registered name at call time. An event's
reference names its trigger (``amb-<hex>:<trigger>``); once the event is no longer
retained (or its trigger was unregistered) every call about it says ``not_found``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from adk_actors.ambient.options import check_name, trigger_options
from adk_actors.ambient.supervisor import AMBIENT_REGISTRY
from adk_actors.ambient.values import (
    TRIGGER_NAME,
    AmbientError,
    AmbientOutcome,
    AmbientTimeout,
    Cancel,
    Refusal,
    Register,
    Status,
    Submit,
    Submitted,
    Triggers,
    TriggerStatus,
    Unregister,
    Unwait,
    Wait,
)
from adk_actors.app import ensure_started
from adk_actors.runner.messages import check_cancel_reason
from providers.errors import AdkError
from supervision import CallTimeout, ProcessExit, Ref, aio, call, cast, self_pid

CALL_TIMEOUT = 10.0


def register_trigger(name: str, runner: Any, **options: Any) -> None:
    """Register `runner` under `name` with its `TriggerOptions` (``session_policy``
    required). Raises ``invalid_trigger_options`` (naming the option),
    ``invalid_trigger_name``, ``already_registered`` or ``trigger_limit_reached``."""
    check_name(name)
    if not callable(getattr(runner, "start_invocation", None)):
        raise AmbientError(("invalid_trigger_options", "runner"), "the runner is not an adk.Runner")
    checked = trigger_options(options)
    ensure_started()
    _answer(AMBIENT_REGISTRY, Register(name, runner, checked))


def unregister_trigger(name: str) -> None:
    """Stop a trigger; ``trigger_busy`` while it has queued or active events,
    ``not_found`` if there is none. Its retained events go with it."""
    _answer((TRIGGER_NAME, check_name(name)), Unregister(), missing="not_found")


def triggers() -> list[str]:
    """The registered trigger names, sorted."""
    ensure_started()
    names: list[str] = _answer(AMBIENT_REGISTRY, Triggers())
    return names


def submit(name: str, event: dict[str, Any]) -> Submitted:
    """Admit one event; returns at once with its reference. A retained event with the
    same ``idempotency_key`` answers ``Submitted(its_ref, duplicate=True)`` and runs
    nothing. Raises ``invalid_ambient_event``, ``ambient_queue_full`` or
    ``trigger_not_found``. The event's job runs in a copy of the caller's
    `contextvars` (its trace, for one), taken here."""
    return submit_in(name, event, contextvars.copy_context())


def submit_in(name: str, event: dict[str, Any], context: contextvars.Context) -> Submitted:
    """`submit`, the job running in `context` (a schedule passes a fresh one)."""
    answer: Submitted = _answer(
        (TRIGGER_NAME, check_name(name)), Submit(event, context), missing="trigger_not_found"
    )
    return answer


def run(name: str, event: dict[str, Any], timeout: float | None = None) -> AmbientOutcome:
    """`submit`, then `wait`."""
    return wait(submit(name, event), timeout)


def status(ref: str | Submitted) -> dict[str, Any]:
    """A JSON-safe view of an event: ``state`` (queued, running, settling, terminal),
    ``attempts``, ``run_id`` (its latest run, an `adk.runs` id), ``user_id``,
    ``session_id``, canonical ``metadata``, ``waiter_count``, ``outcome``."""
    view: dict[str, Any] = _answer(_server(ref), Status(_ref(ref)), missing="not_found")
    return view


def trigger_status(name: str) -> dict[str, Any]:
    """A trigger's counters: ``active``, ``queued``, ``retained``, ``peak_active``,
    ``submitted``, ``duplicates``, ``rejected``, ``terminal``, and its bounds."""
    view: dict[str, Any] = _answer(
        (TRIGGER_NAME, check_name(name)), TriggerStatus(), missing="not_found"
    )
    return view


def wait(ref: str | Submitted, timeout: float | None = None) -> AmbientOutcome:
    """The event's outcome: `Completed(output)`, `Paused(event)`, `Failed(reason)`,
    `Cancelled(reason)` or `TimedOut()`; `AmbientTimeout` if not within `timeout`;
    ``waiter_limit_reached`` past the trigger's `max_waiters`."""
    key, server, token = _ref(ref), _server(ref), Ref()
    with _waiting(server, key, token, timeout):
        answer = call(server, Wait(key, token, self_pid()), timeout)
    return _answered(answer)


async def wait_async(ref: str | Submitted, timeout: float | None = None) -> AmbientOutcome:
    """`wait` for asyncio code: the same outcomes and errors, awaited on the event
    loop (no thread waits meanwhile). Cancelling the awaiting task
    (``asyncio.wait_for``, ``task.cancel()``) withdraws its waiter."""
    key, server, token = _ref(ref), _server(ref), Ref()
    with _waiting(server, key, token, timeout):
        # No waiter pid: the loop's thread outlives the await, so a monitor on it would
        # never fire; leaving the await any way but an answer withdraws the waiter.
        answer = await aio.call(server, Wait(key, token, None), timeout)
    return _answered(answer)


def cancel(ref: str | Submitted, reason: Any = "cancelled") -> None:
    """Cancel a queued or active event: its outcome becomes `Cancelled(reason)` once
    its current run has ended. ``already_terminal`` once it has ended."""
    try:
        check_cancel_reason(reason)
    except AdkError as error:
        raise AmbientError(error.reason, error.detail) from None
    _answer(_server(ref), Cancel(_ref(ref), reason), missing="not_found")


def _ref(ref: str | Submitted) -> str:
    value = ref.ref if isinstance(ref, Submitted) else ref
    if not isinstance(value, str) or not value.startswith("amb-") or ":" not in value:
        raise AmbientError("not_found", "not an ambient event reference")
    return value


def _server(ref: str | Submitted) -> tuple[str, str]:
    return (TRIGGER_NAME, _ref(ref).split(":", 1)[1])


@contextmanager
def _waiting(
    server: tuple[str, str], key: str, token: Ref, timeout: float | None
) -> Iterator[None]:
    """A `Wait` call's refusals: `AmbientTimeout` (the waiter withdrawn, the event goes
    on), ``not_found`` (the trigger is gone). A wait left any other way (an asyncio
    cancellation, ``KeyboardInterrupt``) withdraws its waiter too, then goes on."""
    try:
        yield
    except CallTimeout:
        cast(server, Unwait(key, token))
        raise AmbientTimeout(f"the event did not end within {timeout} s") from None
    except ProcessExit:
        raise AmbientError("not_found", "the event's trigger is gone") from None
    except BaseException:
        cast(server, Unwait(key, token))
        raise


def _answered(answer: Any) -> AmbientOutcome:
    if isinstance(answer, Refusal):
        raise AmbientError(answer.reason, answer.detail)
    outcome: AmbientOutcome = answer
    return outcome


def _answer(server: Any, request: Any, *, missing: str = "unavailable") -> Any:
    try:
        answer = call(server, request, CALL_TIMEOUT)
    except ProcessExit:
        raise AmbientError(missing, "no such trigger") from None
    except CallTimeout:
        raise AmbientError("unavailable", "the ambient runtime did not answer") from None
    if isinstance(answer, Refusal):
        raise AmbientError(answer.reason, answer.detail)
    return answer
