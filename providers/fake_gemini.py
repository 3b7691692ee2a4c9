"""A loopback fake of the Gemini REST API, for tests, offline demos and load tests.

It is a real HTTP/1.1 server on 127.0.0.1 speaking what google-genai sends:
``POST /v1beta/models/{model}:generateContent``, ``...:streamGenerateContent?alt=sse``
(``data: <json>`` frames, then the connection closes) and ``cachedContents``
(create, get, delete). Each test scripts the answers and reads back every request,
exactly as the SDK sent it.

    with FakeGemini() as fake:
        fake.reply_text("Hello")
        config = {"provider": "gemini", "model": "m", "api_key": "k", "base_url": fake.base_url}
        ...
        assert fake.requests[0].body["contents"][0]["parts"][0]["text"] == "..."

One asyncio event loop on its own thread serves every connection, so thousands of
delayed calls can be held open at once; accepted sockets have TCP_NODELAY and each
answer leaves in one write, so keep-alive calls pay no Nagle delay.
``python -m providers.fake_gemini`` serves a JSON script on its own (see `main`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_REQUEST_BYTES = 64 << 20
"""A request body above this is refused with 413 (and not recorded)."""
MAX_HEADER_BYTES = 64 << 10
"""A request line plus headers above this is refused with 431 (then the connection closes)."""
BACKLOG = 16384
"""Listen backlog (the kernel caps it at net.core.somaxconn)."""
DEFAULT_MAX_RECORDED = 10_000
"""How many requests `FakeGemini.requests` keeps by default (oldest dropped first)."""
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
_ERRORS = {status for status in _PHRASES if 400 <= status <= 599}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: header names lower-cased, the body decoded from JSON."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeResponse:
    """What the fake answers: a JSON body, SSE frames, or raw bytes, after ``delay`` s."""

    status: int = 200
    body: Any = None
    frames: list[Any] | None = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def json(cls, body: Any, status: int = 200) -> FakeResponse:
        """A JSON body with the given status."""
        return cls(status=status, body=body)

    @classmethod
    def sse(cls, frames: list[Any]) -> FakeResponse:
        """Each frame is sent as ``data: <json>`` (a str frame is sent as written)."""
        return cls(frames=frames)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "error",
        status_text: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> FakeResponse:
        """A Google API error body (``{"error": {code, message, status}}``), with extra
        response `headers` if given (say, a ``Set-Cookie`` or a header echoing the key,
        for tests that nothing of an error answer leaks)."""
        text = status_text or HTTPStatus(status).phrase.upper().replace(" ", "_")
        return cls(
            status=status,
            body={"error": {"code": status, "message": message, "status": text}},
            headers=dict(headers or {}),
        )


def candidate(
    parts: list[dict[str, Any]], finish_reason: str = "STOP", **extra: Any
) -> dict[str, Any]:
    """A generateContent response body with one candidate."""
    return {
        "candidates": [
            {
                "index": 0,
                "finishReason": finish_reason,
                "content": {"role": "model", "parts": parts},
                **extra,
            }
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        "modelVersion": "fake-gemini",
        "responseId": os.urandom(16).hex(),
    }


class _BadRequest(Exception):
    """A request the fake refuses before dispatching it; the connection then closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.response = FakeResponse.error(status, message)


