"""The MCP client against servers we did not write: the official SDK's `MCPServer`
over stdio and Streamable HTTP, and the npm reference server over stdio.

Follows the spec's "MCP clients and Streamable HTTP server" examples (connect, list,
call, resources, prompts, close) and behaviors.md §12 (client line).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from adk_actors import mcp
from tests.adk_actors.mcp.conftest import EVERYTHING, HERE, SDK_SERVER, reason
from tests.adk_actors.mcp.servers import sdk_server

RAW_SERVER = [sys.executable, str(HERE / "servers" / "raw_server.py")]


def exercise(client):
    """The spec example's calls, against the SDK test server."""
    tools = {tool.name: tool for tool in client.list_tools()}
    assert {"add", "bump", "slow", "fail"} <= set(tools)
    assert tools["add"].input_schema["required"] == ["a", "b"]
    result = client.call_tool("add", {"a": 2, "b": 3})
    assert not result.is_error and result.content == [{"type": "text", "text": "5"}]
    assert result.structured_content == {"result": 5}
    failed = client.call_tool("fail", {"why": "boom"})
    assert failed.is_error
    assert [r["uri"] for r in client.list_resources()] == ["memo://otp"]
    read = client.read_resource("memo://otp")
    assert read["contents"][0]["text"] == "Supervise every long-lived process."
    assert [p["name"] for p in client.list_prompts()] == ["explain"]
    prompt = client.get_prompt("explain", {"topic": "OTP"})
    assert prompt["messages"][0]["content"]["text"] == "Explain OTP"


def test_stdio_against_the_sdk_server():
    """Follows the spec's stdio example and erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_stdio_handshake_test (the handshake is over when connect returns)."""
    client = mcp.connect("stdio", SDK_SERVER)
    assert client.server_info["protocol_version"] in ("2025-11-25", "2025-06-18")
    assert client.server_info["server"]["name"] == "sdk-test-server"
    exercise(client)
    client.close()
    assert reason(lambda: client.list_tools()) == "mcp_client_closed"
    client.close()  # idempotent


def test_stdio_command_as_a_string_and_bad_commands():
    client = mcp.connect("stdio", " ".join(SDK_SERVER))
    assert client.call_tool("add", {"a": 1, "b": 1}).content[0]["text"] == "2"
    client.close()
    assert reason(lambda: mcp.connect("stdio", [])) == ("invalid_mcp_command", "argv")
    assert reason(lambda: mcp.connect("stdio", "'unbalanced")) == (
        "invalid_mcp_command",
        "unparsable",
    )
    assert reason(lambda: mcp.connect("stdio", ["/nonexistent/mcp-server"])) == (
        "mcp_transport_failed",
        "start_failed",
    )
    assert reason(lambda: mcp.connect("websocket", "ws://127.0.0.1:1/")) == (
        "unsupported_transport",
        "unknown",
    )
    assert reason(lambda: mcp.connect("sse", "http://127.0.0.1:1/sse")) == (
        "unsupported_transport",
        "sse_deprecated_use_streamable_http",
    )


def test_streamable_http_against_the_sdk_server(http_server):
    server = http_server(lambda: sdk_server.build().streamable_http_app())
    client = mcp.connect("streamable_http", server.base + "/mcp", allow_http_loopback=True)
    assert client.server_info["server"]["name"] == "sdk-test-server"
    exercise(client)
    client.close()


def test_stdio_against_the_npm_everything_server():
    """The reference server from npm, run with node (installed by `make test`)."""
    assert EVERYTHING.exists(), "run `make test` (or npm install --prefix .mcp-node ...)"
    client = mcp.connect("stdio", [str(EVERYTHING), "stdio"], connect_timeout=30)
    tools = {tool.name: tool for tool in client.list_tools()}
    assert "echo" in tools
    echoed = client.call_tool("echo", {"message": "hello"})
    assert not echoed.is_error and "hello" in echoed.content[0]["text"]
    sum_tool = next(name for name in tools if name.replace("-", "_") in ("get_sum", "add"))
    summed = client.call_tool(sum_tool, {"a": 2, "b": 40})
    assert "42" in summed.content[0]["text"]
    resources = client.list_resources()
    assert resources
    read = client.read_resource(resources[0]["uri"])
    assert read["contents"]
    prompts = client.list_prompts()
    simple = next(p for p in prompts if not any(a.get("required") for a in p.get("arguments", [])))
    assert client.get_prompt(simple["name"])["messages"]
    client.close()


