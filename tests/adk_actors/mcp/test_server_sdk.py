"""`adk.mcp.serve` against the official MCP SDK's client (not ours), over Streamable
HTTP on 127.0.0.1: tools (functions, explicit tools, an agent), a tool error,
resources, prompts, a lost session, and the supervised listener's restart.

Follows the spec's "MCP clients and Streamable HTTP server" example (weather tool,
``memo://otp`` resource, ``explain`` prompt) and behaviors.md §12.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from cryptography import x509
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import adk_actors as adk
import supervision as sv
from adk_actors.mcp.server import McpServer, serve
from providers.errors import AdkError
from tests.adk_actors.mcp.pki import write_test_pki

TOKEN = "replace-with-at-least-16-secret-bytes"
T = TypeVar("T")


@adk.tool
def get_weather(city: str) -> dict[str, Any]:
    """The weather of a city.

    Args:
        city: the city's name.
    """
    return {"city": city, "forecast": "sunny"}


@adk.tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("secret internal detail 9f3a")


@adk.tool
def refuse() -> str:
    """Fails with a typed reason."""
    raise AdkError("quota_exhausted", "no more quota, secret detail 51c2")


class Shout(adk.Tool):
    name = "shout"
    description = "Upper-cases the text."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def execute(self, args: dict[str, Any], ctx: adk.ToolContext) -> Any:
        return args["text"].upper()


RESOURCE = {
    "uri": "memo://otp",
    "name": "otp-note",
    "mime_type": "text/plain",
    "read": lambda: "Supervise every long-lived process.",
}
BLOB = {"uri": "memo://bytes", "name": "bytes", "read": lambda: b"\x00\x01\x02"}


def _broken() -> str:
    raise ValueError("secret resource detail 7e1d")


BROKEN = {"uri": "memo://broken", "name": "broken", "read": _broken}
PROMPT = {
    "name": "explain",
    "arguments": [{"name": "topic", "required": True}],
    "get": lambda args: {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": f"Explain {args['topic']}"}}
        ]
    },
}


@pytest.fixture
def servers() -> Iterator[list[McpServer]]:
    started: list[McpServer] = []
    yield started
    for server in started:
        server.stop()


def _serve(servers: list[McpServer], **options: Any) -> McpServer:
    server = serve(**options)
    servers.append(server)
    return server


@asynccontextmanager
async def _client(
    url: str,
    token: str | None = TOKEN,
    session_ids: list[str] | None = None,
    verify: ssl.SSLContext | bool = True,
) -> AsyncIterator[ClientSession]:
    async def remember(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and session_ids is not None and sid not in session_ids:
            session_ids.append(sid)

    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(
            headers=headers, event_hooks={"response": [remember]}, verify=verify
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(fn(), 30))


def test_tools_resources_and_prompts_over_the_sdk_client(servers: list[McpServer]) -> None:
    """Follows the spec's Streamable HTTP server example: list and call a tool, list and
    read a resource, list and get a prompt, with a bearer token."""
    server = _serve(
        servers,
        tools=[get_weather, Shout()],
        resources=[RESOURCE, BLOB, BROKEN],
        prompts=[PROMPT],
        auth_token=TOKEN,
    )
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")

    async def scenario() -> None:
        async with _client(server.url) as session:
            tools = (await session.list_tools()).tools
            assert [t.name for t in tools] == ["get_weather", "shout"]
            assert tools[0].input_schema["required"] == ["city"]
            weather = await session.call_tool("get_weather", {"city": "Pune"})
            assert weather.is_error is False
            assert weather.structured_content == {"city": "Pune", "forecast": "sunny"}
            shout = await session.call_tool("shout", {"text": "otp"})
            assert shout.content[0].text == "OTP"  # type: ignore[union-attr]
            resources = (await session.list_resources()).resources
            assert [r.uri for r in resources] == ["memo://otp", "memo://bytes", "memo://broken"]
            text = await session.read_resource("memo://otp")
            assert text.contents[0].text == "Supervise every long-lived process."  # type: ignore[union-attr]
            blob = await session.read_resource("memo://bytes")
            assert blob.contents[0].blob == "AAEC"  # type: ignore[union-attr]
            with pytest.raises(MCPError) as missing:
                await session.read_resource("memo://nothing")
            assert missing.value.code == -32002
            prompts = (await session.list_prompts()).prompts
            assert prompts[0].name == "explain" and prompts[0].arguments[0].required  # type: ignore[index]
            got = await session.get_prompt("explain", {"topic": "OTP"})
            assert got.messages[0].content.text == "Explain OTP"  # type: ignore[union-attr]
            with pytest.raises(MCPError) as no_topic:
                await session.get_prompt("explain", {})
            assert no_topic.value.code == -32602
            with pytest.raises(MCPError) as broken:
                await session.read_resource("memo://broken")
            assert broken.value.code == -32603 and "7e1d" not in str(broken.value)

    _run(scenario)


def test_tool_errors_are_results_with_is_error(servers: list[McpServer]) -> None:
    """A tool that raises, invalid arguments and an unknown tool: the first two are tool
    results with isError (the exception's text never crosses), the last a JSON-RPC
    error; the server goes on."""
    server = _serve(servers, tools=[get_weather, explode, refuse], auth_token=TOKEN)

    async def scenario() -> None:
        async with _client(server.url) as session:
            failed = await session.call_tool("explode", {})
            assert failed.is_error is True
            text = failed.content[0].text  # type: ignore[union-attr]
            assert "RuntimeError" in text and "9f3a" not in text
            typed = await session.call_tool("refuse", {})
            assert typed.is_error and "quota_exhausted" in typed.content[0].text  # type: ignore[union-attr]
            assert "51c2" not in typed.content[0].text  # type: ignore[union-attr]
            invalid = await session.call_tool("get_weather", {"city": 3})
            assert invalid.is_error and "invalid_tool_arguments" in invalid.content[0].text  # type: ignore[union-attr]
            with pytest.raises(MCPError):
                await session.call_tool("nothing_here", {})
            ok = await session.call_tool("get_weather", {"city": "Pune"})
            assert ok.is_error is False

    _run(scenario)


class Publish(adk.Tool):
    name = "publish"
    description = "Needs a human's approval."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args: dict[str, Any], ctx: adk.ToolContext) -> Any:
        raise AssertionError("an unapproved call never runs")


def test_a_tool_needing_approval_fails_closed(servers: list[McpServer]) -> None:
    """No Runner can pause for a human here: the call is refused, the tool never runs."""
    server = _serve(servers, tools=[Publish()], auth_token=TOKEN)

    async def scenario() -> None:
        async with _client(server.url) as session:
            refused = await session.call_tool("publish", {})
            assert refused.is_error is True
            assert "tool_confirmation_requires_runner" in refused.content[0].text  # type: ignore[union-attr]

    _run(scenario)


def test_a_slow_tool_times_out_as_a_tool_error(servers: list[McpServer]) -> None:
    @adk.tool
    def sleepy() -> str:
        """Sleeps past the request timeout."""
        time.sleep(1.0)
        return "late"

    server = _serve(servers, tools=[sleepy], request_timeout=0.2, auth_token=TOKEN)

    async def scenario() -> None:
        async with _client(server.url) as session:
            late = await session.call_tool("sleepy", {})
            assert late.is_error and "mcp_timeout" in late.content[0].text  # type: ignore[union-attr]

    _run(scenario)


def test_an_agent_is_a_tool_taking_a_request(servers: list[McpServer]) -> None:
    """An AgentRef becomes a tool taking a request string, answered with its reply."""

    def reply(history: Any, tools: Any) -> dict[str, str]:
        return {"text": "helper says: " + history[-1].text_value()}

    agent = adk.spawn_agent("McpHelper", {"provider": adk.ScriptedProvider(fn=reply)})
    server = _serve(servers, tools=[agent], auth_token=TOKEN)

    async def scenario() -> None:
        async with _client(server.url) as session:
            (tool,) = (await session.list_tools()).tools
            assert tool.name == "McpHelper" and tool.input_schema["required"] == ["request"]
            answer = await session.call_tool("McpHelper", {"request": "hello"})
            assert answer.is_error is False
            assert answer.content[0].text == "helper says: hello"  # type: ignore[union-attr]

    _run(scenario)


def test_the_sdk_reports_an_expired_or_deleted_session(servers: list[McpServer]) -> None:
    """Follows behaviors.md §12: after session expiry (session_ttl) or a DELETE, the SDK
    client's next call reports the lost session (404)."""
    server = _serve(servers, tools=[get_weather], auth_token=TOKEN, session_ttl=0.3)

    async def expiry() -> None:
        async with _client(server.url) as session:
            await asyncio.sleep(0.5)
            with pytest.raises(MCPError) as lost:
                await session.call_tool("get_weather", {"city": "Pune"})
            assert lost.value.code == -32600 and "Session" in lost.value.error.message

    _run(expiry)

    async def deleted() -> None:
        ids: list[str] = []
        async with _client(server.url, session_ids=ids) as session:
            async with httpx2.AsyncClient() as http:
                gone = await http.delete(
                    server.url,
                    headers={
                        "authorization": f"Bearer {TOKEN}",
                        "mcp-session-id": ids[0],
                        "mcp-protocol-version": "2025-11-25",
                    },
                )
                assert gone.status_code == 204
            with pytest.raises(MCPError):
                await session.list_tools()

    _run(deleted)


def test_a_killed_listener_is_restarted_on_the_same_port(servers: list[McpServer]) -> None:
    """The listener is a supervised process: killed (no `terminate`), it comes back on
    the same URL (its orphaned uvicorn let go of the port) with fresh sessions."""
    server = _serve(servers, tools=[get_weather], auth_token=TOKEN)

    async def call_once() -> bool:
        async with _client(server.url) as session:
            result = await session.call_tool("get_weather", {"city": "Pune"})
            return result.is_error is False

    assert _run(call_once)
    old = server.pid
    sv.exit(old, "kill")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        children = {c.id: c.pid for c in sv.Supervisor.which_children(adk.app.APP_NAME)}
        pid = children.get(server.child_id)
        if pid is not None and pid != old:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the listener was not restarted")
    assert _run(call_once)


def test_http_app_mounts_in_another_asgi_app(http_server: Callable[..., Any]) -> None:
    """`http_app` is the endpoint without a listener, as the daemon mounts it: a
    Starlette route at /mcp beside other routes; the same app instance keeps working
    after its host server restarts (a new event loop: fresh sessions)."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from adk_actors.mcp.server import http_app

    endpoint = http_app(tools=[get_weather], auth_token=TOKEN)

    async def health(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    host = Starlette(routes=[Route("/health", health), Route("/mcp", endpoint, methods=None)])
    served = http_server(lambda: host)
    url = served.base + "/mcp"

    async def call_once() -> bool:
        async with _client(url) as session:
            result = await session.call_tool("get_weather", {"city": "Pune"})
            return result.is_error is False

    assert _run(call_once)
    served.restart()
    assert _run(call_once)


def test_direct_tls_round_trip(servers: list[McpServer], tmp_path: Path) -> None:
    """Follows erlang_adk mcp_server_direct_tls_public_boundary_round_trip_test_ (review
    finding 11): served with tls_certfile/tls_keyfile, the endpoint is https; the SDK
    client trusting the test CA verifies the certificate and calls a tool; a client
    without that CA is refused by TLS, and cleartext gets no MCP answer."""
    context = write_test_pki(
        tmp_path, "127.0.0.1", x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    )
    server = _serve(
        servers,
        tools=[get_weather],
        auth_token=TOKEN,
        tls_certfile=str(tmp_path / "cert.pem"),
        tls_keyfile=str(tmp_path / "key.pem"),
    )
    assert server.url.startswith("https://127.0.0.1:")

    async def call_once() -> None:
        async with _client(server.url, verify=context) as session:
            result = await session.call_tool("get_weather", {"city": "Pune"})
            assert result.is_error is False
            assert result.structured_content == {"city": "Pune", "forecast": "sunny"}

    _run(call_once)

    async def untrusted() -> None:
        async with httpx2.AsyncClient() as http:
            with pytest.raises(httpx2.ConnectError) as refused:
                await http.post(server.url, json={})
            assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
            cleartext = server.url.replace("https://", "http://")
            try:
                answer = await http.post(cleartext, json={})
            except httpx2.HTTPError:
                return
            assert answer.status_code == 400  # uvicorn's TLS port, not an MCP answer

    _run(untrusted)
