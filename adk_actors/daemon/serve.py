"""``adk serve``: the daemon in the foreground, from start to a drained stop.

`main` checks everything it can before anything starts (``ADK_DEV_TOKEN``, the bind
address, the ``ADK_DEV_*`` bounds, the agent file and its credentials, and the data
directory, which it creates owner-only if missing); a refusal is one JSON line on
stderr (``{"status": "error", "reason", "message"}``) and exit code 2. A session store
that cannot be opened even so is refused the same way, after the tree it started is
stopped. Then it starts the root tree, opens the LMDB sessions under ``<data>/sessions``
(so a restarted daemon still has them), spawns the file's agent, starts the HTTP
listener as the tree's last child and prints one JSON line on `out`:
``{"status": "listening", "url", "console_url", "api_url", "agent", "pid"}`` (with
``--a2a``, also ``a2a_card_url`` and ``a2a_url``: the agent over A2A 1.0). It runs
until SIGINT or SIGTERM, then drains (`drain.drain`: new requests get 503, running
runs get ``drain_grace``), stops the tree in order (the listener first) and returns 0.
If the tree stops on its own meanwhile (it gave up restarting a child), it returns 1.
With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set it first installs the OpenTelemetry SDK with
OTLP/HTTP export (`observability.sdk.configure_from_env`, the ``otlp`` extra; refused
with ``otlp_unavailable`` when that is not installed) and shuts it down last, flushing
the spans still batched.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple, TextIO

from starlette.routing import BaseRoute

import adk_actors as adk
from adk_actors.a2a.wire import CARD_PATH, RPC_PATH
from adk_actors.config_file import AgentFile, check_credentials, load_agent_file, spawn_from_file
from adk_actors.daemon.app import build_app
from adk_actors.daemon.drain import drain
from adk_actors.daemon.legacy import PATH as LEGACY_PATH
from adk_actors.daemon.legacy import check_legacy_host
from adk_actors.daemon.listener import check_dev_host, listener_config, start_listener
from adk_actors.daemon.routes_a2a import DaemonA2A, a2a_routes_for_daemon
from adk_actors.daemon.routes_mcp import mcp_route
from adk_actors.daemon.settings import DevSettings, settings_from_env
from adk_actors.daemon.state import DevState
from adk_actors.observability import export_requested
from adk_actors.observability.sdk import Telemetry, configure_from_env
from adk_actors.sessions import LmdbSessionService
from providers.errors import AdkError
from supervision import configure_console, get_logger

EXIT_OK = 0
EXIT_FAILED = 1
"""The daemon stopped on its own after it started (its tree gave up)."""
EXIT_REFUSED = 2
"""Nothing started: a setting, the address, the port or the agent file was refused."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = "./.adk-data"
_WATCH_INTERVAL = 0.5
_log = get_logger("adk_actors.daemon.serve")


class _Plan(NamedTuple):
    """What `main` checked before starting anything."""

    settings: DevSettings
    agent_file: AgentFile | None
    host: str
    port: int
    sessions_dir: Path
    a2a: bool = False