def test_deadline_is_respected_against_a_slow_tool():
    """Follows behaviors.md §12 (one absolute deadline) and erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    mcp_client_uses_one_absolute_response_deadline_test_, mcp_stdio_request_timeout_test_."""
    client = mcp.connect("stdio", SDK_SERVER)
    started = time.monotonic()
    assert reason(lambda: client.call_tool("slow", {"seconds": 5}, timeout=0.5)) == (
        "mcp_timeout",
        "call_tool",
    )
    assert time.monotonic() - started < 2.0
    assert client.call_tool("add", {"a": 1, "b": 2}).content[0]["text"] == "3"
    client.close()


def test_bounds_on_responses_tools_and_schemas(http_server):
    """Spec: bounded responses (max_response_bytes), tools and schemas."""
    server = http_server(lambda: sdk_server.build().streamable_http_app())
    over_http = mcp.connect(
        "streamable_http", server.base + "/mcp", allow_http_loopback=True, max_response_bytes=4096
    )
    assert over_http.call_tool("big", {"size": 100}).content[0]["text"] == "x" * 100
    assert reason(lambda: over_http.call_tool("big", {"size": 10_000})) == "mcp_response_too_large"
    assert over_http.call_tool("add", {"a": 1, "b": 1}).content[0]["text"] == "2"
    over_http.close()
    over_stdio = mcp.connect("stdio", SDK_SERVER, max_response_bytes=4096)
    assert reason(lambda: over_stdio.call_tool("big", {"size": 10_000})) == (
        "mcp_response_too_large"
    )
    # a stdio line past the bound ends the session (the stream is not read past it)
    assert reason(lambda: over_stdio.list_tools()) in (
        "mcp_response_too_large",
        "mcp_client_closed",
    )
    over_stdio.close()
    few_tools = mcp.connect("stdio", SDK_SERVER, max_tools=3)
    assert reason(lambda: few_tools.list_tools()) == "mcp_too_many_tools"
    few_tools.close()
    small_schemas = mcp.connect("stdio", SDK_SERVER, max_schema_bytes=256)
    assert reason(lambda: small_schemas.list_tools()) == "mcp_tool_schema_too_large"
    small_schemas.close()


def test_a_huge_stdio_line_is_refused_at_the_bound(tmp_path):
    """max_response_bytes bounds stdio output as it does HTTP bodies: a 256 MiB line is
    ``mcp_response_too_large`` as soon as the bound is passed (reads are bounded
    chunks, never the whole line), the session ends and the server is stopped."""
    pidfile = tmp_path / "server.pid"
    client = mcp.connect(
        "stdio",
        [*RAW_SERVER, str(pidfile), "big", str(256 << 20)],
        max_response_bytes=64 * 1024,
        request_timeout=20,
    )
    started = time.monotonic()
    assert reason(lambda: client.list_tools()) == "mcp_response_too_large"
    assert time.monotonic() - started < 3.0
    server = Path(f"/proc/{int(pidfile.read_text())}")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and server.exists():
        time.sleep(0.05)
    assert not server.exists(), "the server outlived the session"
    assert reason(lambda: client.list_tools()) in ("mcp_response_too_large", "mcp_client_closed")
    client.close()


def test_connect_options_are_decoded_with_stable_reasons():
    """Options are one msgspec struct (`ConnectOptions`); a bad value names its key, an
    unknown option is one fixed reason (its name is in the message, never the reason)."""
    for options, key in [
        ({"request_timeout": 0}, "request_timeout"),
        ({"request_timeout": float("nan")}, "request_timeout"),
        ({"connect_timeout": True}, "connect_timeout"),
        ({"max_tools": 0}, "max_tools"),
        ({"max_response_bytes": 10}, "max_response_bytes"),
        ({"env": {"A": 1}}, "env"),
        ({"env": {"A": "x\0y"}}, "env"),
        ({"cwd": ""}, "cwd"),
        ({"allowed_hosts": "example.com"}, "allowed_hosts"),
    ]:
        assert reason(lambda options=options: mcp.connect("stdio", SDK_SERVER, **options)) == (
            "invalid_mcp_client_options",
            key,
        )
    assert reason(lambda: mcp.connect("stdio", SDK_SERVER, colour="red")) == (
        "invalid_mcp_client_options",
        "unknown_option",
    )
    client = mcp.connect("stdio", SDK_SERVER)
    assert reason(lambda: client.list_tools(timeout=-1)) == ("invalid_mcp_request", "timeout")
    client.close()
