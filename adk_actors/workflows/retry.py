"""Retry: the backoff arithmetic workflow steps share, and `execute`, the standalone
retry of one callable (the spec's ``adk_retry``).

Delays grow geometrically and are capped: the first wait is `initial`, each next one
``min(cap, previous * factor)``; ``jitter="full"`` waits a uniform time in
``[0, delay]`` instead (0 stays 0). A workflow step's defaults (factor 1) reproduce a
constant backoff.

`execute(fn, ...)` runs each attempt in a fresh monitored `Task` (a sync callable on
the bounded pool, a coroutine function on the reactor) under its own
`attempt_timeout`, and every attempt and every wait under one absolute deadline: a
crashing, hanging or blocked attempt cannot escape the retry budget. Work that must
outlive its caller belongs in a supervised run (a workflow), not here.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import random
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, NamedTuple

import msgspec

from adk_actors.workflows.errors import exception_reason
from adk_actors.workflows.results import Error
from providers.errors import AdkError, decode_options
from supervision import Task, TaskFailed, TaskTimeout, aio

MAX_ATTEMPTS = 1000
MAX_DELAY = 86_400.0
"""Ceiling of any delay, timeout or backoff cap, in seconds (one day)."""
MAX_FACTOR = 100.0
RETRY_COMPONENT = "adk_retry"

_rng = random.SystemRandom()


def delays(initial: float, factor: float, cap: float) -> Iterator[float]:
    """The waits before attempts 2, 3, ...: `initial`, then each previous one times
    `factor`, never above `cap` (an endless iterator; the caller counts attempts)."""
    delay = min(initial, cap)
    while True:
        yield delay
        delay = min(cap, round(delay * factor, 6))


def jittered(delay: float, jitter: str) -> float:
    """`delay` as is (``"none"``) or a uniform wait in ``[0, delay]`` (``"full"``)."""
    if jitter == "full" and delay > 0:
        return _rng.uniform(0.0, delay)
    return delay


def remaining(deadline: float | None) -> float:
    """Seconds left before an absolute monotonic `deadline` (``inf`` without one)."""
    return math.inf if deadline is None else deadline - time.monotonic()


# -- the standalone retry ----------------------------------------------------------------

Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_DELAY)]


class RetryOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`execute`'s options; times in seconds. None for a timeout means no bound."""

    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=MAX_ATTEMPTS)] = 3
    initial_delay: Seconds = 1.0
    max_delay: Seconds = 10.0
    backoff_factor: Annotated[float, msgspec.Meta(ge=1.0, le=MAX_FACTOR)] = 2.0
    attempt_timeout: Seconds | None = 30.0
    timeout: Seconds | None = 60.0
    deadline: float | None = None
    """An absolute `time.monotonic()` instant; it replaces `timeout`."""
    jitter: Literal["none", "full"] = "none"


def retry_options(**options: Any) -> RetryOptions:
    """Checked options: ``("invalid_retry_options", key)`` names a bad one (an unknown
    key, a value out of range, ``initial_delay > max_delay``)."""
    decoded = decode_options(RetryOptions, options, "invalid_retry_options")
    if decoded.initial_delay > decoded.max_delay:
        raise AdkError(
            ("invalid_retry_options", "initial_delay"), "initial_delay must be <= max_delay"
        )
    if decoded.deadline is not None and not math.isfinite(decoded.deadline):
        raise AdkError(("invalid_retry_options", "deadline"), "deadline must be finite")
    return decoded


class _Attempt:
    """What one attempt came to: a value (`ok`), a retryable failure, or an invalid
    result (never retried)."""

    __slots__ = ("failure", "invalid", "ok", "value")

    def __init__(
        self, *, ok: bool = False, value: Any = None, failure: Any = None, invalid: bool = False
    ) -> None:
        self.ok = ok
        self.value = value
        self.failure = failure
        self.invalid = invalid


def execute(fn: Callable[[], Any], **options: Any) -> Any:
    """Call `fn()` until it succeeds, at most `max_attempts` times; returns its value.

    `fn` returns a value (success), returns ``adk.workflows.Error(reason)`` or raises
    (a retryable failure). Each attempt is a fresh `Task`; a failure waits the next
    delay (``initial_delay``, times ``backoff_factor``, at most ``max_delay``,
    optionally full ``jitter``) first. Raises `AdkError` with: the last failure's reason
    once attempts are used up (``Error(reason)`` -> ``reason``; an exception ->
    ``("attempt_exception", {"component", "operation", "reason", "class"})``, its
    class and an `AdkError`'s tag, never its message; a timed-out attempt ->
    ``attempt_timeout``; a killed one -> ``("attempt_process_down", tag)``); ``retry_deadline_exceeded`` when
    the deadline (``timeout`` after the call, or ``deadline``) comes first, during an
    attempt or a wait; ``("invalid_retry_result", type)`` at once for a result that is
    an un-awaited awaitable (never retried); ``("invalid_retry_options", key)``.
    """
    retrying = _Retrying(fn, options)
    while True:
        retrying.check_deadline()
        result = _classify(_run_attempt(fn, retrying.opts, retrying.deadline), retrying.deadline)
        if result.ok:
            return result.value
        wait, last = retrying.wait_after(result)
        time.sleep(wait)
        if last:
            raise AdkError("retry_deadline_exceeded", "the retry deadline passed during a wait")


