"""Structured, bounded, secret-free reports: process crashes and supervisor decisions.

Reasons are rendered with `format_reason` (`redact_text`, then bounded); every field
passes the logging redaction processor of `supervision.logs` as well. The exception
text of a crash stays in these local log lines (redacted); it is never a field of
anything the upper layers store or return.

Event names are stable (tests and dashboards rely on them):
``supervision.process.crashed``, ``supervision.supervisor.child_exited``,
``supervision.supervisor.child_restarted``, ``supervision.supervisor.child_start_failed``,
``supervision.supervisor.max_intensity_reached``.
"""

from __future__ import annotations

from typing import Any

from supervision.logs import get_logger
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
