"""The daemon the stress target drives when it serves it in-process, and how the target
talks to any daemon (a subprocess one is `daemon_spawn.DaemonProcess`).

`InProcessDaemon` serves the same daemon (`adk_actors.daemon.serve.main`) on a thread of
this process, so the harness can reach its supervision tree: `kill_listener` sends the
HTTP listener process the kernel's untrappable ``"kill"`` exit signal and waits for its
supervisor to restart it and the port to answer again.

It also holds what the target gives a daemon and how it reaches it: the agent file
(`agent_config`), the URL and token rules, the bounded API client, and `DaemonApi`
(requests and event streams that reconnect across a listener kill). The daemon waits
here block: the async target calls them through `asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import io
import ipaddress
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from adk_actors.app import APP_NAME
from adk_actors.daemon.serve import main as serve_main
from adk_actors.serving.listener import UvicornOptions
from adk_actors.stress.daemon_spawn import (
    MAX_LINE,
    START_TIMEOUT,
    STOP_TIMEOUT,
    TAIL_BYTES,
    listening_line,
)
from adk_actors.stress.latency import draw_delay
from adk_actors.stress.scenario import Scenario
from providers.errors import AdkError
from supervision import Pid, Supervisor, get_logger
from supervision import exit as exit_signal

LISTENER_CHILD = "http_listener"
LISTENER_RESTART_TIMEOUT = UvicornOptions().stop_timeout + 5.0
"""How long a killed listener has to be restarted and answer: its rebind waits up to the
listener's own stop timeout for the killed uvicorn to let the port go, then starts."""
_LISTENER_THREAD = "adk-http"
AGENT_NAME = "StressAgent"
ANSWER = "ok"
SCRIPT_STEPS = 64
"""Latency draws in the spawned agent's repeating script."""
_DEFAULT_CONCURRENCY = 256
MAX_CONNECTIONS = 1024
REQUEST_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=10.0, pool=60.0)
"""Each API request's bounds (an event stream's read waits at most this between frames:
the daemon sends a heartbeat every 15 s)."""
MAX_STREAMS_PER_RUN = 64
"""Event-stream connections one run may take (each ends at the daemon's own bounds)."""
MAX_STREAM_BYTES = 64 << 20
MAX_RETRIES = 20
"""Reconnections of one request across listener kills."""
SETTLE_TIMEOUT = 5.0
"""How long a cancelled run has to reach its terminal."""
_log = get_logger("adk_actors.stress.daemon_process")


