"""Structured, bounded, secret-free reports: process crashes and supervisor decisions.

Reasons are rendered with `format_reason` (`redact_text`, then bounded); every field
passes the logging redaction processor of `supervision.logs` as well. The exception
text of a crash stays in these local log lines (redacted); it is never a field of
anything the upper layers store or return.

Event names are stable (tests and dashboards rely on them):
``supervision.process.crashed``, ``supervision.supervisor.child_exited``,
``supervision.supervisor.child_restarted``, ``supervision.supervisor.child_start_failed``,
``supervision.supervisor.max_intensity_reached``,
``supervision.supervisor.restart_listener_failed``.

Besides the log line, every child restart is announced to the process-wide restart
listeners (`on_restart`) as a `RestartReport`: who restarted which child, and the kind
of the exit reason (never its text), for metrics and dashboards.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from supervision.logs import get_logger
from supervision.pid import Exited, Pid
from supervision.redaction import redact_text
from supervision.signals import Crash, scrub_message

_log = get_logger("supervision")

MAX_REASON_CHARS = 512


def format_reason(reason: Any) -> str:
    """A reason as short, redacted text (`redact_text`, then at most `MAX_REASON_CHARS`).

    A `Crash` built by `Crash.from_exception` was redacted already; one built by hand
    (or any other reason) is redacted here.
    """
    if isinstance(reason, Crash):
        return redact_text(f"{reason.kind}: {reason.message}")[:MAX_REASON_CHARS]
    if isinstance(reason, str):
        return scrub_message(reason)[:MAX_REASON_CHARS]
    try:
        shown = repr(reason)
    except Exception:  # a broken __repr__ must not break the report
        shown = f"<{type(reason).__name__}>"
    return scrub_message(shown)[:MAX_REASON_CHARS]


def format_name(name: Any) -> Any:
    """A process name or child id for a log line: strings and ints as they are, else bounded repr."""
    if isinstance(name, str):
        return name[:MAX_REASON_CHARS]
    if isinstance(name, int):
        return name
    return format_reason(name)


def process_crashed(pid: Any, label: str, name: Any, reason: Any, during: str) -> None:
    """A server stopped with an abnormal reason (a callback raised, or it returned Stop)."""
    _log.error(
        "supervision.process.crashed",
        pid=str(pid),
        server=label,
        name=None if name is None else format_name(name),
        reason=format_reason(reason),
        during=during,
    )


def routine_exits_logged() -> bool:
    """Is the DEBUG event of a child's normal exit recorded anywhere? (It is built and
    redacted only then: a finished run's child exits once per run.)"""
    return bool(_log.wants(logging.DEBUG))


def supervisor_event(event: str, supervisor: Any, **fields: Any) -> None:
    """A supervisor report: what exited, why, and what the supervisor decided."""
    clean = {key: value for key, value in fields.items() if key != "abnormal"}
    if "reason" in clean:
        clean["reason"] = format_reason(clean["reason"])
    if "child_id" in clean:
        clean["child_id"] = format_name(clean["child_id"])
    level = "error" if event.endswith(("max_intensity_reached", "start_failed")) else "info"
    if event.endswith("child_exited"):  # a normal exit is routine (one per finished run)
        level = "error" if fields.get("abnormal") else "debug"
    getattr(_log, level)(event, supervisor=str(supervisor), **clean)


@dataclass(frozen=True, slots=True)
class RestartReport:
    """One child restarted: the supervisor's registered name (its pid, like ``<0.42>``,
    when unnamed), the child's id as text, and the kind of the exit reason that caused
    the restart (`reason_kind`: ``"killed"``, a crash's exception class, ...)."""

    supervisor: str
    child_id: str
    reason: str


RestartListener = Callable[[RestartReport], None]


class _Subscription:
    """One `on_restart` call: unsubscribing removes this one, never an equal listener
    subscribed by another call."""

    __slots__ = ("listener",)

    def __init__(self, listener: RestartListener) -> None:
        self.listener = listener


_subscriptions: tuple[_Subscription, ...] = ()  # replaced whole: notifying takes no lock
_subscriptions_lock = threading.Lock()

MAX_KIND_CHARS = 64
"""A reason kind is a short label (an atom-like string of at most this many characters)."""
_LABEL = re.compile(rf"[A-Za-z_][A-Za-z0-9_.:-]{{0,{MAX_KIND_CHARS - 1}}}")
"""What a string reason must look like to be reported as itself (`normal`, `shutdown`,
`agent_stopped`): anything else may carry a user's text, and is reported as ``str``."""


def on_restart(listener: RestartListener) -> Callable[[], None]:
    """Call `listener` after every child restart by any `Supervisor` or
    `DynamicSupervisor` (in the supervisor's thread: keep it quick). Returns the
    function that unsubscribes it (idempotent; a report already being delivered when
    it returns may still reach the listener once). A listener that raises is logged
    (``supervision.supervisor.restart_listener_failed``) and ignored."""
    global _subscriptions
    subscription = _Subscription(listener)
    with _subscriptions_lock:
        _subscriptions = (*_subscriptions, subscription)

    def unsubscribe() -> None:
        global _subscriptions
        with _subscriptions_lock:
            _subscriptions = tuple(s for s in _subscriptions if s is not subscription)

    return unsubscribe


def reason_kind(reason: Any) -> str:
    """An exit reason as a short label, never its text: a crash's exception class, an
    atom-like string reason, the head of a tuple such as ``("shutdown", detail)``
    when it is one; ``str`` for any other string, else the reason's type."""
    if isinstance(reason, Crash):
        return reason.kind[:MAX_KIND_CHARS]
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        reason = reason[0]
    if isinstance(reason, str):
        label = _LABEL.fullmatch(reason) is not None and redact_text(reason) == reason
        return reason if label else "str"  # a key-shaped label is still text
    return type(reason).__name__


def child_restarted(supervisor: Pid, child_id: Any, pid: Pid, reason: Any) -> None:
    """A supervisor started a child again after it exited with `reason`: log it and
    tell every restart listener."""
    supervisor_event(
        "supervision.supervisor.child_restarted", supervisor, child_id=child_id, pid=str(pid)
    )
    subscriptions = _subscriptions
    if not subscriptions:
        return
    report = RestartReport(
        _supervisor_name(supervisor), str(format_name(child_id)), reason_kind(reason)
    )
    for subscription in subscriptions:
        try:
            subscription.listener(report)
        except BaseException as exc:  # a listener must never stop a restart
            _log.error(
                "supervision.supervisor.restart_listener_failed",
                supervisor=report.supervisor,
                child_id=report.child_id,
                error_type=type(exc).__name__,
            )


def _supervisor_name(supervisor: Pid) -> str:
    """The supervisor's registered name as text, or its printed pid."""
    process = supervisor._process
    name = None if isinstance(process, Exited) else process.name
    return str(supervisor) if name is None else str(format_name(name))
