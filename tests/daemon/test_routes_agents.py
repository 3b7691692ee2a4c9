"""/dev/v1/agents and /dev/v1/diagnostics over real HTTP."""

from __future__ import annotations

import adk_actors as adk
from adk_actors.agents import list_agents
from tests.daemon.conftest import DevServer


def test_agents_are_listed_by_name_sorted_without_pids(dev_server: DevServer) -> None:
    """Follows adk_dev_http_test: agent_discovery_case."""
    for name in ("DevResume", "DevBlock", "DevComplete"):
        adk.spawn_agent(name, {"provider": "scripted", "script": ["x"]})

    response = dev_server.client.get("/dev/v1/agents")

    assert response.status_code == 200
    assert response.json() == {
        "schema_version": 1,
        "agents": [{"name": "DevBlock"}, {"name": "DevComplete"}, {"name": "DevResume"}],
        "total": 3,
        "truncated": False,
    }
    assert "pid" not in response.text and "<0." not in response.text


def test_a_stopped_agent_is_no_longer_listed(dev_server: DevServer) -> None:
    adk.spawn_agent("Gone", {"provider": "scripted", "script": ["x"]})
    adk.spawn_agent("Stays", {"provider": "scripted", "script": ["x"]})
    adk.stop_agent("Gone")
    names = [agent["name"] for agent in dev_server.client.get("/dev/v1/agents").json()["agents"]]
    assert names == ["Stays"]


def test_listing_agents_needs_the_token_and_only_reads(dev_server: DevServer) -> None:
    with dev_server.anonymous() as anonymous:
        assert anonymous.get("/dev/v1/agents").status_code == 401
    response = dev_server.client.post("/dev/v1/agents", json={})
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_list_agents_is_bounded() -> None:
    for name in ("C", "A", "B"):
        adk.spawn_agent(name, {"provider": "scripted", "script": ["x"]})
    assert list_agents() == ["A", "B", "C"]
    assert list_agents(2) == ["A", "B"]
    for bad in (0, -1, 10_001, True, 1.5):
        try:
            list_agents(bad)  # type: ignore[arg-type]
        except adk.AdkError as error:
            assert error.reason == "invalid_limit"
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_diagnostics_describe_capabilities_without_content(dev_server: DevServer) -> None:
    """Follows adk_dev_v05_http_test: diagnostics_and_context_case (the diagnostics)."""
    dev_server.state.sessions.create_session("app", "u", "s", {"password": "must-not-appear"})

    response = dev_server.client.get("/dev/v1/diagnostics")

    assert response.status_code == 200
    body = response.json()
    assert body["schema_version"] == 1
    assert body["resources"] == {"artifact": "unavailable", "memory": "unavailable"}
    assert body["scope_required"] is True and body["artifact_bytes_exposed"] is False
    context = body["context"]
    assert context["overflow_modes"] == ["truncate", "error", "compress"]
    assert "function_call" in context["content_types"]
    assert context["fingerprint"] == {"algorithm": "sha256", "encoding": "hex"}
    assert context["policy"]["overflow"] == "error" and context["policy"]["max_bytes"] is None
    assert "must-not-appear" not in response.text and "<0." not in response.text
    with dev_server.anonymous() as anonymous:
        assert anonymous.get("/dev/v1/diagnostics").status_code == 401
