"""The daemon the stress target drives: a spawned ``adk serve``, or one served in-process.

`DaemonProcess` runs ``python -m adk_actors.daemon`` (what ``adk serve`` runs) as a
subprocess on loopback with a generated ``ADK_DEV_TOKEN``, waits for its one JSON
``"listening"`` line (bounded), and can SIGKILL it and start it again on the same data
directory and port (so LMDB sessions survive and clients come back where they were).
Its stderr (the daemon's logs) goes to a file in the work directory, never to a pipe
nobody reads; only a bounded tail of it is ever read back, for an error message.

`InProcessDaemon` serves the same daemon (`adk_actors.daemon.serve.main`) on a thread of
this process, so the harness can reach its supervision tree: `kill_listener` sends the
HTTP listener process the kernel's untrappable ``"kill"`` exit signal and waits for its
supervisor to restart it and the port to answer again.

It also holds what the target gives and expects of a daemon: the agent file
(`agent_config`), the URL and token rules, the bounded API client, and the shape of a
run's stored session (`session_problem`: whole invocations). Every wait here blocks: the
async target calls these through `asyncio.to_thread`.
"""

from __future__ import annotations

import io
import ipaddress
import json
import math
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Final, TypeVar
from urllib.parse import urlsplit

import httpx

from adk_actors.app import APP_NAME
from adk_actors.daemon.serve import main as serve_main
from adk_actors.stress.records import InvariantResult, Outcome
from adk_actors.stress.scenario import Lognormal, Scenario
from providers.errors import AdkError
from supervision import Pid, Supervisor, get_logger
from supervision import exit as exit_signal

START_TIMEOUT = 60.0
"""How long a start may take to print its listening line (a loaded machine is slow)."""
STOP_TIMEOUT = 30.0
"""How long a SIGTERM drain may take before the process is killed."""
_MAX_LINE = 8192
_TAIL_BYTES = 2000
_REPO = Path(__file__).resolve().parents[2]
_DROPPED_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
LISTENER_CHILD = "http_listener"
LISTENER_RESTART_TIMEOUT = 8.0
"""How long a killed listener has to be restarted and answer (under the engine's 10 s)."""
_LISTENER_THREAD = "adk-http"
AGENT_NAME = "StressAgent"
ANSWER = "ok"
SCRIPT_STEPS = 64
"""Latency draws in the spawned agent's repeating script."""
_DEFAULT_CONCURRENCY = 256
_PERCENTILE_99 = 2.3263478740408408
"""The standard normal's 99th percentile: a lognormal's sigma from its median and p99."""
SUPPORTED_KINDS: Final = ("runs", "sessions")
MAX_CONNECTIONS = 1024
REQUEST_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=10.0, pool=60.0)
"""Each API request's bounds (an event stream's read waits at most this between frames:
the daemon sends a heartbeat every 15 s)."""
SampleT = TypeVar("SampleT")
_log = get_logger("adk_actors.stress.daemon_process")


