"""The Gemini REST provider, on google-genai.

`generate` calls ``generateContent``; `stream` and `stream_content` call
``streamGenerateContent`` (SSE). The API key comes from ``config["api_key"]`` or
``GEMINI_API_KEY`` and is sent only as the ``x-goog-api-key`` header; it never
appears in an error, a log line or a repr. ``missing_api_key`` is raised before any
HTTP. Errors map to stable reasons: ``("http_error", status, status_text)``,
``("blocked", reason)``, ``timeout``, ``unavailable``, ``malformed_response``,
``response_too_large``. Only the sync client is used (the SDK's async path would
switch to aiohttp when it is installed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from providers import content as content_model
from providers.content import Content, Part
from providers.errors import AdkError
from providers.gemini import wire
from providers.gemini.config import GeminiSettings, check
from providers.protocol import ModelOutput, ToolDeclaration, visible_text_deltas

MAX_RESPONSE_BYTES = 64 << 20
_CLIENT_CACHE_SIZE = 32


class _ResponseTooLarge(Exception):
    pass


class _CappedStream(httpx.SyncByteStream):
    """Stops reading a response body past `limit` bytes."""

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise _ResponseTooLarge()
            yield chunk

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class _CappedTransport(httpx.HTTPTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.stream = _CappedStream(response.stream, MAX_RESPONSE_BYTES)
        return response


class GeminiProvider:
    name = "gemini"

    def __init__(self) -> None:
        self._clients: OrderedDict[tuple[str, str | None, int | None], genai.Client] = OrderedDict()
        self._lock = threading.Lock()

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

    # -- calls ---------------------------------------------------------------------------

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        settings, contents, request = self._prepare(config, history, tools)
        with _mapped_errors():
            response = self._client(settings).models.generate_content(
                model=settings.model, contents=contents, config=request
            )
            parts, grounding = wire.candidate_parts(response)
            return wire.model_output(parts, wire.grounding_json(grounding))

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        def deliver(frame_parts: list[Part]) -> None:
            for delta in visible_text_deltas(frame_parts):
                on_delta(delta)

        return self._stream(config, history, tools, deliver)

    def stream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        def deliver(frame_parts: list[Part]) -> None:
            if frame_parts:
                on_delta(content_model.new(frame_parts, role="model"))

        return self._stream(config, history, tools, deliver)

    def _stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        deliver: Callable[[list[Part]], None],
    ) -> ModelOutput:
        settings, contents, request = self._prepare(config, history, tools)
        collected: list[Part] = []
        grounding: dict[str, Any] | None = None
        with _mapped_errors():
            chunks = self._client(settings).models.generate_content_stream(
                model=settings.model, contents=contents, config=request
            )
            for chunk in chunks:
                parts, frame_grounding = wire.candidate_parts(chunk)
                grounding = wire.merge_grounding(grounding, wire.grounding_json(frame_grounding))
                deliver(parts)
                collected.extend(parts)
            return wire.model_output(collected, grounding)

    # -- plumbing ------------------------------------------------------------------------

    def _prepare(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> tuple[GeminiSettings, list[types.Content], types.GenerateContentConfig]:
        settings = check(config)  # missing_api_key and every config error come before HTTP
        contents, system = wire.request_contents(history, settings.instructions)
        return settings, contents, wire.generate_config(settings, tools, system)

    def _client(self, settings: GeminiSettings) -> genai.Client:
        key = (settings.api_key, settings.base_url, settings.timeout_ms)
        with self._lock:
            client = self._clients.get(key)
            if client is not None:
                self._clients.move_to_end(key)
                return client
        timeout_seconds = None if settings.timeout_ms is None else settings.timeout_ms / 1000
        options = types.HttpOptions(
            base_url=settings.base_url,
            timeout=settings.timeout_ms,
            httpx_client=httpx.Client(
                transport=_CappedTransport(),
                timeout=httpx.Timeout(timeout_seconds),
                follow_redirects=False,
            ),
        )
        client = genai.Client(api_key=settings.api_key, http_options=options)
        with self._lock:
            self._clients[key] = client
            if len(self._clients) > _CLIENT_CACHE_SIZE:
                self._clients.popitem(last=False)
        return client


class _mapped_errors:
    """Turn SDK, transport and parsing failures into `AdkError`s without secrets."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> bool:
        if error is None or isinstance(error, AdkError):
            return False
        if isinstance(error, genai_errors.APIError):
            status = getattr(error, "status", None)
            raise AdkError(
                ("http_error", int(error.code or 0), str(status or "")),
                "Gemini refused the request",
            ) from None
        if isinstance(error, _ResponseTooLarge):
            raise AdkError(
                "response_too_large", f"responses are capped at {MAX_RESPONSE_BYTES} bytes"
            ) from None
        if isinstance(error, httpx.TimeoutException):
            raise AdkError("timeout", "the Gemini request timed out") from None
        if isinstance(error, httpx.HTTPError):
            raise AdkError("unavailable", f"transport error: {type(error).__name__}") from None
        if isinstance(error, ValueError | TypeError | KeyError):
            raise AdkError(
                "malformed_response", f"Gemini's response did not parse: {type(error).__name__}"
            ) from None
        return False


__all__ = ["GeminiProvider"]
