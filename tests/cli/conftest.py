"""CLI tests: `adk` runs as a real subprocess, from the repository root.

`run_adk(...)` runs one command and returns the finished process; `json_lines` parses
its stdout. The environment has no Gemini key unless a test sets one, so the offline
paths are the ones exercised.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
DEV_TOKEN = "cli-test-dev-token-0123456789abcdef"
_SCRIPT = Path(sys.executable).with_name("adk")
ADK = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "adk_actors.cli"]


def base_env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "ADK_DEV_TOKEN", "ADK_DEV_URL")
    }
    env.update(extra)
    return env


def run_adk(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ADK, *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env if env is not None else base_env(),
        timeout=timeout,
        check=False,
    )


def json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[Any], str]:
    counter = iter(range(1_000_000))

    def write(value: Any) -> str:
        path = tmp_path / f"agent-{next(counter)}.json"
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        return str(path)

    return write


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback URL nothing answers: its port is a socket bound to port 0 and never
    listened on, so connecting is refused. The socket stays bound for the whole test
    (a port closed again could be taken by a test on the other pytest-xdist worker, or
    by any process on the machine, before the command connects)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


class RawServer(NamedTuple):
    url: str
    requests: list[bytes]


@pytest.fixture
def raw_http() -> Iterator[Callable[[bytes | Callable[[], Iterator[bytes]]], RawServer]]:
    """A one-shot loopback HTTP server answering with fixed bytes; it records requests."""
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(response: bytes | Callable[[], Iterator[bytes]]) -> RawServer:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(30)
        requests: list[bytes] = []

        def serve() -> None:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                requests.append(data)
                chunks = [response] if isinstance(response, bytes) else response()
                try:
                    for chunk in chunks:
                        conn.sendall(chunk)
                except OSError:
                    pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        servers.append((listener, thread))
        return RawServer(f"http://127.0.0.1:{listener.getsockname()[1]}", requests)

    yield start
    for listener, thread in servers:
        listener.close()
        thread.join(10)
