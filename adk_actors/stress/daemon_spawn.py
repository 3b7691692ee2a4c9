"""A spawned ``adk serve`` subprocess the daemon stress target drives (`DaemonProcess`).

It runs ``python -m adk_actors.daemon`` (what ``adk serve`` runs) on loopback with a
generated ``ADK_DEV_TOKEN``, waits for its one JSON ``"listening"`` line (bounded), and
can SIGKILL it and start it again on the same data directory and port (so LMDB sessions
survive and clients come back where they were). Its stderr (the daemon's logs) goes to a
file in the work directory, never to a pipe nobody reads; only a bounded tail of it is
ever read back, for an error message. Its life is bound to this process's
(`daemon_lifetime`). Every wait here blocks: the async target calls these through
`asyncio.to_thread`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from adk_actors.stress.daemon_lifetime import forget, spawn
from providers.errors import AdkError
from supervision import get_logger

START_TIMEOUT = 60.0
"""How long a start may take to print its listening line (a loaded machine is slow)."""
STOP_TIMEOUT = 30.0
"""How long a SIGTERM drain may take before the process is killed."""
MAX_LINE = 8192
TAIL_BYTES = 2000
_REPO = Path(__file__).resolve().parents[2]
_DROPPED_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_log = get_logger("adk_actors.stress.daemon_spawn")


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
        # its own session (a Ctrl-C of the harness is not the daemon's), its life bound
        # to this process's (`daemon_lifetime`)
        process = spawn(
            args,
            env=self._environ(),
            cwd=self._data_dir.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
        )
        self._process = process
        line = _first_line(process, START_TIMEOUT)
        listening = listening_line(line)
        if listening is None:
            if process.poll() is None:
                process.kill()
            process.wait(STOP_TIMEOUT)
            forget(process)
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
        forget(process)
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
        forget(process)
        self._close_streams()
        return process.returncode

    def leftover_children(self) -> list[str]:
        """Descendants seen while it ran that are still alive (none after a clean stop)."""
        return [f"pid {pid}" for pid in sorted(self.descendants) if alive(pid)]

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
    """The first stdout line (at most `MAX_LINE` bytes), or b"" if none came in time."""
    stream = process.stdout
    assert stream is not None
    deadline = time.monotonic() + timeout
    line = b""
    fd = stream.fileno()
    while not line.endswith(b"\n") and len(line) < MAX_LINE:
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


def listening_line(line: bytes) -> dict[str, Any] | None:
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
            stream.seek(max(0, stream.tell() - TAIL_BYTES))
            return stream.read().decode("utf-8", "replace").strip()[-TAIL_BYTES:]
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


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return state != ["Z"]
