"""Supervision of MCP clients: temporary children of the MCP client supervisor whose
process lifetime bounds the transport (spec: "Each application-managed client is a
temporary child of the client supervisor")."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

import adk_actors as adk
from adk_actors import mcp
from adk_actors.mcp.client import ClientConfig, Phase, _Runner
from supervision import DynamicSupervisor, exit, self_pid, stop, whereis
from tests.adk_actors.mcp.conftest import HERE, SDK_SERVER

RAW_SERVER = [sys.executable, str(HERE / "servers" / "raw_server.py")]


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
    """A stdio server that dies ends its client process (it leaves the supervisor), and
    every later call is a typed error, not a hang."""
    client = mcp.connect("stdio", SDK_SERVER)
    server_pid = int(client.call_tool("pid").content[0]["text"])
    os.kill(server_pid, 9)
    assert wait_until(lambda: client.pid not in children(), 5.0), "the client outlived its server"
    for call in (lambda: client.call_tool("add", {"a": 1, "b": 2}, timeout=5), client.list_tools):
        with pytest.raises(adk.AdkError) as info:
            call()
        assert info.value.reason == "mcp_client_closed"
    client.close()  # still idempotent


def _kill_the_new_client(before, after_seconds, killed):
    """From another thread: kill the first client that is not in `before`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        new = [pid for pid in children() if pid not in before]
        if new:
            time.sleep(after_seconds)
            exit(new[0], "kill")
            killed.append(new[0])
            return
        time.sleep(0.01)


def test_killing_a_client_during_the_handshake_stops_its_stdio_server(tmp_path):
    """Killing the client while `initialize` is unanswered stops the stdio server at
    once (stop interrupts the handshake: the server ignores stdin closing and SIGTERM,
    so only the group kill ends it), and `connect` raises a typed error."""
    pidfile = tmp_path / "server.pid"
    killed = []
    killer = threading.Thread(target=_kill_the_new_client, args=(set(children()), 0.5, killed))
    killer.start()
    started = time.monotonic()
    with pytest.raises(adk.AdkError) as info:
        mcp.connect("stdio", [*RAW_SERVER, str(pidfile), "hang"], connect_timeout=20)
    killer.join()
    assert info.value.reason == "mcp_client_closed"
    assert time.monotonic() - started < 3.0
    server_pid = int(pidfile.read_text())
    assert wait_until(lambda: not alive(server_pid), 4.0), "the stdio server outlived its client"
    assert killed and killed[0] not in children()


def test_closing_the_application_during_the_handshake_stops_the_stdio_server(tmp_path):
    """A clean stop (the supervisor's shutdown runs `terminate`) interrupts the
    handshake as well: no waiting for connect_timeout."""
    pidfile = tmp_path / "server.pid"
    failures = []

    def connecting():
        try:
            mcp.connect("stdio", [*RAW_SERVER, str(pidfile), "hang"], connect_timeout=20)
        except adk.AdkError as error:
            failures.append(error.reason)

    thread = threading.Thread(target=connecting)
    thread.start()
    assert wait_until(lambda: pidfile.exists() and pidfile.read_text(), 5.0)
    server_pid = int(pidfile.read_text())
    started = time.monotonic()
    stop(mcp.MCP_CLIENT_SUPERVISOR, "shutdown", timeout=30)
    assert time.monotonic() - started < 5.0
    thread.join(10)
    assert failures == ["mcp_client_closed"]
    assert wait_until(lambda: not alive(server_pid), 4.0)


def test_connect_needs_the_supervisor():
    """Without the MCP client supervisor (the application is stopped) connect is a
    typed refusal, not a client outside supervision."""
    adk.stop()
    assert whereis(mcp.MCP_CLIENT_SUPERVISOR) is None
    with pytest.raises(adk.AdkError) as info:
        mcp.connect("stdio", SDK_SERVER)
    assert info.value.reason == "mcp_client_supervisor_not_running"


def test_the_client_phase_moves_only_along_its_transitions():
    """connecting -> ready -> (reopening -> ready)* -> stopping | failed; anything else
    is refused (a bug, never a silent state)."""
    runner = _Runner(ClientConfig(transport="stdio", command=("true",)), self_pid())
    try:
        assert runner.phase is Phase.CONNECTING
        for phase in (Phase.READY, Phase.REOPENING, Phase.READY, Phase.FAILED):
            runner._enter(phase)
        for phase in Phase:
            with pytest.raises(RuntimeError):
                runner._enter(phase)
        fresh = _Runner(ClientConfig(transport="stdio", command=("true",)), self_pid())
        with pytest.raises(RuntimeError):
            fresh._enter(Phase.REOPENING)  # never reopens a session it never had
        fresh.loop.close()
    finally:
        runner.loop.close()