def main(
    config_path: str | os.PathLike[str] | None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    data_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    *,
    err: TextIO | None = None,
    stop: threading.Event | None = None,
    console_logs: bool = True,
    a2a: bool = False,
) -> int:
    """Run the daemon until SIGINT or SIGTERM (or `stop` is set); the exit code.

    `environ` defaults to ``os.environ``, `out` to stdout (the listening line), `err`
    to stderr (a refusal's line); `config_path` None serves no agent. Port 0 picks a
    free port (the listening line names it). Signal handlers are installed only when
    called on the main thread; elsewhere, set `stop` to end it. `console_logs` False
    leaves the process's logging configuration alone (for embedding and tests).
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    env = os.environ if environ is None else environ
    try:
        plan = _check(config_path, host, port, data_dir, env, a2a)
        telemetry = _telemetry(env)
    except AdkError as error:
        _print_error(err, error)
        return EXIT_REFUSED
    if console_logs:
        configure_console()
        # uvicorn's own lifecycle lines ("Shutting down") duplicate ours: keep its warnings
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    stopping = threading.Event() if stop is None else stop
    restore = _handle_signals(stopping)
    try:
        return _run(plan, stopping, out, err)
    finally:
        restore()
        if telemetry is not None:
            telemetry.shutdown()  # flushes the batch processor's last spans


def _telemetry(environ: Mapping[str, str]) -> Telemetry | None:
    """The OpenTelemetry SDK exporting over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, else None (the API's no-op)."""
    if not export_requested(environ):
        return None
    return configure_from_env(environ)  # otlp_unavailable without adk-actors[otlp]


def _check(
    config_path: str | os.PathLike[str] | None,
    host: str,
    port: Any,
    data_dir: str | os.PathLike[str],
    environ: Mapping[str, str],
    a2a: bool = False,
) -> _Plan:
    """Every refusal that needs nothing started, in the reference's order: the port,
    the address, the token and bounds; then the agent file and its credentials; last
    the data directory."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65_535:
        raise AdkError("invalid_port", "the port is 0..65535 (0: any free port)")
    check_dev_host(host)
    settings = settings_from_env(environ)
    if settings.legacy_a2a:
        check_legacy_host(host)
    agent_file = None
    if config_path is not None:
        agent_file = load_agent_file(config_path)
        check_credentials(agent_file, environ)
    if a2a and agent_file is None:
        raise AdkError("a2a_requires_agent", "--a2a serves the --config agent: give --config")
    return _Plan(settings, agent_file, host, port, _sessions_dir(Path(data_dir)), a2a)


def _sessions_dir(data_dir: Path) -> Path:
    """``<data_dir>/sessions``, created (owner-only) if missing; ``("data_dir_unusable",
    errno name)`` if either is not a directory this process can create and write."""
    sessions = data_dir / "sessions"
    try:
        for directory in (data_dir, sessions):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not os.access(directory, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "not writable")
    except OSError as error:
        raise AdkError(
            ("data_dir_unusable", _errno_name(error)),
            "--data must name a directory the daemon can create and write",
        ) from None
    return sessions


def _errno_name(error: OSError) -> str:
    if isinstance(error, FileExistsError):
        return "enotdir"  # mkdir found a file where the directory goes
    return errno.errorcode.get(error.errno or 0, "io_error").lower()


def _open_sessions(directory: Path) -> LmdbSessionService:
    """The LMDB session store in `directory`, or ``("session_store_open_failed", why)``."""
    try:
        return LmdbSessionService(directory)
    except AdkError:
        raise
    except Exception as error:  # OSError, or the store library's own error
        why = _errno_name(error) if isinstance(error, OSError) else type(error).__name__
        raise AdkError(
            ("session_store_open_failed", why), "the session store could not be opened"
        ) from None


def _run(plan: _Plan, stopping: threading.Event, out: TextIO, err: TextIO) -> int:
    sessions: LmdbSessionService | None = None
    mounted: DaemonA2A | None = None
    try:
        adk.start()
        sessions = _open_sessions(plan.sessions_dir)
        agent_ref = None if plan.agent_file is None else spawn_from_file(plan.agent_file)
        agent = None if agent_ref is None else agent_ref.name
        runner_options = {} if plan.agent_file is None else plan.agent_file.runner_options
        state = DevState(plan.settings, sessions, runner_options)
        config = listener_config(plan.settings, plan.host, plan.port)
        extra: list[BaseRoute] = []
        if agent_ref is not None and plan.agent_file is not None:
            extra.append(mcp_route(agent_ref, plan.agent_file, plan.settings))
            if plan.a2a:
                mounted = a2a_routes_for_daemon(agent_ref, plan.agent_file, plan.settings, sessions)
                extra.extend(mounted.routes)
        listener = start_listener(build_app(state, extra), config)
        if mounted is not None:
            mounted.publish(listener.url)  # the card names the bound port (port 0 too)
    except AdkError as error:
        _print_error(err, error)
        _stop(sessions)
        return EXIT_REFUSED
    _print_line(out, _listening(listener.url, agent, plan.settings, a2a=mounted is not None))
    _log.info("adk.daemon.started", url=listener.url, agent=agent)
    while not stopping.wait(_WATCH_INTERVAL):
        if not adk.app.running():
            _print_error(err, AdkError("application_stopped", "the daemon's tree stopped"))
            _stop(sessions)
            return EXIT_FAILED
    drain(state)
    if mounted is not None:
        mounted.close()  # its task store (the drain ended the requests that used it)
    _stop(sessions)
    _log.info("adk.daemon.stopped")
    return EXIT_OK


def _listening(
    url: str, agent: str | None, settings: DevSettings, *, a2a: bool = False
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "status": "listening",
        "url": url,
        "console_url": f"{url}/dev",
        "api_url": f"{url}/dev/v1",
        "agent": agent,
        "pid": os.getpid(),
    }
    if settings.legacy_a2a:
        line["legacy_url"] = f"{url}{LEGACY_PATH}"
    if a2a:
        line["a2a_card_url"] = f"{url}{CARD_PATH}"
        line["a2a_url"] = f"{url}{RPC_PATH}"
    return line


def _stop(sessions: LmdbSessionService | None) -> None:
    """Stop the tree (children in reverse order: the listener first), then close the
    session store its runs wrote to."""
    adk.stop()
    if sessions is not None:
        sessions.close()


def _handle_signals(stopping: threading.Event) -> Callable[[], None]:
    """SIGINT and SIGTERM set `stopping` (on the main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def error_line(error: AdkError) -> dict[str, Any]:
    """The JSON line of a refusal: ``reason`` a string (the first part of a composite
    reason; the rest goes in ``details``) and the error's message."""
    reason = error.reason
    line: dict[str, Any] = {"status": "error"}
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        line["reason"] = reason[0]
        line["details"] = [_json_safe(part) for part in reason[1:]]
    else:
        line["reason"] = _json_safe(reason)
    line["message"] = error.detail
    return line


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return str(value)[:200]


def _print_error(err: TextIO, error: AdkError) -> None:
    _print_line(err, error_line(error))


def _print_line(stream: TextIO, value: dict[str, Any]) -> None:
    stream.write(json.dumps(value, ensure_ascii=False) + "\n")
    stream.flush()
