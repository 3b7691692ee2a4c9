"""Supervision of MCP clients: temporary children of the MCP client supervisor whose
process lifetime bounds the transport (spec: "Each application-managed client is a
temporary child of the client supervisor")."""

from __future__ import annotations

import os
import time

import pytest

import adk_actors as adk
from adk_actors import mcp
from supervision import DynamicSupervisor, exit, stop, whereis
from tests.adk_actors.mcp.conftest import SDK_SERVER


def alive(os_pid: int) -> bool:
    try:
        with open(f"/proc/{os_pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until(check, seconds=8.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def children():
    return [c.pid for c in DynamicSupervisor.which_children(mcp.MCP_CLIENT_SUPERVISOR)]


def test_killing_the_client_process_stops_the_stdio_server():
    """No orphans: the client's lifetime bounds the transport, even on kill."""
    client = mcp.connect("stdio", SDK_SERVER)
    server_pid = int(client.call_tool("pid").content[0]["text"])
    assert alive(server_pid) and server_pid != os.getpid()
    exit(client.pid, "kill")
    assert wait_until(lambda: not alive(server_pid)), "the stdio server outlived its client"
    with pytest.raises(adk.AdkError) as info:
        client.list_tools()
    assert info.value.reason == "mcp_client_closed"


def test_close_stops_the_stdio_server():
    client = mcp.connect("stdio", SDK_SERVER)
    server_pid = int(client.call_tool("pid").content[0]["text"])
    client.close()
    assert wait_until(lambda: not alive(server_pid))


def test_clients_are_temporary_and_independent():
    """A dead client is not restarted; its neighbour keeps working."""
    first = mcp.connect("stdio", SDK_SERVER)
    second = mcp.connect("stdio", SDK_SERVER)
    assert {first.pid, second.pid} <= set(children())
    exit(first.pid, "kill")
    assert wait_until(lambda: first.pid not in children())
    time.sleep(0.2)  # a restart would have happened by now
    assert first.pid not in children() and second.pid in children()
    assert len([pid for pid in children() if pid == second.pid]) == 1
    assert second.call_tool("add", {"a": 1, "b": 2}).content[0]["text"] == "3"
    second.close()
    assert wait_until(lambda: second.pid not in children())


def test_a_crashed_stdio_server_ends_its_client():
    client = mcp.connect("stdio", SDK_SERVER)
    server_pid = int(client.call_tool("pid").content[0]["text"])
    os.kill(server_pid, 9)
    with pytest.raises(adk.AdkError) as info:
        client.call_tool("add", {"a": 1, "b": 2}, timeout=5)
    assert info.value.reason in ("mcp_connection_closed", "mcp_client_closed")
    client.close()


def test_connect_needs_the_supervisor():
    """Without the MCP client supervisor (the application is stopped) connect is a
    typed refusal, not a client outside supervision."""
    adk.stop()
    pid = whereis(mcp.MCP_CLIENT_SUPERVISOR)
    if pid is not None:  # started by the test fixture, not the tree
        stop(pid, "shutdown")
    with pytest.raises(adk.AdkError) as info:
        mcp.connect("stdio", SDK_SERVER)
    assert info.value.reason == "mcp_client_supervisor_not_running"
