"""Gemini's request deadline, retries and error-text hygiene, against a raw loopback
HTTP server that can drip bytes, answer 503/429 with ``Retry-After`` and reset
connections (the shared fake answers whole responses only)."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import adk_actors as adk
import providers
from providers import content, protocol
from providers.errors import AdkError

KEY = "AIzaSyDEADLINE-secret-key-0123456789"
QUICK = {"initial_delay": 1, "max_delay": 10}
"""Retry delays in ms: the tests never wait on backoff."""
OK = {
    "candidates": [
        {
            "index": 0,
            "finishReason": "STOP",
            "content": {"role": "model", "parts": [{"text": "ok"}]},
        }
    ]
}


@dataclass
class Step:
    """One scripted answer: `kind` is "json", "sse", "drip", "drip_sse", "reset",
    "sse_then_reset" or "late_stall" (`body`: seconds before the headers)."""

    kind: str
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def error_body(status: int, status_text: str, message: str = "no") -> Any:
    return {"error": {"code": status, "message": message, "status": status_text}}


class RawServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 answering model calls from `script`
    (then 200 OK). It records each request's arrival (`times`, monotonic) and when a
    dripped answer was abandoned by the client (`hangups`)."""

    def __init__(self) -> None:
        self.script: deque[Step] = deque()
        self.times: list[float] = []
        self.paths: list[str] = []
        self.hangups: list[float] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._accept.join(5)
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._connection, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        buffer = b""
        with contextlib.closing(conn):
            while not self._stop.is_set():
                request = self._read_request(conn, buffer)
                if request is None:
                    return
                path, buffer = request
                self.times.append(time.monotonic())
                self.paths.append(path)
                step = self.script.popleft() if self.script else Step("json", body=OK)
                if not self._answer(conn, step, stream="alt=sse" in path):
                    return

    def _read_request(self, conn: socket.socket, buffer: bytes) -> tuple[str, bytes] | None:
        while b"\r\n\r\n" not in buffer:
            chunk = self._recv(conn)
            if not chunk:
                return None
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = self._recv(conn)
            if not chunk:
                return None
            rest += chunk
        return lines[0].split(" ")[1], rest[length:]

    def _recv(self, conn: socket.socket) -> bytes:
        while not self._stop.is_set():
            try:
                return conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return b""
        return b""

    def _answer(self, conn: socket.socket, step: Step, stream: bool) -> bool:
        """Send `step`; False when the connection is closed afterwards."""
        try:
            if step.kind == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return False
            if step.kind == "json":
                body = json.dumps(step.body).encode()
                extra = {"Content-Length": str(len(body)), **step.headers}
                conn.sendall(self._head(step.status, "application/json", extra) + body)
                return True
            if step.kind in ("sse", "sse_then_reset"):
                frames = b"".join(
                    b"data: " + json.dumps(f).encode() + b"\r\n\r\n" for f in step.body
                )
                conn.sendall(self._head(200, "text/event-stream", {"Connection": "close"}) + frames)
                if step.kind == "sse_then_reset":
                    time.sleep(0.2)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return False
            if step.kind == "late_stall":  # headers and a byte near the deadline, then silence
                time.sleep(step.body)
                conn.sendall(self._head(200, "application/json", {"Content-Length": "100"}) + b" ")
                while not self._stop.is_set():
                    time.sleep(0.05)
                return False
            if step.kind in ("drip", "drip_sse"):
                kind = "text/event-stream" if step.kind == "drip_sse" else "application/json"
                headers = {"Connection": "close"} if step.kind == "drip_sse" else {}
                if step.kind == "drip":
                    headers["Content-Length"] = "100000"
                conn.sendall(self._head(200, kind, headers))
                while not self._stop.is_set():
                    conn.sendall(b" ")
                    time.sleep(0.25)
                return False
        except OSError:
            self.hangups.append(time.monotonic())
            return False
        raise AssertionError(step.kind)

    @staticmethod
    def _head(status: int, content_type: str, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} X", f"Content-Type: {content_type}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.fixture
def server() -> Iterator[RawServer]:
    raw = RawServer()
    yield raw
    raw.close()


def config(server: RawServer, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "gemini",
        "model": "gemini-3.1-flash-lite",
        "api_key": KEY,
        "base_url": server.base_url,
        "retry": QUICK,
        **extra,
    }


HISTORY = [content.from_text("hi")]


def failure(make: Callable[[], Any]) -> AdkError:
    """The AdkError `make()` raises (a coroutine is run); it never carries the key,
    nor the SDK's error (with the body) as its context."""
    with pytest.raises(AdkError) as info:
        value = make()
        if asyncio.iscoroutine(value):
            asyncio.run(value)
    error = info.value
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in repr(error.reason)
    assert error.__cause__ is None
    assert error.__context__ is None or isinstance(error.__context__, TimeoutError)
    return error


