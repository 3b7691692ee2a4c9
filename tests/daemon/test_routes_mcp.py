"""``/mcp`` of ``adk serve``: the daemon's agent over MCP Streamable HTTP, driven by the
official MCP SDK's client against a real daemon (`serve.main` on an ephemeral loopback
port, a scripted agent config file, LMDB sessions in a tmp dir).

Follows the spec's "MCP clients and Streamable HTTP server" (an agent exposed as an MCP
tool, Origin validation, bearer authentication) and behaviors.md §12.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from adk_actors.daemon.serve import main
from tests.daemon.conftest import TOKEN

START_TIMEOUT = 60.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def daemon_url(tmp_path: Path) -> Iterator[str]:
    """A daemon serving a scripted agent with one tool from its file; yields its /mcp URL."""
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "name": "McpAgent",
                "provider": "scripted",
                "script": [{"text": "the daemon agent answers"}],
                "script_repeat": True,
                "tools": ["examples.agent_tools:get_weather"],
            }
        )
    )
    out = io.StringIO()
    stop = threading.Event()
    codes: list[int] = []

    def serve() -> None:
        codes.append(
            main(
                config,
                "127.0.0.1",
                0,
                tmp_path / "data",
                {"ADK_DEV_TOKEN": TOKEN},
                out,
                stop=stop,
                console_logs=False,
            )
        )

    thread = threading.Thread(target=serve, name="daemon")
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not out.getvalue() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        line = json.loads(out.getvalue().splitlines()[0])
        assert line["status"] == "listening" and line["agent"] == "McpAgent"
        yield line["url"] + "/mcp"
    finally:
        stop.set()
        thread.join(START_TIMEOUT)
    assert codes == [0]


async def _list_and_call(url: str) -> tuple[list[str], dict[str, Any], Any, Any]:
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30.0) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        schemas = {tool.name: tool.input_schema for tool in tools}
        answer = await session.call_tool("McpAgent", {"request": "hello"})
        weather = await session.call_tool("get_weather", {"city": "Paris"})
        return sorted(schemas), schemas, answer, weather


def test_the_sdk_client_lists_and_calls_the_daemon_agent(daemon_url: str) -> None:
    """The official SDK client sees the agent (a tool taking one ``request`` string)
    beside the file's tool, and the agent tool answers with the scripted reply."""
    names, schemas, answer, weather = asyncio.run(_list_and_call(daemon_url))
    assert names == ["McpAgent", "get_weather"]
    assert schemas["McpAgent"]["required"] == ["request"]
    assert schemas["get_weather"]["required"] == ["city"]
    assert not answer.is_error
    assert [getattr(block, "text", None) for block in answer.content] == [
        "the daemon agent answers"
    ]
    assert not weather.is_error
    assert weather.structured_content is not None
    assert weather.structured_content["forecast"] == "sunny"


def test_mcp_without_the_dev_token_is_401(daemon_url: str) -> None:
    with httpx.Client(timeout=10.0) as http:
        anonymous = http.post(daemon_url, json=INITIALIZE, headers=ACCEPT)
        wrong = http.post(
            daemon_url,
            json=INITIALIZE,
            headers={**ACCEPT, "authorization": "Bearer not-the-dev-token-0123456789"},
        )
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].lower().startswith("bearer")
    assert wrong.status_code == 401
    assert "the daemon agent answers" not in anonymous.text + wrong.text


def test_mcp_from_a_foreign_origin_is_403(daemon_url: str) -> None:
    headers = {**ACCEPT, "authorization": f"Bearer {TOKEN}", "origin": "https://evil.example"}
    with httpx.Client(timeout=10.0) as http:
        refused = http.post(daemon_url, json=INITIALIZE, headers=headers)
        accepted = http.post(
            daemon_url, json=INITIALIZE, headers={**ACCEPT, "authorization": f"Bearer {TOKEN}"}
        )
    assert refused.status_code == 403
    assert "mcp-session-id" not in refused.headers
    assert accepted.status_code == 200
    assert accepted.headers.get("mcp-session-id")
