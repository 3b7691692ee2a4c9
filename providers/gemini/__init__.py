"""The Gemini REST provider, on google-genai (sync and async).

`generate` calls ``generateContent``; `stream` and `stream_content` call
``streamGenerateContent`` (SSE); `agenerate`, `astream` and `astream_content` do the
same on the SDK's async client, awaiting the network on the running event loop
(no thread waits). The API key comes from ``config["api_key"]`` or
``GEMINI_API_KEY`` and is sent only as the ``x-goog-api-key`` header; it never
appears in an error, a log line or a repr. ``missing_api_key`` is raised before any
HTTP. Errors map to stable reasons: ``("http_error", status, status_text)``,
``("blocked", reason)``, ``timeout``, ``unavailable``, ``malformed_response``,
``response_too_large``.

Both paths stay on httpx (our own clients are handed to the SDK, so it never
switches to aiohttp), with bounded connection pools (``max_connections``) and the
`MAX_RESPONSE_BYTES` cap (the transports under them: `providers.gemini.transport`).
An `httpx.AsyncClient` belongs to the event loop it runs on, so async clients are
cached per running loop and never shared across loops; a closed loop's clients are
dropped (await `GeminiProvider.aclose` on a loop before closing it to close its
connections at once). The history is sent as prebuilt wire JSON (see
`providers.gemini.requests`), so its cost per message does not go through the SDK.

Every call has one absolute deadline (``request_timeout``, 120 s by default): async
calls run inside one `asyncio.timeout` covering connecting, every read, retries and
backoff, and a whole stream; sync calls give each HTTP exchange only the time left
and check the deadline after every chunk read. Retryable failures (429, 503, ...) are
tried again inside that deadline (`providers.gemini.retry`); the ``status`` text of an
HTTP error is capped and redacted before it reaches the `AdkError` reason. An async
attempt runs in a task of its own that a caller's cancellations reach once
(`providers.gemini.cancellation`), so an abandoned call's connection is closed (the
caller waits for that, at most `cancellation.CLEANUP_SECONDS`), and no stream frame
reaches its reader after the caller was cancelled.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from providers import content as content_model
from providers.content import Content, Part
from providers.errors import AdkError
from providers.gemini import requests, retry, transport, wire
from providers.gemini import shards as shard_pool
from providers.gemini.cancellation import caller_cancelled, cancelled_once
from providers.gemini.config import GeminiSettings, check
from providers.gemini.shards import SHARD_CONNECTIONS, Shards
from providers.outputs import ModelOutput, ToolDeclaration, visible_text_deltas
from supervision import redact_loggers

# The HTTP stack's own DEBUG traces print request URLs and every response header
# verbatim (an echoed key, a Set-Cookie): redact them, and keep only the event name of
# httpcore's per-step traces.
redact_loggers("httpx", "google_genai.models", "google_genai._api_client")
redact_loggers(
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.connection",
    "httpcore.proxy",
    first_word_only=True,
)

MAX_RESPONSE_BYTES = 64 << 20
_CLIENT_CACHE_SIZE = 32
"""Clients kept per process for sync calls, and per event loop for async calls."""

ClientKey = tuple[str, str | None, int | None, int]
"""(api_key, base_url, timeout_ms, max_connections): what makes clients differ."""


def _response_cap() -> int:
    """The transports' body cap, read at each response: this module's
    `MAX_RESPONSE_BYTES` (lowered by a test or an operator, it holds for built clients)."""
    return MAX_RESPONSE_BYTES


def _key(settings: GeminiSettings) -> ClientKey:
    return (settings.api_key, settings.base_url, settings.timeout_ms, settings.max_connections)


class GeminiProvider:
    name = "gemini"

    def __init__(self) -> None:
        self._clients: OrderedDict[ClientKey, tuple[genai.Client, httpx.Client]] = OrderedDict()
        self._loop_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, OrderedDict[ClientKey, Shards]
        ] = weakref.WeakKeyDictionary()
        self._unused_sync_http: httpx.Client | None = None
        self._lock = threading.Lock()
        transport.ssl_context()

    def __repr__(self) -> str:
        return "GeminiProvider()"

    def capabilities(self) -> dict[str, Any]:
        return {
            "streaming": True,
            "function_calling": True,
            "structured_output": True,
            "multimodal": True,
            "thinking": True,
            "safety_settings": True,
            "google_search_grounding": True,
            "builtin_tools": ["google_search"],
            "content_schema_version": 1,
            "live": False,
        }

    def validate_config(self, config: Mapping[str, Any]) -> None:
        check(config, need_key=False)

    def check_credentials(self, config: Mapping[str, Any]) -> None:
        """`validate_config` plus the API key (``config["api_key"]`` or
        ``GEMINI_API_KEY``): ``missing_api_key`` without one. An agent spawn calls it,
        so an agent without a key fails at spawn, not at its first call."""
        check(config, need_key=True)

    # -- sync calls ----------------------------------------------------------------------

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        settings, request = self._prepare(config, history, tools)
        client = self._client(settings)

        def attempt() -> ModelOutput:
            response = client.models.generate_content(
                model=settings.model, contents=requests.placeholder_contents(), config=request
            )
            parts, grounding = wire.candidate_parts(response)
            return wire.model_output(parts, wire.grounding_json(grounding))

        return _call(settings, attempt, None)

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return self._stream(config, history, tools, _text_deliverer(on_delta))

    def stream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return self._stream(config, history, tools, _content_deliverer(on_delta))

    def _stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        deliver: Callable[[list[Part]], None],
    ) -> ModelOutput:
        settings, request = self._prepare(config, history, tools)
        frames = _Frames(deliver)
        client = self._client(settings)

        def attempt() -> ModelOutput:
            chunks = client.models.generate_content_stream(
                model=settings.model, contents=requests.placeholder_contents(), config=request
            )
            try:
                for chunk in chunks:
                    frames.add(chunk)
            finally:  # leaving early (a refused frame) releases the connection now
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            return frames.output()

        return _call(settings, attempt, frames)

    # -- async calls (on the running loop) -----------------------------------------------

    async def agenerate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        settings, request = self._prepare(config, history, tools)
        shards, shard = self._async_lease(settings)
        client = shards.clients[shard][0]

        async def attempt() -> ModelOutput:
            response = await client.aio.models.generate_content(
                model=settings.model, contents=requests.placeholder_contents(), config=request
            )
            parts, grounding = wire.candidate_parts(response)
            return wire.model_output(parts, wire.grounding_json(grounding))

        try:
            return await _acall(settings, attempt, None)
        finally:
            shards.release(shard)

    async def astream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return await self._astream(config, history, tools, _text_deliverer(on_delta))

    async def astream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return await self._astream(config, history, tools, _content_deliverer(on_delta))

    async def _astream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        deliver: Callable[[list[Part]], None],
    ) -> ModelOutput:
        settings, request = self._prepare(config, history, tools)
        frames = _Frames(deliver)
        shards, shard = self._async_lease(settings)
        client = shards.clients[shard][0]

        async def attempt() -> ModelOutput:
            chunks = await client.aio.models.generate_content_stream(
                model=settings.model, contents=requests.placeholder_contents(), config=request
            )
            try:
                async for chunk in chunks:
                    frames.add(chunk)
            finally:  # leaving early (an error, a cancellation) releases the connection now
                close = getattr(chunks, "aclose", None)
                if close is not None:
                    await close()
            return frames.output()

        try:
            return await _acall(settings, attempt, frames)
        finally:
            shards.release(shard)

    # -- plumbing ------------------------------------------------------------------------

    def _prepare(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> tuple[GeminiSettings, types.GenerateContentConfig]:
        settings = check(config)  # missing_api_key and every config error come before HTTP
        contents, system = requests.request_contents(history, settings.instructions)
        request = wire.generate_config(settings, tools, system)
        requests.carrying(request, contents)
        return settings, request

    def _client(self, settings: GeminiSettings) -> genai.Client:
        """The sync client for these settings (one per process and settings)."""
        key = _key(settings)
        with self._lock:
            if key in self._clients:
                self._clients.move_to_end(key)
                return self._clients[key][0]
        http = httpx.Client(
            transport=transport.CappedTransport(
                cap=_response_cap, verify=transport.ssl_context(), limits=transport.limits(settings)
            ),
            timeout=transport.timeout(settings),
            follow_redirects=False,
        )
        client = self._genai_client(settings, http, None)
        with self._lock:
            self._clients[key] = (client, http)
            if len(self._clients) > _CLIENT_CACHE_SIZE:
                self._clients.popitem(last=False)
        return client

    def _async_client(self, settings: GeminiSettings) -> genai.Client:
        """The async client a call with these settings would get now on the running
        loop (nothing is counted as in flight)."""
        shards, shard = self._async_lease(settings)
        shards.release(shard)
        return shards.clients[shard][0]

    def _async_lease(self, settings: GeminiSettings) -> tuple[Shards, int]:
        """A client for one call with these settings on the running loop (its own per
        loop: an httpx.AsyncClient's connections belong to the loop that opened them):
        the loop's `Shards` pick (the first idle client), counted as busy until the
        caller hands it back with `Shards.release`."""
        loop = asyncio.get_running_loop()
        key = _key(settings)
        with self._lock:
            for other in [other for other in self._loop_clients if other.is_closed()]:
                del self._loop_clients[other]
            clients = self._loop_clients.setdefault(loop, OrderedDict())
            shards = clients.get(key)
            if shards is None:
                count = -(-settings.max_connections // shard_pool.SHARD_CONNECTIONS)
                shards = clients[key] = Shards(count)
                if len(clients) > _CLIENT_CACHE_SIZE:
                    clients.popitem(last=False)  # not closed: a call may still be using it
            clients.move_to_end(key)
            shard = shards.pick()
            if shard is not None:
                return shards, shard
            if self._unused_sync_http is None:
                self._unused_sync_http = httpx.Client(
                    transport=transport.CappedTransport(
                        cap=_response_cap, verify=transport.ssl_context()
                    ),
                    follow_redirects=False,
                )
            unused_sync_http = self._unused_sync_http
        per_shard = min(settings.max_connections, shard_pool.SHARD_CONNECTIONS)
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        http = httpx.AsyncClient(
            transport=transport.CappedAsyncTransport(
                cap=_response_cap, verify=transport.ssl_context(), limits=limits
            ),
            timeout=transport.timeout(settings),
            follow_redirects=False,
        )
        client = self._genai_client(settings, unused_sync_http, http)
        with self._lock:  # only this loop's thread changes this loop's shards
            return shards, shards.add((client, http))

    async def aclose(self) -> None:
        """Close the running loop's HTTP clients and their pooled connections (later
        calls on this loop open new ones). Otherwise a closed loop's clients are just
        dropped, and the garbage collector releases their sockets."""
        with self._lock:
            clients = self._loop_clients.pop(asyncio.get_running_loop(), None)
        for shards in (clients or {}).values():
            for _, http in shards.clients:
                await http.aclose()

    @staticmethod
    def _genai_client(
        settings: GeminiSettings, http: httpx.Client, async_http: httpx.AsyncClient | None
    ) -> genai.Client:
        """A google-genai client on our httpx clients. The async one never sends a sync
        request: its `http` is passed only so the SDK does not build one of its own.
        Our shared TLS context goes in `client_args`/`async_client_args` although our
        own clients never use them: without it google-genai builds fresh TLS contexts
        (the CA bundle loaded each time) per client, 18-37 ms instead of 0.2 ms."""
        tls = transport.ssl_context()
        options = types.HttpOptions(
            base_url=settings.base_url,
            timeout=settings.timeout_ms,
            httpx_client=http,
            httpx_async_client=async_http,
            client_args={"verify": tls},
            async_client_args={"verify": tls, "ssl": tls},
        )
        return genai.Client(api_key=settings.api_key, http_options=options)


class _Frames:
    """A stream's frames: each delivered as it arrives, all kept for the final answer.
    `started` once the first chunk arrived: from then on the stream is not retried."""

    def __init__(self, deliver: Callable[[list[Part]], None]) -> None:
        self._deliver = deliver
        self._parts: list[Part] = []
        self._grounding: dict[str, Any] | None = None
        self.started = False

    def add(self, chunk: types.GenerateContentResponse) -> None:
        self.started = True
        parts, grounding = wire.candidate_parts(chunk)
        self._grounding = wire.merge_grounding(self._grounding, wire.grounding_json(grounding))
        if not caller_cancelled():  # the attempt is about to be cancelled: not delivered
            self._deliver(parts)
        self._parts.extend(parts)

    def output(self) -> ModelOutput:
        return wire.model_output(self._parts, self._grounding)


def _text_deliverer(on_delta: Callable[[str], None]) -> Callable[[list[Part]], None]:
    def deliver(frame_parts: list[Part]) -> None:
        for delta in visible_text_deltas(frame_parts):
            on_delta(delta)

    return deliver


def _content_deliverer(on_delta: Callable[[Content], None]) -> Callable[[list[Part]], None]:
    def deliver(frame_parts: list[Part]) -> None:
        if frame_parts:
            on_delta(content_model.new(frame_parts, role="model"))

    return deliver


async def _acall(
    settings: GeminiSettings,
    attempt: Callable[[], Awaitable[ModelOutput]],
    frames: _Frames | None,
) -> ModelOutput:
    """`attempt()` under the request deadline, tried again while `retry.next_delay`
    allows (a stream only before its first chunk); failures mapped to `AdkError`.
    Each attempt runs `cancelled_once`: this deadline and a caller's (the judge's, set
    to the same instant) may both cancel the task, and a second cancellation during
    httpcore's cleanup would leave the abandoned connection open."""
    loop = asyncio.get_running_loop()
    deadline = None if settings.timeout_ms is None else loop.time() + settings.timeout_ms / 1000
    scope = asyncio.timeout_at(deadline)
    failure: Exception
    try:
        async with scope:
            attempts = 0
            while True:
                attempts += 1
                try:
                    return await cancelled_once(attempt)
                except AdkError:
                    raise
                except Exception as error:
                    failure = error
                left = None if deadline is None else deadline - loop.time()
                delay = _retry_delay(settings, attempts, failure, frames, left)
                if delay is None:
                    break
                await asyncio.sleep(delay)
    except TimeoutError:
        if scope.expired():
            raise AdkError("timeout", "the Gemini request deadline passed") from None
        raise
    raise _mapped(failure, settings)  # outside the handler: the SDK error is not chained


