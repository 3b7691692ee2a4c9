"""Library loggers: structlog's API, routed through the standard `logging` module.

The runtime lives in someone else's process, so it never writes anywhere on its own.
`get_logger(name)` returns a structlog logger bound to ``logging.getLogger(name)``:

- an event is dropped unless the standard logger is enabled for its level, so the
  library is silent below WARNING until the application sets levels or handlers;
- if the application configured structlog, its processors render our events;
  otherwise they are rendered as ``event key=value ...``;
- inside ``structlog.testing.capture_logs`` every event is captured, at any level.

Either way the rendered line goes to the standard logger, whose handlers the
application owns. `configure_console` is for command-line entry points and examples:
a readable renderer on stderr.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog
from structlog.testing import LogCapture

__all__ = ["configure_console", "get_logger"]

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


def _route(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
    if not structlog.is_configured():
        if not logger.isEnabledFor(_LEVELS.get(method_name, logging.INFO)):
            raise structlog.DropEvent
        return _PLAIN(logger, method_name, event_dict)
    processors = structlog.get_config()["processors"]
    capturing = any(isinstance(each, LogCapture) for each in processors)
    if not capturing and not logger.isEnabledFor(_LEVELS.get(method_name, logging.INFO)):
        raise structlog.DropEvent
    result: Any = event_dict
    for processor in processors:
        result = processor(logger, method_name, result)
    return result


def get_logger(name: str) -> Any:
    """A structlog logger named `name` whose output goes to ``logging.getLogger(name)``."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[_route],
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


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
