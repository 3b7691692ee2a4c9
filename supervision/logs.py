"""Library loggers: structlog's API, routed through the standard `logging` module.

The runtime lives in someone else's process, so it never writes anywhere on its own.
`get_logger(name)` returns a structlog logger bound to ``logging.getLogger(name)``:

- an event is dropped unless the standard logger is enabled for its level, so the
  library is silent below WARNING until the application sets levels or handlers;
- if the application configured structlog, its processors render our events;
  otherwise they are rendered as ``event key=value ...``;
- inside ``structlog.testing.capture_logs`` every event is captured, at any level.

Either way every event is redacted first (`redact_event`: secret-named keys lose
their value, strings pass `redact_text`, other values become their redacted repr), so
neither the application's processors, nor a capture, nor the rendered line ever sees
a credential; then the rendered line goes to the standard logger, whose handlers the
application owns. `configure_console` is for command-line entry points and examples:
a readable renderer on stderr.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog
from structlog.testing import LogCapture

from supervision.redaction import MAX_DEPTH, REDACTED, is_secret_key, redact_text

__all__ = ["RedactingFilter", "configure_console", "get_logger", "redact_event", "redact_loggers"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
    "msg": logging.INFO,
}

_PLAIN = structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True)


def redact_event(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: the event with every value redacted, in place.

    A secret-named key (`is_secret_key`) keeps the key and loses the value; strings go
    through `redact_text`; mappings, lists and tuples are walked the same way;
    numbers, booleans and None stay; anything else becomes its redacted ``repr`` (so an
    exception or an object reaching a log is rendered without credentials). A
    traceback never reaches a handler: ``exc_info`` becomes ``exc_class``, the name of
    the exception's class.
    """
    if "exc_info" in event_dict:
        error = _exception_of(event_dict.pop("exc_info"))
        if error is not None:
            event_dict["exc_class"] = type(error).__name__
    for key, value in event_dict.items():
        event_dict[key] = REDACTED if is_secret_key(key) else _clean(value, 0)
    return event_dict


def _exception_of(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1] if isinstance(exc_info[1], BaseException) else None
    return sys.exc_info()[1] if exc_info else None


def _clean(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth > MAX_DEPTH:
        return REDACTED
    if isinstance(value, Mapping):
        return {
            key: REDACTED if is_secret_key(key) else _clean(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_clean(item, depth + 1) for item in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # named tuples: repr
        return tuple(_clean(item, depth + 1) for item in value)
    try:
        shown = repr(value)
    except Exception:  # a broken __repr__ must not break logging
        shown = f"<{type(value).__name__}>"
    return redact_text(shown)


def _capturing(processors: Any) -> bool:
    """Is ``structlog.testing.capture_logs`` active? It puts its `LogCapture` last in
    the (same, mutated) processor list, so one look at the end answers."""
    return bool(processors) and isinstance(processors[-1], LogCapture)


def _route(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
    if not structlog.is_configured():
        if not logger.isEnabledFor(_LEVELS.get(method_name, logging.INFO)):
            raise structlog.DropEvent
        return _PLAIN(logger, method_name, redact_event(logger, method_name, event_dict))
    processors = structlog.get_config()["processors"]
    if not logger.isEnabledFor(_LEVELS.get(method_name, logging.INFO)) and not _capturing(
        processors
    ):
        raise structlog.DropEvent
    result: Any = redact_event(logger, method_name, event_dict)
    for processor in processors:
        result = processor(logger, method_name, result)
    return result


class RedactingFilter(logging.Filter):
    """A `logging.Filter` for other libraries' loggers: each record's message is
    rendered and redacted (`redact_text`), its traceback replaced by the exception's
    class name. With ``first_word_only`` only the message's first word is kept: for
    transport traces that print raw values nobody can recognise as secrets (such as
    every response header of an HTTP call)."""

    def __init__(self, first_word_only: bool = False) -> None:
        super().__init__()
        self.first_word_only = first_word_only

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format
            message = str(record.msg)
        if self.first_word_only:
            message = message.split(" ", 1)[0]
        if record.exc_info is not None and record.exc_info[0] is not None:
            message = f"{message} exc_class={record.exc_info[0].__name__}"
        record.msg, record.args = redact_text(message), None
        record.exc_info = record.exc_text = record.stack_info = None
        return True


def redact_loggers(*names: str, first_word_only: bool = False) -> None:
    """Redact what the named standard loggers (other libraries') record, with a
    `RedactingFilter` on each (once; calling again changes nothing). A filter applies
    to records made by that very logger, not its children: name each one."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(each, RedactingFilter) for each in logger.filters):
            logger.addFilter(RedactingFilter(first_word_only))


def _wanted(logger: logging.Logger, level: int) -> bool:
    """Would an event at `level` go anywhere? Answered before structlog does any work."""
    if logger.isEnabledFor(level):
        return True
    return structlog.is_configured() and _capturing(structlog.get_config()["processors"])


class _LibraryLogger(structlog.stdlib.BoundLogger):
    """`structlog.stdlib.BoundLogger` whose routine levels cost one level check when
    nothing would record them (per-run events are DEBUG)."""

    def wants(self, level: int) -> bool:
        """Would an event at `level` be recorded? Lets a caller skip building the
        fields of a routine event (formatting, redaction) that nothing records."""
        return _wanted(self._logger, level)

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if not _wanted(self._logger, logging.DEBUG):
            return None
        return super().debug(event, *args, **kw)

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if not _wanted(self._logger, logging.INFO):
            return None
        return super().info(event, *args, **kw)


def get_logger(name: str) -> Any:
    """A structlog logger named `name` whose output goes to ``logging.getLogger(name)``.

    The bound logger itself, made now: `structlog.wrap_logger` gives a lazy proxy that
    binds again (two Python calls more) on every log call even when it caches, and
    nothing it would read later is ours to change (the processor, `_route`, reads the
    configuration at each event; the wrapper class is ours)."""
    return _LibraryLogger(logging.getLogger(name), processors=[_route], context={})


def configure_console(level: int = logging.INFO) -> None:
    """For CLIs and examples: readable, coloured-on-a-terminal lines on stderr at `level`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S.%f"),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(level),
    )
