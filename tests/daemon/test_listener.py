"""The HTTP listener as a supervised child of the root tree: binding, restart, stop."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx
import pytest

from adk_actors.app import APP_NAME
from adk_actors.daemon.listener import (
    ListenerConfig,
    check_dev_host,
    start_listener,
    stop_listener,
)
from providers.errors import AdkError
from supervision import Supervisor, get_state
from tests.daemon.conftest import PROBE, PROBE_ROUTES, DevServer, start_dev_server


def _until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"not within {timeout} s: {what}")


def _answers(server: DevServer) -> bool:
    try:
        return server.client.get(PROBE).status_code == 200
    except httpx.TransportError:
        return False


def test_the_listener_is_the_last_child_of_the_tree() -> None:
    """rest_for_one: the last child stops first when the tree stops."""
    server, listener = start_dev_server()
    children = Supervisor.which_children(APP_NAME)
    assert children[-1].id == listener.child_id
    assert children[-1].pid == listener.pid
    server.client.close()
    stop_listener(listener)
    assert listener.child_id not in [child.id for child in Supervisor.which_children(APP_NAME)]


def test_a_listener_whose_server_stops_comes_back_on_the_same_port() -> None:
    server, listener = start_dev_server(extra_routes=PROBE_ROUTES)
    try:
        assert _answers(server)
        get_state(listener.pid).server.should_exit = True  # uvicorn ends on its own

        def restarted() -> bool:
            child = Supervisor.which_children(APP_NAME)[-1]
            return child.pid is not None and child.pid != listener.pid

        _until(restarted, "the supervisor restarted the listener")
        _until(lambda: _answers(server), "the same URL answers again")
    finally:
        server.client.close()
        stop_listener(listener)


def test_a_port_in_use_is_refused_with_the_bind_reason() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AdkError) as refused:
            start_listener(None, ListenerConfig(port=port), child_id="second")
    assert refused.value.reason[0] == "http_listener_bind_failed"
    assert "second" not in [child.id for child in Supervisor.which_children(APP_NAME)]


def test_a_stopped_listener_frees_its_port() -> None:
    server, listener = start_dev_server()
    port = int(listener.url.rsplit(":", 1)[1])
    server.client.close()
    stop_listener(listener)
    stop_listener(listener)  # a second stop is a no-op
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_developer_api_binds_the_two_loopback_literals(host: str) -> None:
    assert check_dev_host(host) == host


@pytest.mark.parametrize(
    "host",
    [
        "0.0.0.0",
        "::",
        "",
        "localhost",
        "127.0.0.2",
        "10.0.0.1",
        "8.8.8.8",
        "::ffff:127.0.0.1",
        "::1%lo",
    ],
)
def test_every_other_address_is_refused(host: str) -> None:
    """Follows adk_cli_test: serve refuses a non-loopback bind
    (``developer_server_must_bind_loopback``)."""
    with pytest.raises(AdkError) as refused:
        check_dev_host(host)
    assert refused.value.reason == "developer_server_must_bind_loopback"


def test_an_ipv6_loopback_listener_serves() -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    server, listener = start_dev_server(
        extra_routes=PROBE_ROUTES, listener_config=ListenerConfig(host="::1")
    )
    try:
        assert listener.url.startswith("http://[::1]:")
        assert server.client.get(PROBE).status_code == 200
        same_origin = server.client.get(PROBE, headers={"origin": listener.url})
        assert same_origin.status_code == 200
    finally:
        server.client.close()
        stop_listener(listener)
