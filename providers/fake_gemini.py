"""A loopback fake of the Gemini REST API, for tests and offline demos.

It is a real HTTP server on 127.0.0.1 speaking what google-genai sends:
``POST /v1beta/models/{model}:generateContent``, ``...:streamGenerateContent?alt=sse``
(``data: <json>`` frames, then the connection closes) and ``cachedContents``
(create, get, delete). Each test scripts the answers and reads back every request,
exactly as the SDK sent it.

    with FakeGemini() as fake:
        fake.reply_text("Hello")
        config = {"provider": "gemini", "model": "m", "api_key": "k", "base_url": fake.base_url}
        ...
        assert fake.requests[0].body["contents"][0]["parts"][0]["text"] == "..."
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_REQUEST_BYTES = 64 << 20


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeResponse:
    """What the fake answers: a JSON body, SSE frames, or raw bytes."""

    status: int = 200
    body: Any = None
    frames: list[Any] | None = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, body: Any, status: int = 200) -> FakeResponse:
        return cls(status=status, body=body)

    @classmethod
    def sse(cls, frames: list[Any]) -> FakeResponse:
        """Each frame is sent as ``data: <json>`` (a str frame is sent as written)."""
        return cls(frames=frames)

    @classmethod
    def error(
        cls, status: int, message: str = "error", status_text: str | None = None
    ) -> FakeResponse:
        text = status_text or HTTPStatus(status).phrase.upper().replace(" ", "_")
        return cls(
            status=status, body={"error": {"code": status, "message": message, "status": text}}
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
        "responseId": uuid.uuid4().hex,
    }


class FakeGemini:
    """The server. Start it with `start()` or a ``with`` block; `base_url` points the SDK at it."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.caches: dict[str, dict[str, Any]] = {}
        self.handler: Callable[[RecordedRequest], FakeResponse | None] | None = None
        """Optional: answers every model request it returns a response for (tried first)."""
        self._queue: deque[FakeResponse] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeGemini:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-gemini", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- scripting ---------------------------------------------------------------------

    def enqueue(self, *responses: FakeResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    def reply_text(self, text: str, **extra: Any) -> None:
        self.enqueue(FakeResponse.json(candidate([{"text": text}], **extra)))

    def reply_parts(self, parts: list[dict[str, Any]], **extra: Any) -> None:
        self.enqueue(FakeResponse.json(candidate(parts, **extra)))

    def reply_stream(self, frames: list[Any]) -> None:
        self.enqueue(FakeResponse.sse(frames))

    def reply_error(
        self, status: int, message: str = "error", status_text: str | None = None
    ) -> None:
        self.enqueue(FakeResponse.error(status, message, status_text))

    def next_response(self, request: RecordedRequest) -> FakeResponse:
        if self.handler is not None:
            answer = self.handler(request)
            if answer is not None:
                return answer
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return FakeResponse.error(500, "the fake has no scripted response left", "INTERNAL")

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _cache_name(path: str) -> str:
    """``/v1beta/cachedContents/abc`` -> ``cachedContents/abc`` (any API version)."""
    marker = path.find("cachedContents/")
    return path[marker:] if marker >= 0 else path


class _Handler(BaseHTTPRequestHandler):
    owner: FakeGemini
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            raise ValueError("request too large")
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        split = urlsplit(self.path)
        request = RecordedRequest(
            self.command,
            split.path,
            parse_qs(split.query),
            {k.lower(): v for k, v in self.headers.items()},
            body,
        )
        self.owner.record(request)
        return request

    def do_POST(self) -> None:
        request = self._record()
        if request.path.endswith("/cachedContents"):
            name = f"cachedContents/{uuid.uuid4().hex[:12]}"
            cache = {**(request.body or {}), "name": name}
            self.owner.caches[name] = cache
            self._send(FakeResponse.json(cache))
            return
        if ":generateContent" in request.path or ":streamGenerateContent" in request.path:
            self._send(self.owner.next_response(request))
            return
        self._send(FakeResponse.error(404, "unknown path", "NOT_FOUND"))

    def do_GET(self) -> None:
        request = self._record()
        name = _cache_name(request.path)
        cache = self.owner.caches.get(name)
        self._send(
            FakeResponse.json(cache)
            if cache
            else FakeResponse.error(404, "no such cache", "NOT_FOUND")
        )

    def do_DELETE(self) -> None:
        request = self._record()
        name = _cache_name(request.path)
        found = self.owner.caches.pop(name, None)
        self._send(
            FakeResponse.json({})
            if found
            else FakeResponse.error(404, "no such cache", "NOT_FOUND")
        )

    def _send(self, response: FakeResponse) -> None:
        if response.frames is not None:
            self.send_response(response.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for frame in response.frames:
                data = frame if isinstance(frame, str) else json.dumps(frame)
                self.wfile.write(f"data: {data}\r\n\r\n".encode())
                self.wfile.flush()
            self.close_connection = True
            return
        payload = response.raw if response.raw is not None else json.dumps(response.body).encode()
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