async def execute_async(fn: Callable[[], Any], **options: Any) -> Any:
    """`execute` for asyncio code: the same rules, waiting without a thread (the
    attempts still run as Tasks; cancelling this coroutine kills the one running)."""
    retrying = _Retrying(fn, options)
    while True:
        retrying.check_deadline()
        task = _start_attempt(fn, retrying.opts, retrying.deadline)
        try:
            outcome = await _wait_attempt_async(task)
        finally:
            task.kill()  # a no-op once it ended; cancelled callers leave nothing behind
        result = _classify(outcome, retrying.deadline)
        if result.ok:
            return result.value
        wait, last = retrying.wait_after(result)
        await asyncio.sleep(wait)
        if last:
            raise AdkError("retry_deadline_exceeded", "the retry deadline passed during a wait")


class _Retrying:
    """The bookkeeping `execute` and `execute_async` share: options, the deadline, the
    delays and the attempt count."""

    def __init__(self, fn: Callable[[], Any], options: dict[str, Any]) -> None:
        if not callable(fn):
            raise AdkError(("invalid_retry_options", "fn"), "fn must be callable")
        self.opts = retry_options(**options)
        self.deadline = _deadline(self.opts)
        self._waits = delays(self.opts.initial_delay, self.opts.backoff_factor, self.opts.max_delay)
        self._attempt = 1

    def check_deadline(self) -> None:
        if remaining(self.deadline) <= 0:
            raise AdkError("retry_deadline_exceeded", "the retry deadline passed")

    def wait_after(self, failed: _Attempt) -> tuple[float, bool]:
        """After a failed attempt: how long to wait, and whether the deadline ends the
        retry once waited; raises the failure when no attempt may follow."""
        if failed.invalid or self._attempt >= self.opts.max_attempts:
            raise AdkError(failed.failure, "the retried call failed")
        self._attempt += 1
        wait = jittered(next(self._waits), self.opts.jitter)
        left = remaining(self.deadline)
        return (max(0.0, left), True) if wait >= left else (wait, False)


def _deadline(opts: RetryOptions) -> float | None:
    if opts.deadline is not None:
        return opts.deadline
    return None if opts.timeout is None else time.monotonic() + opts.timeout


def _attempt_deadline(opts: RetryOptions, deadline: float | None) -> float | None:
    if opts.attempt_timeout is None:
        return deadline
    ends = time.monotonic() + opts.attempt_timeout
    return ends if deadline is None else min(ends, deadline)


class _Raised(NamedTuple):
    """The callable raised: the exception made public (its class, an `AdkError`'s tag)."""

    failure: dict[str, Any]


def _guarded(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as error:
        return _Raised(exception_reason(RETRY_COMPONENT, "attempt", error))


async def _guarded_async(fn: Callable[[], Any]) -> Any:
    try:
        return await fn()
    except Exception as error:
        return _Raised(exception_reason(RETRY_COMPONENT, "attempt", error))


def _start_attempt(fn: Callable[[], Any], opts: RetryOptions, deadline: float | None) -> Task:
    entry = _guarded_async if inspect.iscoroutinefunction(fn) else _guarded
    return Task.start(entry, fn, deadline=_attempt_deadline(opts, deadline))


def _run_attempt(fn: Callable[[], Any], opts: RetryOptions, deadline: float | None) -> Any:
    task = _start_attempt(fn, opts, deadline)
    try:
        return ("value", task.wait())
    except (TaskFailed, TaskTimeout) as error:
        return ("stopped", error)
    finally:
        task.kill()


async def _wait_attempt_async(task: Task) -> Any:
    try:
        return ("value", await aio.wait_task(task))
    except (TaskFailed, TaskTimeout) as error:
        return ("stopped", error)


def _classify(outcome: tuple[str, Any], deadline: float | None) -> _Attempt:
    kind, value = outcome
    if kind == "value":
        if isinstance(value, _Raised):
            return _Attempt(failure=("attempt_exception", value.failure))
        if isinstance(value, Error):
            return _Attempt(failure=value.reason)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            return _Attempt(failure=("invalid_retry_result", type(value).__name__), invalid=True)
        return _Attempt(ok=True, value=value)
    error: TaskFailed | TaskTimeout = value
    if isinstance(error, TaskTimeout):
        if remaining(deadline) <= 0:
            return _Attempt(failure="retry_deadline_exceeded", invalid=True)
        return _Attempt(failure="attempt_timeout")
    return _Attempt(failure=("attempt_process_down", _reason_tag(error.reason)))


def _reason_tag(reason: Any) -> str:
    if getattr(reason, "kind", None) is not None:  # a crash: its class, never its text
        return "crashed"
    if isinstance(reason, str):
        return reason[:64]
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        return reason[0][:64]
    return type(reason).__name__
