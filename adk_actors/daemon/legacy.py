"""The legacy ``POST /a2a/prompt`` endpoint: one prompt to a named agent, its text back.

The project's small JSON protocol from before A2A 1.0, kept for old clients: the body
``{"agent_name": "...", "prompt": "..."}`` answers ``{"response": "<the agent's
text>"}``. Off by default (`DevSettings.legacy_a2a`, ``ADK_LEGACY_A2A=1``), served on
the daemon's loopback listener and never on another address (`check_legacy_host`).
Its answers follow the reference handler: 405 ``Method Not Allowed``, 413 ``Payload
Too Large`` past ``legacy_max_body_bytes`` (plain text, the connection closes), 400
``Invalid JSON payload``, 404 ``Agent not found``, 500 ``{"error":
"agent_execution_failed"}`` when the turn fails. The turn runs on a worker thread
(`adk.prompt` blocks), within the daemon's ``request_timeout``.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from adk_actors.agents import prompt
from adk_actors.agents.names import check_agent_name, registered_name
from adk_actors.daemon.bodies import dev_state, read_body
from adk_actors.daemon.errors import ApiError
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


async def prompt_endpoint(request: Request) -> Response:
    """``POST /a2a/prompt`` (see the module doc)."""
    if request.method != "POST":
        return PlainTextResponse("Method Not Allowed", 405, headers={"allow": "POST"})
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
    try:
        answer = await run_in_threadpool(prompt, agent_name, text, settings.request_timeout)
    except AdkError as error:
        _log.warning("adk.daemon.legacy_prompt_failed", reason=str(error.reason)[:200])
        return JSONResponse({"error": "agent_execution_failed"}, 500)
    return JSONResponse({"response": _text_of(answer)})


def _decode(body: bytes) -> tuple[str, str] | None:
    """``(agent_name, prompt)`` from the body, both strings, or None."""
    try:
        value: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
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


ROUTES: list[BaseRoute] = [Route(PATH, prompt_endpoint, methods=_ALL_METHODS, name="legacy_prompt")]
"""Added by `app.build_app` when the settings enable the endpoint."""
