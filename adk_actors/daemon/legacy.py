"""The legacy ``POST /a2a/prompt`` endpoint: one prompt to a named agent, its text back.

The project's small JSON protocol from before A2A 1.0, kept for old clients: the body
``{"agent_name": "...", "prompt": "..."}`` answers ``{"response": "<the agent's
text>"}``. Off by default (`DevSettings.legacy_a2a`, ``ADK_LEGACY_A2A=1``), served on
the daemon's loopback listener and never on another address (`check_legacy_host`).
It takes no token, so it must not be reachable from a web page: the guards refuse a
foreign ``Host`` (421) or ``Origin`` (403) as on every path, and the body must be
``Content-Type: application/json`` (415 ``Unsupported Media Type`` otherwise), which a
cross-site page can only send after a CORS preflight that fails.
Its answers follow the reference handler: 405 ``Method Not Allowed``, 413 ``Payload
Too Large`` past ``legacy_max_body_bytes`` (plain text, the connection closes), 400
``Invalid JSON payload`` (strict JSON, as every body), 404 ``Agent not found``, 500
``{"error": "agent_execution_failed"}`` when the turn fails or runs out of time. The
turn runs on a worker thread (`adk.prompt` blocks) of the endpoint's own pool, at most
``legacy_max_concurrent`` at once (503 ``too_many_legacy_prompts`` past it, so legacy
callers cannot take the threads of the /dev/v1 routes), with a timeout that ends
before the request's deadline; a request with no time left starts nothing (503
``request_timeout``).
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from adk_actors.agents import prompt
from adk_actors.agents.names import check_agent_name, registered_name
from adk_actors.daemon.bodies import dev_state, is_json, parse_json, read_body, time_left
from adk_actors.daemon.errors import ApiError
from adk_actors.daemon.settings import DevSettings
from providers import Content
from providers.content import TextPart
from providers.errors import AdkError
from supervision import get_logger, whereis

PATH = "/a2a/prompt"
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_log = get_logger("adk_actors.daemon.legacy")


def check_legacy_host(host: str) -> str:
    """`host` if it is an IPv4 127/8 or the IPv6 ``::1`` literal; anything else (a name,
    a wildcard, any other address) is ``legacy_a2a_server_must_bind_loopback``."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None or not address.is_loopback or "%" in host:
        raise AdkError(
            "legacy_a2a_server_must_bind_loopback",
            "the legacy endpoint listens on 127.0.0.0/8 or ::1 only",
        )
    return host


def routes(settings: DevSettings) -> list[BaseRoute]:
    """The endpoint's route, with its own bound on prompts at once (added by
    `app.build_app` when the settings enable it)."""
    endpoint = _PromptEndpoint(settings.legacy_max_concurrent)
    return [Route(PATH, endpoint.serve, methods=_ALL_METHODS, name="legacy_prompt")]


class _PromptEndpoint:
    """``POST /a2a/prompt`` (see the module doc), at most `slots` turns at once."""

    def __init__(self, slots: int) -> None:
        self._slots = slots
        self._busy = 0  # touched on the event loop only
        self._threads = anyio.CapacityLimiter(slots)  # never waits: `_busy` admits first

    async def serve(self, request: Request) -> Response:
        if request.method != "POST":
            return PlainTextResponse("Method Not Allowed", 405, headers={"allow": "POST"})
        if not is_json(request):  # a cross-site form or no-cors fetch cannot send this
            return PlainTextResponse("Unsupported Media Type", 415)
        settings = dev_state(request).settings
        try:
            body = await read_body(request, settings.legacy_max_body_bytes)
        except ApiError as error:
            if error.status == 413:
                return PlainTextResponse("Payload Too Large", 413, headers={"connection": "close"})
            return PlainTextResponse("Invalid JSON payload", 400)
        decoded = _decode(body)
        if decoded is None:
            return PlainTextResponse("Invalid JSON payload", 400)
        agent_name, text = decoded
        if not _agent_exists(agent_name):
            return PlainTextResponse("Agent not found", 404)
        timeout = time_left(request) - _answer_margin(settings.request_timeout)
        if timeout <= 0:  # nothing starts for a request past its deadline
            raise ApiError(503, "request_timeout", "The request ran out of time")
        if self._busy >= self._slots:
            raise ApiError(
                503,
                "too_many_legacy_prompts",
                "Too many legacy prompts at once; retry",
                headers={"retry-after": "1"},
            )
        self._busy += 1
        try:
            answer = await anyio.to_thread.run_sync(
                functools.partial(prompt, agent_name, text, timeout), limiter=self._threads
            )
        except AdkError as error:
            _log.warning("adk.daemon.legacy_prompt_failed", reason=str(error.reason)[:200])
            return JSONResponse({"error": "agent_execution_failed"}, 500)
        finally:
            self._busy -= 1
        return JSONResponse({"response": _text_of(answer)})


def _answer_margin(request_timeout: float) -> float:
    """The time kept after a turn to answer its failure before the request deadline."""
    return min(1.0, request_timeout / 10)


def _decode(body: bytes) -> tuple[str, str] | None:
    """``(agent_name, prompt)`` from the body (strict JSON), both strings, or None."""
    try:
        value: Any = parse_json(body)
    except ApiError:
        return None
    if not isinstance(value, dict):
        return None
    agent_name, text = value.get("agent_name"), value.get("prompt")
    if not isinstance(agent_name, str) or not isinstance(text, str):
        return None
    return agent_name, text


def _agent_exists(name: str) -> bool:
    """A running agent is registered under `name` (an invalid name names none)."""
    try:
        check_agent_name(name)
    except AdkError:
        return False
    return whereis(registered_name(name)) is not None


def _text_of(answer: str | Content) -> str:
    """The visible text of an answer (a media answer's text parts, joined)."""
    if isinstance(answer, str):
        return answer
    return "".join(
        part.text for part in answer.parts if isinstance(part, TextPart) and not part.thought
    )