class DaemonProcess:
    """One daemon subprocess at a time, restartable on the same port and data dir."""

    def __init__(self, config: Path, data_dir: Path, token: str, extra_env: dict[str, str]) -> None:
        self._config = config
        self._data_dir = data_dir
        self._token = token
        self._extra_env = dict(extra_env)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.port = 0
        self.url = ""
        self.starts = 0
        self.descendants: set[int] = set()
        """Every descendant pid seen while a daemon ran (checked gone after the stop)."""

    def __repr__(self) -> str:  # never the token
        return f"DaemonProcess(url={self.url!r}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Start the daemon (port 0 the first time, then the same port); its URL."""
        if self.running():
            raise AdkError("daemon_already_running", "the spawned daemon is still running")
        self._close_streams()
        log_path = self._data_dir.parent / f"daemon-{self.starts}.log"
        self._log_file = log_path.open("wb")
        args = [sys.executable, "-m", "adk_actors.daemon", "--config", str(self._config)]
        args += ["--port", str(self.port), "--data", str(self._data_dir)]
        process = subprocess.Popen(
            args,
            env=self._environ(),
            cwd=self._data_dir.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            start_new_session=True,  # a Ctrl-C of the harness is not the daemon's
        )
        self._process = process
        line = _first_line(process, START_TIMEOUT)
        listening = _listening(line)
        if listening is None:
            if process.poll() is None:
                process.kill()
            process.wait(STOP_TIMEOUT)
            raise AdkError(
                "stress_daemon_start_failed",
                f"the daemon did not start: {_tail(log_path)}",
            )
        self.url = str(listening["url"])
        self.port = int(self.url.rsplit(":", 1)[1])
        self.starts += 1
        _log.info("adk.stress.daemon_started", url=self.url, pid=process.pid)
        return self.url

    def kill(self) -> int | None:
        """SIGKILL the daemon and reap it; the pid it had (None if none ran)."""
        process = self._process
        if process is None or process.poll() is not None:
            return None
        self.descendants |= descendants(process.pid)
        process.kill()
        process.wait(STOP_TIMEOUT)
        return process.pid

    def stop(self) -> int | None:
        """SIGTERM the daemon and wait for its drained exit; its exit code (None if it
        did not run; -9 if it had to be killed after `STOP_TIMEOUT`)."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            self.descendants |= descendants(process.pid)
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        self._close_streams()
        return process.returncode

    def leftover_children(self) -> list[str]:
        """Descendants seen while it ran that are still alive (none after a clean stop)."""
        return [f"pid {pid}" for pid in sorted(self.descendants) if _alive(pid)]

    def _environ(self) -> dict[str, str]:
        environ = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("ADK_") and key not in _DROPPED_ENV
        }
        path = environ.get("PYTHONPATH")
        environ["PYTHONPATH"] = str(_REPO) if not path else f"{_REPO}{os.pathsep}{path}"
        environ.update(self._extra_env)
        environ["ADK_DEV_TOKEN"] = self._token
        return environ

    def _close_streams(self) -> None:
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def _first_line(process: subprocess.Popen[bytes], timeout: float) -> bytes:
    """The first stdout line (at most `_MAX_LINE` bytes), or b"" if none came in time."""
    stream = process.stdout
    assert stream is not None
    deadline = time.monotonic() + timeout
    line = b""
    fd = stream.fileno()
    while not line.endswith(b"\n") and len(line) < _MAX_LINE:
        left = deadline - time.monotonic()
        if left <= 0:
            return b""
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return b""
        chunk = os.read(fd, 1)
        if not chunk:
            return b""
        line += chunk
    return line


def _listening(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("status") == "listening" and "url" in value:
        return value
    return None


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - _TAIL_BYTES))
            return stream.read().decode("utf-8", "replace").strip()[-_TAIL_BYTES:]
    except OSError:
        return "(no log)"


def descendants(pid: int) -> set[int]:
    """Every live descendant of `pid`, from ``/proc/<pid>/task/*/children`` (empty where
    that is not available)."""
    found: set[int] = set()
    pending = [pid]
    while pending and len(found) < 4096:
        current = pending.pop()
        for task in _tasks(current):
            try:
                text = (task / "children").read_text()
            except OSError:
                continue
            for word in text.split():
                child = int(word)
                if child not in found:
                    found.add(child)
                    pending.append(child)
    return found


def _tasks(pid: int) -> list[Path]:
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return state != ["Z"]


class _LineSink(io.StringIO):
    """The in-process daemon's stdout: keeps what it printed, signals the first line."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = threading.Event()

    def write(self, text: str) -> int:
        written = super().write(text[:_MAX_LINE])
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
                shown = err.getvalue().strip()[-_TAIL_BYTES:] or "no listening line"
                raise AdkError("stress_daemon_start_failed", f"the daemon did not start: {shown}")
        listening = _listening(out.getvalue().splitlines()[0].encode())
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
    steps = [{"text": ANSWER, "delay": _draw(latency, rng)} for _ in range(SCRIPT_STEPS)]
    concurrency = scenario.concurrency or _DEFAULT_CONCURRENCY
    return {
        "name": AGENT_NAME,
        "provider": "scripted",
        "script": steps,
        "script_repeat": True,
        "max_concurrent_invocations": min(4096, max(32, concurrency)),
    }


def _draw(latency: tuple[float, float] | Lognormal, rng: random.Random) -> float:
    if isinstance(latency, Lognormal):
        sigma = math.log(latency.p99_s / latency.median_s) / _PERCENTILE_99
        value = rng.lognormvariate(math.log(latency.median_s), sigma)
        return round(min(value, latency.p99_s * 10), 6)
    low, high = latency
    return round(rng.uniform(low, high), 6)


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


# -- what the stress target checks and uses ---------------------------------------------


def session_problem(
    session: Any, message: str, outcome: Outcome, state_index: int | None
) -> str | None:
    """What breaks "whole invocations" in one session's JSON, or None.

    Its events group by invocation id into contiguous runs, each opened by the user's
    message; a completed run's one invocation ends with a final answer; only a run lost
    across a kill may stop part way. `state_index` is checked against the state."""
    name = str(session.get("id", "?")) if isinstance(session, dict) else "?"
    if not isinstance(session, dict) or not isinstance(session.get("events"), list):
        return f"{name}: not a session"
    events = [event for event in session["events"] if isinstance(event, dict)]
    if session.get("events_truncated"):
        return f"{name}: more events than one page holds"
    groups: list[list[dict[str, Any]]] = []
    for event in events:
        if groups and groups[-1][0].get("invocation_id") == event.get("invocation_id"):
            groups[-1].append(event)
        elif any(group[0].get("invocation_id") == event.get("invocation_id") for group in groups):
            return f"{name}: invocations interleave"
        else:
            groups.append([event])
    if state_index is not None and session.get("state", {}).get("stress_index") != state_index:
        return f"{name}: its state was not kept"
    if not groups:
        return None if outcome is Outcome.LOST else f"{name}: no events stored"
    if len(groups) != 1:
        return f"{name}: {len(groups)} invocations for one run"
    group = groups[0]
    if group[0].get("author") != "user" or group[0].get("text") != message:
        return f"{name}: the invocation does not open with its message"
    final = group[-1]
    complete = len(group) >= 2 and final.get("is_final") is True and "error" not in final
    if outcome is Outcome.COMPLETED and not complete:
        return f"{name}: a completed run without its final answer"
    return None


def check_kinds(scenario: Scenario) -> None:
    kinds: list[str] = [scenario.kind]
    if scenario.kind == "mixed" and scenario.mix is not None:
        kinds = [kind for kind, weight in scenario.mix.weights().items() if weight > 0]
    for kind in kinds:
        if kind not in SUPPORTED_KINDS:
            raise AdkError(
                ("stress_kind_not_supported", kind),
                f"kind {kind} is not supported against a daemon",
            )


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


def connections_for(scenario: Scenario) -> int:
    """Connections: each in-flight run follows one stream, plus its start and reads."""
    wanted = 2 * scenario.concurrency + 8 if scenario.concurrency else _DEFAULT_CONCURRENCY
    return min(MAX_CONNECTIONS, wanted)


def reservoir_add(
    samples: list[SampleT], sample: SampleT, seen: int, rng: random.Random, limit: int
) -> None:
    """Keep in `samples` a uniform sample of at most `limit` of the `seen` items."""
    if len(samples) < limit:
        samples.append(sample)
        return
    slot = rng.randrange(seen)
    if slot < limit:
        samples[slot] = sample


def stop_invariants(code: int | None, leftovers: list[str]) -> list[InvariantResult]:
    """A spawned daemon's stop: exit code 0 after its drain, and nothing left behind."""
    left = f"{len(leftovers)} left after the stop: {', '.join(leftovers[:5])}"
    return [
        InvariantResult(
            name="daemon_clean_exit", held=code == 0, detail=f"exit code {code} on SIGTERM"
        ),
        InvariantResult(
            name="daemon_no_child_processes",
            held=not leftovers,
            detail=left if leftovers else "nothing left after the stop",
        ),
    ]


def listener_invariant(kills: int, failures: int) -> InvariantResult:
    """Every killed listener was restarted by its supervisor and its port answered."""
    return InvariantResult(
        name="daemon_listener_restarted",
        held=failures == 0,
        detail=f"{kills} listener kill(s), {failures} not restarted with the port answering",
    )