class _LineSink(io.StringIO):
    """The in-process daemon's stdout: keeps what it printed, signals the first line."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = threading.Event()

    def write(self, text: str) -> int:
        written = super().write(text[:MAX_LINE])
        if "\n" in text:
            self.ready.set()
        return written


class InProcessDaemon:
    """``adk serve`` on a thread of this process (its tree is this process's tree)."""

    def __init__(self, config: Path, data_dir: Path, token: str, extra_env: dict[str, str]) -> None:
        self._config = config
        self._data_dir = data_dir
        self._environ = {**extra_env, "ADK_DEV_TOKEN": token}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.exit_code: int | None = None
        self.url = ""

    def __repr__(self) -> str:  # never the token
        return f"InProcessDaemon(url={self.url!r})"

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> str:
        """Serve the daemon on a thread; its URL once it prints its listening line."""
        if self._thread is not None:
            raise AdkError("daemon_already_running", "the in-process daemon was started")
        out, err = _LineSink(), _LineSink()
        thread = threading.Thread(
            target=self._serve, args=(out, err), name="adk-stress-daemon", daemon=True
        )
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not out.ready.wait(0.05):
            if not thread.is_alive() or time.monotonic() > deadline:
                self._stop.set()
                thread.join(STOP_TIMEOUT)
                shown = err.getvalue().strip()[-TAIL_BYTES:] or "no listening line"
                raise AdkError("stress_daemon_start_failed", f"the daemon did not start: {shown}")
        listening = listening_line(out.getvalue().splitlines()[0].encode())
        if listening is None:
            raise AdkError("stress_daemon_start_failed", "the daemon printed no listening line")
        self.url = str(listening["url"])
        return self.url

    def _serve(self, out: _LineSink, err: _LineSink) -> None:
        self.exit_code = serve_main(
            self._config,
            "127.0.0.1",
            0,
            self._data_dir,
            self._environ,
            out,
            err=err,
            stop=self._stop,
            console_logs=False,
        )

    def kill_listener(self) -> tuple[str, bool]:
        """Kill the HTTP listener process (the untrappable ``"kill"``); its pid and
        whether the supervisor restarted it and the port answers within
        `LISTENER_RESTART_TIMEOUT`."""
        victim = _listener_pid()
        if victim is None:
            return "none", False
        exit_signal(victim, "kill")
        deadline = time.monotonic() + LISTENER_RESTART_TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(0.05)
            current = _listener_pid()
            if current is not None and current != victim and _answers(self.url):
                return repr(victim), True
        return repr(victim), False

    def stop(self) -> int | None:
        """Stop it as SIGTERM would (drain, then the tree); its exit code."""
        thread = self._thread
        if thread is None:
            return None
        self._stop.set()
        thread.join(STOP_TIMEOUT + 10.0)
        return self.exit_code if not thread.is_alive() else None

    def leftover_children(self) -> list[str]:
        """Listener threads still serving after the stop (none after a clean stop)."""
        return [
            f"thread {thread.name}"
            for thread in threading.enumerate()
            if thread.name == _LISTENER_THREAD and thread.is_alive()
        ]


def _listener_pid() -> Pid | None:
    try:
        children = Supervisor.which_children(APP_NAME, 5.0)
    except Exception:  # the tree is gone: no listener either
        return None
    for child in children:
        if child.id == LISTENER_CHILD:
            return child.pid
    return None


def _answers(url: str) -> bool:
    """Whether anything answers HTTP at `url` (the token is not needed for a 401)."""
    try:
        with httpx.Client(timeout=1.0, follow_redirects=False, trust_env=False) as client:
            return client.get(f"{url}/dev/v1/agents").status_code == 401
    except httpx.HTTPError:
        return False


# -- what the daemon is given -----------------------------------------------------------


def agent_config(scenario: Scenario) -> dict[str, Any]:
    """The spawned daemon's agent file: the scripted provider answering `ANSWER` after
    each of `SCRIPT_STEPS` latency draws (seeded by the scenario), repeating; enough
    concurrent invocations for the scenario's concurrency."""
    rng = random.Random(scenario.seed)
    latency = scenario.model.latency
    steps = [
        {"text": ANSWER, "delay": round(draw_delay(latency, rng), 6)} for _ in range(SCRIPT_STEPS)
    ]
    concurrency = scenario.concurrency or _DEFAULT_CONCURRENCY
    return {
        "name": AGENT_NAME,
        "provider": "scripted",
        "script": steps,
        "script_repeat": True,
        "max_concurrent_invocations": min(4096, max(32, concurrency)),
    }


def check_daemon_url(url: str) -> str:
    """`url` without a trailing slash if the token may go there: http to a loopback
    host, or https; no credentials, path, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port
    except ValueError:
        host = None
    if (
        host is None
        or parts.scheme not in ("http", "https")
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username is not None
        or parts.password is not None
    ):
        raise AdkError(
            "invalid_stress_daemon_url", "give the daemon's base URL, e.g. http://127.0.0.1:8080"
        )
    if parts.scheme == "http" and not _loopback(host):
        raise AdkError(
            "insecure_non_loopback_daemon_url", "plain HTTP is only for a loopback daemon"
        )
    return url.rstrip("/")


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def env_token(environ: dict[str, str] | None = None) -> str:
    """The daemon's token from ``ADK_DEV_TOKEN`` (never logged, never in a URL)."""
    token = (os.environ if environ is None else environ).get("ADK_DEV_TOKEN", "")
    if not token:
        raise AdkError("dev_token_required", "export ADK_DEV_TOKEN, the daemon's token")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise AdkError("dev_token_invalid", "ADK_DEV_TOKEN must be printable ASCII")
    return token


# -- how the target talks to it ---------------------------------------------------------


def api_client(url: str, token: str, connections: int) -> httpx.AsyncClient:
    """The bounded API client: the token in the header only, no redirects, no proxies."""
    return httpx.AsyncClient(
        base_url=url,
        headers={"authorization": f"Bearer {token}", "accept": "application/json"},
        timeout=REQUEST_TIMEOUT,
        limits=httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=2.0,  # under the daemon's 5 s idle close
        ),
        follow_redirects=False,
        trust_env=False,
    )


def api_path(*segments: str) -> str:
    """A ``/dev/v1/...`` path with each segment percent-encoded (a slash included)."""
    return "/dev/v1/" + "/".join(quote(segment, safe="") for segment in segments)


def connections_for(scenario: Scenario) -> int:
    """Connections: each in-flight run follows one stream, plus its start and reads."""
    wanted = 2 * scenario.concurrency + 8 if scenario.concurrency else _DEFAULT_CONCURRENCY
    return min(MAX_CONNECTIONS, wanted)


# -- the connection ------------------------------------------------------------------------


