"""``adk mcp serve-stdio --config F`` as a real subprocess, driven by the official MCP
SDK's stdio client: the config file's agent is a tool taking a request, its tools are
tools, stdout carries only the protocol; a refused file exits 2 with a JSON error on
stderr and nothing on stdout.

Follows the spec's "MCP clients and Streamable HTTP server" section (the server side
over stdio) with the offline scripted model.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.cli.conftest import REPO, base_env

COMMAND = [sys.executable, "-m", "adk_actors.cli.mcp_command", "serve-stdio"]
"""The command group's own entry point: ``adk mcp serve-stdio`` (the group is registered in
the ``adk`` script) runs the same command; this form needs no installed script."""

CONFIG = {
    "name": "StdioAgent",
    "provider": "scripted",
    "tools": ["examples.agent_tools:get_weather"],
    "script": [{"text": "stdio agent says hi"}],
    "script_repeat": True,
}


def test_serve_stdio_with_the_sdk_stdio_client(write_config: Callable[[Any], str]) -> None:
    path = write_config(CONFIG)
    params = StdioServerParameters(
        command=COMMAND[0],
        args=[*COMMAND[1:], "--config", path],
        env=base_env(),
        cwd=str(REPO),
    )

    async def scenario() -> None:
        with tempfile.TemporaryFile("w+") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
                assert init.protocol_version == "2025-11-25"
                tools = {t.name: t for t in (await session.list_tools()).tools}
                assert set(tools) == {"StdioAgent", "get_weather"}
                assert tools["StdioAgent"].input_schema["required"] == ["request"]
                answer = await session.call_tool("StdioAgent", {"request": "hello"})
                assert answer.is_error is False
                assert answer.content[0].text == "stdio agent says hi"  # type: ignore[union-attr]
                weather = await session.call_tool("get_weather", {"city": "Pune"})
                assert weather.structured_content["forecast"] == "sunny"
                invalid = await session.call_tool("get_weather", {})
                assert invalid.is_error is True

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_refused_config_exits_2_and_leaves_stdout_empty(
    write_config: Callable[[Any], str],
) -> None:
    path = write_config({"name": "Broken", "provider": "nonsense"})
    done = subprocess.run(
        [*COMMAND, "--config", path],
        input="",
        capture_output=True,
        text=True,
        cwd=REPO,
        env=base_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert (error["status"], error["reason"]) == ("error", "unknown_provider")