def _call(
    settings: GeminiSettings, attempt: Callable[[], ModelOutput], frames: _Frames | None
) -> ModelOutput:
    """`_acall` for sync calls: the deadline reaches the transport (`transport.sync_deadline`)."""
    deadline = (
        None if settings.timeout_ms is None else time.monotonic() + settings.timeout_ms / 1000
    )
    token = transport.sync_deadline.set(deadline)
    failure: Exception
    try:
        attempts = 0
        while True:
            attempts += 1
            try:
                return attempt()
            except AdkError:
                raise
            except Exception as error:
                failure = error
            left = None if deadline is None else deadline - time.monotonic()
            delay = _retry_delay(settings, attempts, failure, frames, left)
            if delay is None:
                break
            time.sleep(delay)
    finally:
        transport.sync_deadline.reset(token)
    if deadline is not None and time.monotonic() >= deadline:  # e.g. the watchdog's cut
        raise AdkError("timeout", "the Gemini request deadline passed")
    raise _mapped(failure, settings)


def _retry_delay(
    settings: GeminiSettings,
    attempts: int,
    failure: Exception,
    frames: _Frames | None,
    left: float | None,
) -> float | None:
    """Seconds to wait before the next attempt, or None to give up: a stream that has
    delivered a chunk is never tried again (its reader saw part of an answer)."""
    if frames is not None and frames.started:
        return None
    return retry.next_delay(settings.retry, attempts, failure, left)


def _mapped(error: Exception, settings: GeminiSettings) -> Exception:
    """An SDK, transport or parsing failure as an `AdkError` without secrets or bodies
    (anything else, e.g. an exception from a stream's callback, as it is)."""
    if isinstance(error, genai_errors.APIError):
        return AdkError(
            ("http_error", int(error.code or 0), retry.http_status_text(error, settings.api_key)),
            f"Gemini refused the request (HTTP {int(error.code or 0)})",
        )
    if isinstance(error, transport.ResponseTooLarge):
        return AdkError("response_too_large", f"responses are capped at {MAX_RESPONSE_BYTES} bytes")
    if isinstance(error, httpx.TimeoutException):
        return AdkError("timeout", "the Gemini request timed out")
    if isinstance(error, httpx.HTTPError):
        return AdkError("unavailable", f"transport error: {type(error).__name__}")
    if isinstance(error, ValueError | TypeError | KeyError | RecursionError):
        return AdkError(
            "malformed_response", f"Gemini's response did not parse: {type(error).__name__}"
        )
    return error


__all__ = ["SHARD_CONNECTIONS", "GeminiProvider"]  # SHARD_CONNECTIONS: a copy, read-only (the
# value used lives in providers.gemini.shards)