# -- one absolute deadline -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["agenerate", "astream", "generate", "stream"])
def test_a_dripping_server_cannot_hold_a_call_past_its_deadline(server, kind):
    server.script.append(Step("drip_sse" if "stream" in kind else "drip"))
    cfg = config(server, request_timeout=1000)
    calls = {
        "agenerate": lambda: protocol.agenerate(cfg, HISTORY),
        "astream": lambda: protocol.astream(cfg, HISTORY, (), lambda delta: None),
        "generate": lambda: providers.generate(cfg, HISTORY),
        "stream": lambda: providers.stream(cfg, HISTORY, (), lambda delta: None),
    }
    started = time.monotonic()
    assert failure(calls[kind]).reason == "timeout"
    # the drip (a byte every 0.25 s, 100 kB) would hold a per-read timeout for hours
    assert time.monotonic() - started < 10
    assert len(server.times) == 1  # a timeout is not retried


@pytest.mark.parametrize("kind", ["agenerate", "generate"])
def test_a_server_that_goes_silent_late_cannot_hold_a_call_past_its_deadline(server, kind):
    """Review finding: on the sync path each read had the time left when the request
    started, so a server answering just before the deadline and then going silent held
    the call for about twice it. A watchdog now ends the blocked read at the deadline."""
    server.script.append(Step("late_stall", body=1.5))
    cfg = config(server, request_timeout=2000)
    calls = {
        "agenerate": lambda: protocol.agenerate(cfg, HISTORY),
        "generate": lambda: providers.generate(cfg, HISTORY),
    }
    started = time.monotonic()
    assert failure(calls[kind]).reason == "timeout"
    assert time.monotonic() - started < 3.0  # the deadline (2 s), not 1.5 s + 2 s more


# -- retries ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [503, 500, 502, 504, 429, 408])
def test_a_retryable_status_then_200_succeeds(server, status):
    server.script.append(Step("json", status, error_body(status, "UNAVAILABLE")))
    assert asyncio.run(protocol.agenerate(config(server), HISTORY)) == "ok"
    assert len(server.times) == 2


def test_a_503_then_200_completes_an_agent_turn_and_a_sync_call(server):
    adk.start()
    try:
        server.script.append(Step("json", 503, error_body(503, "UNAVAILABLE")))
        agent = adk.spawn_agent("RetryingAgent", config(server))
        assert adk.prompt(agent, "hi", timeout=30) == "ok"
        assert len(server.times) == 2
    finally:
        adk.stop()
    server.script.append(Step("json", 503, error_body(503, "UNAVAILABLE")))
    assert providers.generate(config(server), HISTORY) == "ok"
    assert len(server.times) == 4


