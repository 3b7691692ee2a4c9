"""The two servers of `daemon.py`, each in a process of its own: our daemon
(``python -m adk_actors.daemon`` with a generated agent config file) and google-adk's
``adk api_server`` on `benchmarks/_adk_peer_app`; with their RSS and CPU time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
PEER_AGENTS = Path(__file__).resolve().parent / "_adk_peer_app"
PEER_APP = "bench_agent"
AGENT = "BenchAgent"
CHUNKS = ("c0 ", "c1 ", "c2 ")
"""The streamed answer's chunks, on both sides."""
LANES = 256
"""Our agent's ``max_concurrent_invocations``: every fan-out run at once (default 32)."""


class Server:
    """A server process, its base URL, and a sampler of its RSS (children included)."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.name = name
        self.process = process
        self.url = url
        self.log = log
        self._ps = psutil.Process(process.pid)
        self.peak = 0
        self.note: str | None = None
        """A caveat to print with this server's figures."""
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def rss(self) -> int:
        processes = [self._ps, *self._ps.children(recursive=True)]
        total = 0
        for process in processes:
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
        return total

    def cpu_seconds(self) -> float:
        times = self._ps.cpu_times()
        return float(times.user + times.system)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        """Track the peak RSS while the block runs."""
        self.peak = self.rss()
        self._stop.clear()
        self._sampler = threading.Thread(target=self._sample, name="rss", daemon=True)
        self._sampler.start()
        try:
            yield
        finally:
            self._stop.set()
            self._sampler.join()
            self.peak = max(self.peak, self.rss())

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.rss())

    def quiesce(self, timeout: float = 60.0) -> None:
        """Wait until the server uses under 5% of a core (its background work is done)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._ps.cpu_percent(interval=0.3) < 5.0:
                return

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"{self.name} exited with {self.process.returncode}:\n{tail}")


def _ours_config(directory: Path, delay: float, streaming: bool, lanes: int | None) -> Path:
    """An agent config file whose scripted model gives every call the same answer."""
    step: dict[str, Any] = {"stream": list(CHUNKS)} if streaming else {"text": "ok"}
    if delay:
        step["delay"] = delay
    config: dict[str, Any] = {
        "name": AGENT,
        "provider": "scripted",
        "script": [step],
        "script_repeat": True,
    }
    if lanes is not None:
        config["max_concurrent_invocations"] = lanes
    if streaming:
        config["runner_options"] = {"streaming_mode": "text"}
    path = directory / f"agent-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(config))
    return path


_LANES_REFUSED = threading.Event()
"""Set once a daemon refused ``max_concurrent_invocations`` in its config file."""


class _Refused(Exception):
    """The daemon refused to start; `reason` is its error line's reason."""

    def __init__(self, reason: str, log: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log = log


def start_ours(work: Path, token: str, delay: float, streaming: bool) -> Server:
    """``python -m adk_actors.daemon`` on an ephemeral port; its URL from its JSON line.

    Its agent may run `LANES` invocations at once when the config file can say so;
    otherwise the agent's default applies, and `Server.note` says it."""
    if not _LANES_REFUSED.is_set():
        try:
            return _start_ours(work, token, delay, streaming, LANES)
        except _Refused as refused:
            if refused.reason != "unknown_agent_config_keys":
                raise SystemExit(f"our daemon did not start:\n{refused.log}") from None
            _LANES_REFUSED.set()
    server = _start_ours(work, token, delay, streaming, lanes=None)
    server.note = (
        "the agent config file cannot set max_concurrent_invocations: the agent runs at "
        "most its default number of invocations at once"
    )
    return server


def _start_ours(work: Path, token: str, delay: float, streaming: bool, lanes: int | None) -> Server:
    config = _ours_config(work, delay, streaming, lanes)
    data = Path(tempfile.mkdtemp(prefix="data-", dir=work))
    log = work / f"ours-{secrets.token_hex(4)}.log"
    environ = dict(os.environ, ADK_DEV_TOKEN=token, ADK_DEV_SSE_MAX_EVENTS="1000")
    command = [sys.executable, "-m", "adk_actors.daemon", "--config", str(config)]
    command += ["--host", "127.0.0.1", "--port", "0", "--data", str(data)]
    with log.open("wb") as errors:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, env=environ, cwd=ROOT
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(10)
        text = log.read_text(errors="replace")
        raise _Refused(_refusal_reason(text), text[-2000:])
    url = json.loads(line)["url"]
    # anything more it prints must not fill the pipe and block it
    threading.Thread(target=process.stdout.read, name="drain", daemon=True).start()
    return Server("adk_actors daemon", process, url, log)


def _refusal_reason(log: str) -> str:
    """The ``reason`` of the daemon's JSON refusal line in its log ("" if none)."""
    for line in reversed(log.splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict) and value.get("status") == "error":
                return str(value.get("reason", ""))
    return ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_peer(work: Path, delay: float, chunks: int) -> Server:
    """google-adk's ``adk api_server`` (no reload, in-memory services, sessions made on
    first use as ours are); ready once ``GET /list-apps`` answers."""
    port = _free_port()
    log = work / f"peer-{secrets.token_hex(4)}.log"
    # `python -m google.adk.cli` is google-adk's `adk` command; the `adk` script in the
    # venv is ours (both packages name their command `adk`, the last install wins)
    command = [sys.executable, "-m", "google.adk.cli", "api_server"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    command += ["--no-reload", "--log_level", "error", "--auto_create_session"]
    command += ["--session_service_uri", "memory://", "--artifact_service_uri", "memory://"]
    command += [str(PEER_AGENTS)]
    environ = dict(os.environ, BENCH_PEER_DELAY=str(delay), BENCH_PEER_CHUNKS=str(chunks))
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=environ, cwd=work
        )
    url = f"http://127.0.0.1:{port}"
    server = Server("google-adk api_server", process, url, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        server.check_alive()
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/list-apps", timeout=2).status_code == 200:
                return server
        time.sleep(0.2)
    server.stop()
    raise SystemExit("google-adk api_server did not start in 60 s")