class FakeGemini:
    """The server. Start it with `start()` or a ``with`` block; `base_url` points the SDK at it.

    ``delay`` (seconds) is waited before every model answer, on top of the answer's own
    `FakeResponse.delay`, with a loop timer (never a blocking sleep), so other calls go
    on meanwhile. ``requests`` keeps the last ``max_recorded`` requests (oldest dropped;
    0 records nothing).
    """

    def __init__(
        self,
        delay: float = 0.0,
        *,
        max_recorded: int = DEFAULT_MAX_RECORDED,
        host: str = "127.0.0.1",
        port: int = 0,
        backlog: int = BACKLOG,
    ) -> None:
        if not (delay >= 0 and math.isfinite(delay)):
            raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}")
        if max_recorded < 0:
            raise ValueError(f"max_recorded must be >= 0, not {max_recorded!r}")
        self.delay = delay
        self.max_recorded = max_recorded
        self.requests: list[RecordedRequest] = []
        self.caches: dict[str, dict[str, Any]] = {}
        # Optional: answers each model request it returns a response for (tried first).
        # A plain function, called on the server's event-loop thread: keep it quick.
        self.handler: Callable[[RecordedRequest], FakeResponse | None] | None = None
        self.in_flight = 0  # requests received and not yet answered
        self.max_in_flight = 0  # the most ever in flight at once: how much calls overlapped
        self.connections_accepted = 0
        self._queue: deque[FakeResponse] = deque()
        self._lock = threading.Lock()
        self._host, self._port, self._backlog = host, port, backlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None
        self._open: set[_Connection] = set()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeGemini:
        """Bind (errors such as a taken port raise here), then serve on a daemon thread."""
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(
                loop.create_server(
                    lambda: _Connection(self), self._host, self._port, backlog=self._backlog
                )
            )
        except BaseException:
            loop.close()
            raise
        address = server.sockets[0].getsockname()
        self._address = (str(address[0]), int(address[1]))
        self._loop, self._server = loop, server
        self._thread = threading.Thread(target=loop.run_forever, name="fake-gemini", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every open connection, then end the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            self._loop = self._server = self._thread = None

    async def _shutdown(self) -> None:
        """On the loop: stop accepting, abort the connections (pending answers are dropped)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for connection in list(self._open):
            if connection.transport is not None:
                connection.transport.abort()
        for _ in range(2):
            await asyncio.sleep(0)  # let the aborted transports run connection_lost

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the running server."""
        assert self._address is not None, "start the fake first"
        host, port = self._address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def nodelay_flags(self) -> list[bool]:
        """TCP_NODELAY as read back from each open server-side socket (for tests)."""
        loop = self._loop
        assert loop is not None, "start the fake first"

        async def read() -> list[bool]:
            socks = [c.transport.get_extra_info("socket") for c in self._open if c.transport]
            nodelay = (socket.IPPROTO_TCP, socket.TCP_NODELAY)
            return [bool(sock.getsockopt(*nodelay)) for sock in socks if sock is not None]

        return asyncio.run_coroutine_threadsafe(read(), loop).result(timeout=10)

    # -- scripting ---------------------------------------------------------------------

    def enqueue(self, *responses: FakeResponse) -> None:
        """Queue answers for the next model requests, in order."""
        with self._lock:
            self._queue.extend(responses)

    def reply_text(self, text: str, **extra: Any) -> None:
        """Queue a one-candidate text answer (``extra``: more candidate fields)."""
        self.enqueue(FakeResponse.json(candidate([{"text": text}], **extra)))

    def reply_parts(self, parts: list[dict[str, Any]], **extra: Any) -> None:
        """Queue a one-candidate answer with these parts."""
        self.enqueue(FakeResponse.json(candidate(parts, **extra)))

    def reply_stream(self, frames: list[Any]) -> None:
        """Queue an SSE answer (for ``streamGenerateContent``)."""
        self.enqueue(FakeResponse.sse(frames))

    def reply_error(
        self,
        status: int,
        message: str = "error",
        status_text: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue a Google API error answer (with extra response `headers`, if given)."""
        self.enqueue(FakeResponse.error(status, message, status_text, headers))

    def next_response(self, request: RecordedRequest) -> FakeResponse:
        """The answer to a model request: the handler's, else the queue's, else a 500."""
        if self.handler is not None:
            answer = self.handler(request)
            if answer is not None:
                return answer
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return FakeResponse.error(500, "the fake has no scripted response left", "INTERNAL")

    def record(self, request: RecordedRequest) -> None:
        """Keep the request in `requests`, dropping the oldest beyond ``max_recorded``."""
        with self._lock:
            if self.max_recorded <= 0:
                return
            self.requests.append(request)
            excess = len(self.requests) - self.max_recorded
            if excess > 0:
                del self.requests[:excess]

    # -- serving (on the loop thread) --------------------------------------------------

    def _answer(self, request: RecordedRequest) -> tuple[FakeResponse, float]:
        """Route one request: the response and how long to wait before sending it."""
        try:
            response, is_model = self._route(request)
        except Exception as error:  # a handler bug becomes a visible 500
            response, is_model = FakeResponse.error(500, f"fake handler failed: {error!r}"), False
        return response, response.delay + (self.delay if is_model else 0.0)

    def _route(self, request: RecordedRequest) -> tuple[FakeResponse, bool]:
        """The response, and whether the request was a model call."""
        path = request.path
        if request.method == "POST":
            if path.endswith("/cachedContents"):
                name = f"cachedContents/{uuid.uuid4().hex[:12]}"
                body = request.body if isinstance(request.body, dict) else {}
                self.caches[name] = {**body, "name": name}
                return FakeResponse.json(self.caches[name]), False
            if ":generateContent" in path or ":streamGenerateContent" in path:
                return self.next_response(request), True
            return FakeResponse.error(404, "unknown path", "NOT_FOUND"), False
        name = _cache_name(path)
        if request.method == "GET" and name in self.caches:
            return FakeResponse.json(self.caches[name]), False
        if request.method == "DELETE" and self.caches.pop(name, None) is not None:
            return FakeResponse.json({}), False
        if request.method in ("GET", "DELETE"):
            return FakeResponse.error(404, "no such cache", "NOT_FOUND"), False
        return FakeResponse.error(501, f"unsupported method {request.method}"), False


class _Connection(asyncio.Protocol):
    """One client connection: parses requests as bytes arrive and answers them in order.

    A protocol, not a stream task, to keep the per-connection and per-request cost low:
    a delayed answer is one timer, so thousands of held calls cost little.
    """

    def __init__(self, fake: FakeGemini) -> None:
        self.fake = fake
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False  # answering a request; pipelined ones wait in the buffer
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Set TCP_NODELAY (no Nagle wait on keep-alive answers) and track the connection."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fake.connections_accepted += 1
        self.fake._open.add(self)

    def data_received(self, data: bytes) -> None:
        """Buffer the bytes; answer the next request once it is complete."""
        self.buffer += data
        self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection; a pending delayed answer is dropped."""
        self.fake._open.discard(self)
        self.transport = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
            self.fake.in_flight -= 1

    def _next(self) -> None:
        """Answer each complete request in the buffer, in order, until one must wait."""
        fake = self.fake
        while self.buffer and not self.busy and self.transport is not None:
            try:
                parsed = _parse(self.buffer)
            except _BadRequest as bad:
                self.busy = True
                self._send(bad.response, keep_alive=False)
                return
            if parsed is None:
                return
            request, keep_alive, consumed = parsed
            del self.buffer[:consumed]
            fake.record(request)
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            self.busy = True
            response, wait = fake._answer(request)
            if wait > 0:
                loop = asyncio.get_running_loop()
                self.timer = loop.call_later(wait, self._reply, response, keep_alive, True)
                return
            self._reply(response, keep_alive)

    def _reply(self, response: FakeResponse, keep_alive: bool, later: bool = False) -> None:
        """Send a routed answer (SSE closes the connection); after a wait, go on reading."""
        self.timer = None
        self.fake.in_flight -= 1
        self._send(response, keep_alive and response.frames is None)
        if later:
            self._next()

    def _send(self, response: FakeResponse, keep_alive: bool) -> None:
        """One write of the whole answer; then close, or become ready for the next request."""
        if self.transport is None:
            return
        self.transport.write(_encode(response, keep_alive))
        if keep_alive:
            self.busy = False
        else:
            self.transport.close()


def _cache_name(path: str) -> str:
    """``/v1beta/cachedContents/abc`` -> ``cachedContents/abc`` (any API version)."""
    marker = path.find("cachedContents/")
    return path[marker:] if marker >= 0 else path


def _parse(buffer: bytearray) -> tuple[RecordedRequest, bool, int] | None:
    """The first request in ``buffer`` -> (request, keep-alive, bytes used); None if partial.

    Handles what HTTP clients such as google-genai send: a request line, headers and a
    Content-Length body (chunked bodies are refused with 501).
    """
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEADER_BYTES:
            raise _BadRequest(431, "request headers too large")
        return None
    lines = buffer[:end].decode("latin-1").split("\r\n")
    words = lines[0].split()
    if len(words) != 3 or not words[2].startswith("HTTP/1."):
        raise _BadRequest(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise _BadRequest(400, "malformed header line")
        headers[name.strip().lower()] = value.strip()
    if "transfer-encoding" in headers:
        raise _BadRequest(501, "send a Content-Length body: transfer codings are not supported")
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        raise _BadRequest(400, "malformed Content-Length") from None
    if length < 0:
        raise _BadRequest(400, "malformed Content-Length")
    if length > MAX_REQUEST_BYTES:
        raise _BadRequest(413, "request too large")
    total = end + 4 + length
    if len(buffer) < total:
        return None
    connection = headers.get("connection", "").lower()
    keep_alive = connection == "keep-alive" if words[2] == "HTTP/1.0" else connection != "close"
    split = urlsplit(words[1])
    body = _decode_body(bytes(buffer[end + 4 : total]))
    return (
        RecordedRequest(words[0], split.path, parse_qs(split.query), headers, body),
        keep_alive,
        total,
    )


def _decode_body(raw: bytes) -> Any:
    """JSON if it parses, else the text (None for an empty body)."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _encode(response: FakeResponse, keep_alive: bool) -> bytes:
    """Status line, headers and body as one buffer, so the answer leaves in one send."""
    if response.frames is not None:
        body = b"".join(
            f"data: {frame if isinstance(frame, str) else json.dumps(frame)}\r\n\r\n".encode()
            for frame in response.frames
        )
        defaults = {"Content-Type": "text/event-stream", "Connection": "close"}
    else:
        body = response.raw if response.raw is not None else json.dumps(response.body).encode()
        defaults = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if not keep_alive:
            defaults["Connection"] = "close"
    phrase = _PHRASES.get(response.status, "Unknown")
    lines = [f"HTTP/1.1 {response.status} {phrase}"]
    lines += [f"{key}: {value}" for key, value in {**defaults, **response.headers}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# -- the standalone server -------------------------------------------------------------

_ERROR_KEYS = {"status", "message", "status_text"}
_STEP_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {  # kind -> (check, expected)
    "text": (lambda v: isinstance(v, str), "a string"),
    "parts": (lambda v: _list_of(v, dict), "a list of part objects"),
    "stream": (lambda v: _list_of(v, str | dict), "a list of frames (strings or objects)"),
    "error": (
        lambda v: isinstance(v, dict) and set(v) <= _ERROR_KEYS and v.get("status") in _ERRORS,
        'an object {"status": <HTTP error code>, "message": ..., "status_text": ...}',
    ),
    "json": (lambda v: True, "any JSON value"),
}


def _list_of(value: Any, kind: Any) -> bool:
    """Whether ``value`` is a list whose items are all instances of ``kind``."""
    return isinstance(value, list) and all(isinstance(item, kind) for item in value)


@dataclass
class Script:
    """A loaded script file: ``responses`` answered in order, then ``default`` or echo."""

    responses: deque[dict[str, Any]]
    default: dict[str, Any] | None = None
    echo: bool = False

    def answer(self, request: RecordedRequest) -> FakeResponse | None:
        """The next scripted answer (a `FakeGemini.handler`); None once exhausted."""
        if self.responses:
            step = self.responses.popleft()
        elif self.default is not None:
            step = self.default
        elif self.echo:
            step = {"text": _last_user_text(request.body)}
        else:
            return None
        return _step_response(step, ":streamGenerateContent" in request.path)


def load_script(path: str | Path) -> Script:
    """Read and check a script file; raises OSError or ValueError with a clear message.

    The format (a list of steps, or ``{"responses": [...], "default": step, "echo":
    bool}``; a step is one of text, parts, stream, error, json, plus an optional delay)
    is described in docs/providers.md, "Running the fake server on its own".
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, list):
        data = {"responses": data}
    if not isinstance(data, dict):
        raise ValueError("the script must be a JSON list of steps or an object")
    unknown = sorted(set(data) - {"responses", "default", "echo"})
    if unknown:
        raise ValueError(f"unknown script keys {unknown} (expected responses, default, echo)")
    responses = data.get("responses", [])
    if not isinstance(responses, list):
        raise ValueError("'responses' must be a list of steps")
    for index, step in enumerate(responses):
        _check_step(step, f"responses[{index}]")
    default = data.get("default")
    if default is not None:
        _check_step(default, "default")
    echo = data.get("echo", False)
    if not isinstance(echo, bool):
        raise ValueError("'echo' must be true or false")
    if echo and default is not None:
        raise ValueError("'default' and 'echo' exclude each other")
    return Script(deque(responses), default, echo)


def _check_step(step: Any, where: str) -> None:
    """Raise ValueError naming ``where`` unless ``step`` is a well-formed step."""
    kinds = [kind for kind in _STEP_CHECKS if kind in step] if isinstance(step, dict) else []
    allowed = {*kinds, "delay", "status"} if kinds == ["json"] else {*kinds, "delay"}
    if len(kinds) != 1 or set(step) - allowed:
        raise ValueError(
            f"{where}: a step is an object with exactly one of {', '.join(_STEP_CHECKS)} "
            f"and optionally delay, not {json.dumps(step)[:200]}"
        )
    check, expected = _STEP_CHECKS[kinds[0]]
    if not check(step[kinds[0]]):
        raise ValueError(f"{where}: '{kinds[0]}' must be {expected}")
    delay = step.get("delay", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < math.inf:
        raise ValueError(f"{where}: 'delay' must be a number of seconds >= 0")
    if not isinstance(step.get("status", 200), int):
        raise ValueError(f"{where}: 'status' must be an integer")


def _step_response(step: dict[str, Any], streaming: bool) -> FakeResponse:
    """A checked step -> the FakeResponse answering a (streaming or not) model request."""
    if "error" in step:
        error = step["error"]
        response = FakeResponse.error(
            error["status"], str(error.get("message", "error")), error.get("status_text")
        )
    elif "stream" in step:
        frames = [candidate([{"text": f}]) if isinstance(f, str) else f for f in step["stream"]]
        response = FakeResponse.sse(frames)
    else:
        status = int(step.get("status", 200))
        body = (
            step["json"]
            if "json" in step
            else candidate(step["parts"] if "parts" in step else [{"text": step["text"]}])
        )
        streamed = streaming and status == 200
        response = FakeResponse.sse([body]) if streamed else FakeResponse.json(body, status)
    response.delay = float(step.get("delay", 0))
    return response


def _last_user_text(body: Any) -> str:
    """The text of the last user part of a generateContent request ("" if none)."""
    contents = body.get("contents") if isinstance(body, dict) else None
    for content in reversed(contents if isinstance(contents, list) else []):
        if isinstance(content, dict) and content.get("role", "user") == "user":
            for part in reversed(content.get("parts") or []):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    return str(part["text"])
    return ""


def _raise_fd_limit() -> None:
    """Lift the soft open-file limit to the hard one: each held connection is a descriptor."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m providers.fake_gemini --port N --script FILE``: serve until SIGTERM/SIGINT.

    Prints one JSON line, ``{"status": "listening", "url": ...}``, once it accepts
    connections; exits 0 on SIGTERM or SIGINT, 2 on a bad script, 1 if it cannot bind.
    Requests are not recorded (nobody could read them).
    """
    parser = argparse.ArgumentParser(
        prog="python -m providers.fake_gemini",
        description="Serve a scripted fake Gemini REST API until SIGTERM or SIGINT.",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--script", required=True, type=Path, help="JSON script file")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args(argv)
    if not (args.delay >= 0 and math.isfinite(args.delay)):
        parser.error("--delay must be a number of seconds >= 0")
    try:
        script = load_script(args.script)
    except (OSError, ValueError) as error:
        sys.stderr.write(f"fake_gemini: bad script {args.script}: {error}\n")
        return 2
    _raise_fd_limit()
    # Signals only wake the main thread through this socket pair: no work in handlers.
    wake_reader, wake_writer = socket.socketpair()
    wake_writer.setblocking(False)
    signal.set_wakeup_fd(wake_writer.fileno())
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: None)
    fake = FakeGemini(args.delay, max_recorded=0, host=args.host, port=args.port)
    fake.handler = script.answer
    try:
        fake.start()
    except (OSError, OverflowError) as error:
        sys.stderr.write(f"fake_gemini: cannot listen on {args.host}:{args.port}: {error}\n")
        return 1
    try:
        sys.stdout.write(json.dumps({"status": "listening", "url": fake.base_url}) + "\n")
        sys.stdout.flush()
        wake_reader.recv(1)
    finally:
        fake.stop()
        signal.set_wakeup_fd(-1)
        wake_reader.close()
        wake_writer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