@pytest.mark.parametrize("sync", [False, True])
def test_429_honours_retry_after_seconds(server, sync):
    server.script.append(
        Step("json", 429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": "1"})
    )
    cfg = config(server)
    if sync:
        assert providers.generate(cfg, HISTORY) == "ok"
    else:
        assert asyncio.run(protocol.agenerate(cfg, HISTORY)) == "ok"
    first, second = server.times
    assert second - first >= 0.95  # the server's clock: the retry waited Retry-After


def test_429_honours_retry_after_as_an_http_date(server):
    when = email.utils.formatdate(time.time() + 2, usegmt=True)  # whole seconds: 1-2 s away
    server.script.append(
        Step("json", 429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": when})
    )
    assert asyncio.run(protocol.agenerate(config(server), HISTORY)) == "ok"
    first, second = server.times
    assert second - first >= 0.9


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_a_non_retryable_status_fails_at_once(server, status):
    server.script.append(Step("json", status, error_body(status, "INVALID_ARGUMENT")))
    reason = failure(lambda: protocol.agenerate(config(server), HISTORY)).reason
    assert reason == ("http_error", status, "INVALID_ARGUMENT")
    assert len(server.times) == 1


def test_the_retry_budget_is_bounded(server):
    for _ in range(4):
        server.script.append(Step("json", 503, error_body(503, "UNAVAILABLE")))
    cfg = config(server, retry={**QUICK, "max_attempts": 3})
    assert failure(lambda: protocol.agenerate(cfg, HISTORY)).reason == (
        "http_error",
        503,
        "UNAVAILABLE",
    )
    assert len(server.times) == 3
    server.script.clear()
    server.script.append(Step("json", 503, error_body(503, "UNAVAILABLE")))
    single = config(server, retry={"max_attempts": 1})
    assert failure(lambda: providers.generate(single, HISTORY)).reason[1] == 503
    assert len(server.times) == 4


def test_a_deadline_shorter_than_retry_after_fails_without_waiting(server):
    server.script.append(
        Step("json", 429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": "30"})
    )
    cfg = config(server, request_timeout=2000)
    started = time.monotonic()
    assert failure(lambda: protocol.agenerate(cfg, HISTORY)).reason == "timeout"
    assert time.monotonic() - started < 20  # not the 30 s Retry-After
    assert len(server.times) == 1
    server.script.append(
        Step("json", 429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": "30"})
    )
    assert failure(lambda: providers.generate(cfg, HISTORY)).reason == "timeout"
    assert len(server.times) == 2


def test_a_retry_after_past_the_ceiling_is_not_waited_for(server):
    server.script.append(
        Step("json", 429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": "86400"})
    )
    cfg = config(server, request_timeout="infinity")
    assert failure(lambda: protocol.agenerate(cfg, HISTORY)).reason[:2] == ("http_error", 429)
    assert len(server.times) == 1


@pytest.mark.parametrize("sync", [False, True])
def test_a_reset_connection_is_retried(server, sync):
    server.script.append(Step("reset"))
    if sync:
        assert providers.generate(config(server), HISTORY) == "ok"
    else:
        assert asyncio.run(protocol.agenerate(config(server), HISTORY)) == "ok"
    assert len(server.times) == 2


def test_a_refused_connection_is_retried_within_the_budget():
    # a port nobody listens on: bound to port 0, never listened on (connecting is
    # refused), and held until the end so no other test or process can take it
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        cfg = {
            "provider": "gemini",
            "model": "m",
            "api_key": KEY,
            "base_url": f"http://127.0.0.1:{port}",
            "retry": QUICK,
        }
        assert failure(lambda: protocol.agenerate(cfg, HISTORY)).reason == "unavailable"


def test_a_stream_retries_only_before_its_first_chunk(server):
    frame = OK["candidates"][0]
    server.script.append(Step("json", 503, error_body(503, "UNAVAILABLE")))
    server.script.append(Step("sse", body=[{"candidates": [frame]}]))
    deltas: list[str] = []
    assert asyncio.run(protocol.astream(config(server), HISTORY, (), deltas.append)) == "ok"
    assert deltas == ["ok"] and len(server.times) == 2
    # a chunk delivered, then the connection breaks: never sent twice
    server.script.append(Step("sse_then_reset", body=[{"candidates": [frame]}]))
    seen: list[str] = []
    reason = failure(lambda: protocol.astream(config(server), HISTORY, (), seen.append)).reason
    assert seen == ["ok"] and len(server.times) == 3
    assert reason in ("unavailable", "timeout")


# -- error text -------------------------------------------------------------------------------


@pytest.mark.parametrize("sync", [False, True])
def test_an_echoed_key_or_oversized_status_never_reaches_the_error(server, sync):
    status = f"BAD key={KEY} {KEY} Bearer abcdefghijklmnop " + "X" * 5000
    server.script.append(Step("json", 400, error_body(400, status, f"echo {KEY}")))
    cfg = config(server)
    call = (
        (lambda: providers.generate(cfg, HISTORY))
        if sync
        else (lambda: protocol.agenerate(cfg, HISTORY))
    )
    error = failure(call)
    kind, code, text = error.reason
    assert (kind, code) == ("http_error", 400)
    assert len(text) <= 64 and "[redacted]" in text and "abcdefghijklmnop" not in text
    assert KEY[:12] not in text and KEY[:12] not in str(error)


def test_a_key_cut_by_the_cap_leaves_no_prefix():
    from providers.gemini.retry import clean_text

    text = "S" * 40 + KEY
    cleaned = clean_text(text, (KEY,), 50)
    assert KEY[:8] not in cleaned and cleaned.endswith("[redacted]")


# -- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry", "expected"),
    [
        ({"max_attempts": 0}, ("invalid_retry", "max_attempts")),
        ({"max_attempts": 11}, ("invalid_retry", "max_attempts")),
        ({"max_attempts": True}, ("invalid_retry", "max_attempts")),
        ({"max_attempts": 2.0}, ("invalid_retry", "max_attempts")),
        ({"initial_delay": -1}, ("invalid_retry", "initial_delay")),
        ({"max_delay": 300_001}, ("invalid_retry", "max_delay")),
        ({"backoff": 2}, ("unknown_retry_keys", ("backoff",))),
        ([1, 2], "invalid_retry"),
    ],
)
def test_retry_options_are_strict(retry, expected):
    cfg = {"provider": "gemini", "model": "m", "api_key": KEY, "retry": retry}
    with pytest.raises(AdkError) as info:
        providers.validate_config(cfg)
    assert info.value.reason == expected


def test_defaults_and_ceilings():
    from providers.gemini.config import check

    settings = check({"model": "m", "api_key": KEY})
    assert settings.timeout_ms == 120_000
    assert (settings.retry.max_attempts, settings.retry.initial_delay) == (3, 0.5)
    assert check({"model": "m", "api_key": KEY, "request_timeout": "infinity"}).timeout_ms is None
    top = check({"model": "m", "api_key": KEY, "retry": {"max_attempts": 10}})
    assert top.retry.max_attempts == 10
