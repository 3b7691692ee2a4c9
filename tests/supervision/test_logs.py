"""The runtime is a library in someone else's process: it never writes to stdout, and
its logs go through the standard `logging` module (silent below WARNING by default)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import structlog
from structlog.testing import capture_logs

from supervision import get_logger

_PROGRAM = textwrap.dedent(
    """
    import adk_actors as adk

    def broken(ctx, value):
        raise RuntimeError("boom")

    adk.start()
    agent = adk.spawn_agent(
        "Quiet",
        {"provider": "scripted", "script": [{"text": "hi"}],
         "callbacks": {"before_model": broken}},
    )
    assert adk.prompt(agent, "hello") == "hi"
    adk.stop_agent(agent)
    adk.stop()
    """
)


def _run(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )


def test_a_turn_writes_nothing_to_stdout_and_only_warnings_to_stderr() -> None:
    result = _run(_PROGRAM)
    assert result.stdout == ""
    # the failing callback is a WARNING: Python's last-resort handler shows it on stderr
    assert "adk.agent.callback_failed" in result.stderr
    # nothing at INFO or DEBUG reaches any stream until the application asks for it
    assert "adk.invocation" not in result.stderr
    assert "supervision.process" not in result.stderr


def test_an_application_that_configures_logging_sees_info_events() -> None:
    program = "import logging, sys\nlogging.basicConfig(stream=sys.stdout, level=logging.DEBUG)\n"
    result = _run(program + _PROGRAM)
    assert "adk.agent.callback_failed" in result.stdout
    assert "event='adk.agent.callback_failed'" in result.stdout  # the plain key=value renderer


def test_capture_logs_sees_every_level() -> None:
    log = get_logger("tests.logs")
    assert not logging.getLogger("tests.logs").isEnabledFor(logging.DEBUG)
    with capture_logs() as logs:
        log.debug("tests.debug_event", key=1)
    assert logs == [{"event": "tests.debug_event", "key": 1, "log_level": "debug"}]


def test_below_the_standard_level_nothing_is_rendered() -> None:
    rendered: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            rendered.append(record)

    target = logging.getLogger("tests.logs.levels")
    handler = Keep()
    target.addHandler(handler)
    try:
        log = get_logger("tests.logs.levels")
        log.info("tests.hidden")
        target.setLevel(logging.INFO)
        log.info("tests.shown", n=2)
    finally:
        target.removeHandler(handler)
        target.setLevel(logging.NOTSET)
    assert len(rendered) == 1
    assert "tests.shown" in rendered[0].getMessage()
    assert "n=2" in rendered[0].getMessage()


def test_capture_logs_sees_every_level_after_events_were_dropped() -> None:
    """Review finding: a cached 'not capturing' answer outlived structlog's in-place
    change of the processor list, so capture_logs missed DEBUG and INFO events."""
    saved, was_configured = structlog.get_config(), structlog.is_configured()
    structlog.configure(processors=[structlog.processors.KeyValueRenderer()])
    try:
        log = get_logger("tests.logs.after_drop")
        log.debug("dropped: nobody records debug")
        with capture_logs() as logs:
            log.debug("inside_debug")
            log.info("inside_info")
        assert [entry["event"] for entry in logs] == ["inside_debug", "inside_info"]
    finally:
        if was_configured:
            structlog.configure(processors=saved["processors"])
        else:
            structlog.reset_defaults()