class Lost(Exception):
    """The connection failed under a request; `sent`: the request may have arrived."""

    def __init__(self, sent: bool) -> None:
        super().__init__("connection failed")
        self.sent = sent
        self.accepted = False
        """The run had been accepted (202) before the connection failed."""


class DaemonApi:
    """The target's connection to the daemon's ``/dev/v1`` API: requests and event
    streams that reconnect across a listener kill (`listener_kills` changed or
    `listener_killing`), and `Lost` when a connection fails with no such kill behind it.
    `up` is clear while the daemon or its listener is being restarted."""

    def __init__(self) -> None:
        self.client: httpx.AsyncClient | None = None
        self.up = asyncio.Event()
        self.listener_kills = 0
        self.listener_killing = False

    async def replace(self, client: httpx.AsyncClient | None) -> None:
        """Use `client` from now on (a restarted daemon; None: closed), closing the one
        before."""
        old, self.client = self.client, client
        if old is not None:
            await old.aclose()

    async def await_terminal(self, run_id: str) -> dict[str, Any]:
        """The run's terminal outcome JSON, read from its event stream (reconnecting
        with ``Last-Event-ID`` when a connection ends at its bounds or a listener kill
        cut it)."""
        cursor = 0
        budget = MAX_STREAM_BYTES
        for attempt in range(MAX_STREAMS_PER_RUN):
            headers = {"accept": "text/event-stream"}
            if cursor:
                headers["last-event-id"] = str(cursor)
            listener = self.listener_kills
            try:
                async with self.http().stream(
                    "GET", f"/dev/v1/runs/{quote(run_id, safe='')}/events", headers=headers
                ) as response:
                    if response.status_code != 200:
                        return await self.status_terminal(run_id)
                    frame: dict[str, str] = {}
                    async for line in response.aiter_lines():
                        budget -= len(line) + 1
                        if budget < 0:
                            return await self.status_terminal(run_id)
                        if line:
                            field, _, value = line.partition(":")
                            frame[field] = value.removeprefix(" ")
                            continue
                        if frame.get("id", "").isdigit():
                            cursor = int(frame["id"])
                        if frame.get("event") == "terminal":
                            terminal: dict[str, Any] = json.loads(frame.get("data", "{}"))
                            return terminal
                        if frame.get("event") == "replay_gap":
                            return await self.status_terminal(run_id)
                        frame = {}
            except httpx.TransportError:
                if not self.across_listener_kill(listener):
                    raise Lost(sent=True) from None
                await self.pause(attempt)
        return await self.status_terminal(run_id)

    async def status_terminal(self, run_id: str) -> dict[str, Any]:
        """The run's outcome from its status, polled until it is terminal."""
        delay = 0.01
        while True:
            response = await self.request("GET", f"/dev/v1/runs/{quote(run_id, safe='')}")
            if response.status_code == 404:
                raise Lost(sent=True)  # only a restarted daemon forgets a retained run
            if response.status_code == 200:
                outcome = response.json().get("outcome")
                if isinstance(outcome, dict):
                    return outcome
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def cancel(self, run_id: str) -> dict[str, Any] | None:
        """Past its deadline: cancel the run and take the terminal it reaches (None if
        none came within `SETTLE_TIMEOUT`)."""
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT):
                await self.request("DELETE", f"/dev/v1/runs/{quote(run_id, safe='')}")
                return await self.status_terminal(run_id)
        except TimeoutError:
            return None

    async def request(self, method: str, path: str, **body: Any) -> httpx.Response:
        """One API request, sent again across a listener kill when that is safe (it
        never arrived, or it is a GET); otherwise a transport failure is `_Lost`."""
        for attempt in range(MAX_RETRIES):
            listener = self.listener_kills
            try:
                return await self.http().request(method, path, json=body if body else None)
            except httpx.ConnectError:
                if not self.across_listener_kill(listener):
                    raise Lost(sent=False) from None
            except httpx.TransportError:
                if method != "GET" or not self.across_listener_kill(listener):
                    raise Lost(sent=True) from None
            await self.pause(attempt)
        raise Lost(sent=method != "GET")

    def across_listener_kill(self, listener_kills_before: int) -> bool:
        return self.listener_killing or self.listener_kills != listener_kills_before

    async def pause(self, attempt: int) -> None:
        """Before a reconnection: the listener's restart, then a short backoff."""
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT * 2):
                await self.up.wait()
        except TimeoutError:
            pass
        await asyncio.sleep(min(0.02 * (attempt + 1), 0.5))

    def http(self) -> httpx.AsyncClient:
        if self.client is None:
            raise AdkError("stress_target_not_open", "open the daemon target first")
        return self.client
