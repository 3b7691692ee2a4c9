"""Session loss over Streamable HTTP (behaviors.md §12, client line: "session loss on a
tool call -> mcp_session_lost request_not_replayed, tool not run, re-initialised
session serves the next call once; read-only calls retry once")."""

from __future__ import annotations

import uuid

import httpx

from adk_actors import mcp
from tests.adk_actors.mcp.conftest import Recorder, reason
from tests.adk_actors.mcp.servers import sdk_server


def connect(server):
    return mcp.connect("streamable_http", server.base + "/mcp", allow_http_loopback=True)


def test_server_restart_loses_the_session_and_the_tool_call_is_not_replayed(http_server):
    """Follows erlang_adk test/protocols/mcp/adk_mcp_test.erl:
    streamable_http_does_not_replay_tool_after_session_loss_test_."""
    key = uuid.uuid4().hex
    server = http_server(lambda: sdk_server.build().streamable_http_app())
    client = connect(server)
    assert client.call_tool("bump", {"key": key}).content[0]["text"] == f"{key}=1"
    server.restart()  # the new server knows no session: 404
    assert reason(lambda: client.call_tool("bump", {"key": key})) == (
        "mcp_session_lost",
        "request_not_replayed",
    )
    assert sdk_server.CALLS[f"bump:{key}"] == 1  # not run, not replayed
    assert client.call_tool("bump", {"key": key}).content[0]["text"] == f"{key}=2"
    assert sdk_server.CALLS[f"bump:{key}"] == 2  # the renewed session ran it once
    client.close()


def test_a_deleted_session_is_lost_too(http_server):
    key = uuid.uuid4().hex
    recorder: list[Recorder] = []

    def make_app():
        recorder.append(Recorder(sdk_server.build().streamable_http_app()))
        return recorder[-1]

    server = http_server(make_app)
    client = connect(server)
    assert client.call_tool("bump", {"key": key}).content[0]["text"] == f"{key}=1"
    session_id = recorder[-1].session_ids[-1]
    deleted = httpx.delete(
        server.base + "/mcp",
        headers={"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"},
    )
    assert deleted.status_code in (200, 204)
    assert reason(lambda: client.call_tool("bump", {"key": key})) == (
        "mcp_session_lost",
        "request_not_replayed",
    )
    assert sdk_server.CALLS[f"bump:{key}"] == 1
    assert client.call_tool("bump", {"key": key}).content[0]["text"] == f"{key}=2"
    assert recorder[-1].session_ids[-1] != session_id
    client.close()


def test_read_only_calls_are_retried_once_on_a_new_session(http_server):
    server = http_server(lambda: sdk_server.build().streamable_http_app())
    client = connect(server)
    assert [t.name for t in client.list_tools()][:2] == ["add", "bump"]
    before = sdk_server.CALLS["resource"]
    server.restart()
    read = client.read_resource("memo://otp")  # lost, re-initialised, retried once
    assert read["contents"][0]["text"].startswith("Supervise")
    assert sdk_server.CALLS["resource"] == before + 1
    server.restart()
    assert "add" in [t.name for t in client.list_tools()]
    server.restart()
    assert client.list_prompts()[0]["name"] == "explain"
    server.restart()
    assert client.get_prompt("explain", {"topic": "x"})["messages"]
    client.close()
