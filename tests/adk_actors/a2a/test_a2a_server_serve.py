"""`adk.a2a.serve` as a process: its checked options, the authentication and exposure
rules (a non-loopback bind needs auth, allow_non_loopback and TLS or a trusted proxy),
the published card's URL, `stop` (idempotent, frees the port, stops the task store),
and the same routes mounted in the daemon (`daemon.routes_a2a`) behind its guards.

Follows the spec's "A2A 1.0 interoperability" server rules and behaviors.md §12 (no
auth -> 401), with the non-loopback rule shared with ``adk.mcp.serve``.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

import adk_actors as adk
from adk_actors.a2a.server import A2A_EXPOSURE_REASONS, serve
from adk_actors.a2a.tasks import principal_scope
from adk_actors.app import APP_NAME
from adk_actors.config_file import load_agent_file
from adk_actors.daemon.app import build_app
from adk_actors.daemon.listener import listener_config, start_listener
from adk_actors.daemon.routes_a2a import PRINCIPAL, a2a_routes_for_daemon
from adk_actors.daemon.settings import dev_settings, token_digest
from adk_actors.daemon.state import DevState
from adk_actors.serving import check_exposure, stop_listener
from adk_actors.sessions import InMemorySessionService
from providers.errors import AdkError
from supervision import Supervisor, whereis
from tests.adk_actors.a2a.conftest import ALICE, Rpc, echo, envelope, message, sse_events
from tests.adk_actors.mcp.pki import write_test_pki

REASON = "invalid_a2a_server_option"
_agents = itertools.count(1)


def echo_agent() -> adk.AgentRef:
    name = f"Echo{next(_agents)}"
    return adk.spawn_agent(name, {"provider": adk.ScriptedProvider(fn=echo, inline=True)})


def reason(**options: Any) -> Any:
    """The `AdkError` reason of ``serve(echo agent, **options)`` (it must refuse)."""
    with pytest.raises(AdkError) as refused:
        serve(echo_agent(), **options)
    return refused.value.reason


def children() -> set[Any]:
    return {child.id for child in Supervisor.which_children(APP_NAME)}


def test_non_loopback_needs_auth_acknowledgement_and_tls() -> None:
    """Each missing piece of a non-loopback bind is its own reason, checked before any
    socket is bound (no address but 127.0.0.1 is ever bound here); a wildcard address
    also needs the public_url clients use."""
    assert reason(host="0.0.0.0") == "a2a_auth_required"
    assert reason(host="0.0.0.0", auth_token=ALICE) == "a2a_non_loopback_not_acknowledged"
    assert (
        reason(host="0.0.0.0", auth_token=ALICE, allow_non_loopback=True)
        == "a2a_non_loopback_requires_tls"
    )
    assert reason(host="::", auth_token=ALICE, allow_non_loopback=True, trusted_tls_proxy=True) == (
        REASON,
        "public_url",
    )
    assert reason(host="localhost", allow_unauthenticated_loopback=True) == "a2a_auth_required"
    for tls in ({"trusted_tls_proxy": True}, {"tls": True}):
        check_exposure(
            "192.0.2.10",
            authenticated=True,
            allow_non_loopback=True,
            tls=bool(tls.get("tls")),
            trusted_tls_proxy=bool(tls.get("trusted_tls_proxy")),
            reasons=A2A_EXPOSURE_REASONS,
        )
    assert not {c for c in children() if str(c).startswith("a2a_")}


def test_loopback_needs_a_credential_unless_asked_not_to() -> None:
    """Serving with no token and no verifier is refused unless
    ``allow_unauthenticated_loopback=True`` on a loopback address; then every caller is
    one anonymous principal and the card declares no security."""
    assert reason() == "a2a_auth_required"
    with serve(echo_agent(), allow_unauthenticated_loopback=True) as server:
        card = httpx.get(server.card_url).json()
        assert "securitySchemes" not in card and "securityRequirements" not in card
        task = Rpc(server, token=None).result("SendMessage", {"message": message("hi")})["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"


def test_bad_options_name_their_key() -> None:
    """A short token, a hook that is not callable, an option out of bounds, half the TLS
    pair, a card that sets the URL or breaks a card rule: each refused with its reason,
    before anything starts."""
    assert reason(auth_token="short") == "a2a_auth_token_too_short"
    assert reason(verifier="not callable") == (REASON, "verifier")
    assert reason(auth_token=ALICE, port=70_000) == (REASON, "port")
    assert reason(auth_token=ALICE, max_connections=0) == (REASON, "max_connections")
    assert reason(auth_token=ALICE, callback_timeout=60.0) == (REASON, "callback_timeout")
    assert reason(auth_token=ALICE, options={"max_active": 0}) == (REASON, "max_active")
    assert reason(auth_token=ALICE, options={"nope": 1})[0] == REASON
    assert reason(auth_token=ALICE, tls_certfile="/tmp/cert.pem") == (REASON, "tls")
    assert reason(auth_token=ALICE, card={"url": "http://x"}) == (REASON, "card")
    assert reason(auth_token=ALICE, card={"unknown": 1}) == (REASON, "card")
    assert reason(auth_token=ALICE, card={"name": ""})[0] == "invalid_a2a_card"
    assert reason(auth_token=ALICE, public_url="ftp://agents.example") == (REASON, "public_url")
    assert not {c for c in children() if str(c).startswith("a2a_")}


def test_the_card_takes_overrides_and_the_public_url() -> None:
    """``card`` overrides go to the card (name, description, version); ``public_url``
    is the base of the published interface URL (a gateway in front)."""
    overrides = {"name": "Public echo", "description": "Echoes.", "version": "2.1.0"}
    with serve(
        echo_agent(),
        auth_token=ALICE,
        card=overrides,
        public_url="https://agents.example/echo/",
    ) as server:
        assert server.url == "https://agents.example/echo"
        assert server.listener_url.startswith("http://127.0.0.1:")
        card = httpx.get(server.listener_url + "/.well-known/agent-card.json").json()
        assert (card["name"], card["description"], card["version"]) == (
            "Public echo",
            "Echoes.",
            "2.1.0",
        )
        assert card["supportedInterfaces"][0]["url"] == "https://agents.example/echo/a2a/v1"


def test_tls_files_serve_https(tmp_path: Path) -> None:
    """With ``tls_certfile``/``tls_keyfile`` the server speaks HTTPS only: its URL and
    card say https, a client trusting the CA gets answers, plain HTTP gets none."""
    trust = write_test_pki(tmp_path, "ip", x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    with serve(
        echo_agent(),
        auth_token=ALICE,
        tls_certfile=str(tmp_path / "cert.pem"),
        tls_keyfile=str(tmp_path / "key.pem"),
    ) as server:
        assert server.url.startswith("https://127.0.0.1:")
        card = httpx.get(server.card_url, verify=trust).json()
        assert card["supportedInterfaces"][0]["url"] == server.url + "/a2a/v1"
        answer = httpx.post(
            server.rpc_url,
            json=envelope("SendMessage", {"message": message("secure")}),
            headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"},
            verify=trust,
        ).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        with pytest.raises(httpx.HTTPError):
            httpx.get(server.card_url.replace("https://", "http://"))


def test_stop_is_idempotent_frees_the_port_and_stops_the_store() -> None:
    """`stop` removes the listener (the port can be bound again at once, a client is
    refused) and then the task store (its name is free, its child gone); a second stop
    and leaving the ``with`` block are no-ops."""
    with serve(echo_agent(), auth_token=ALICE) as server:
        port = int(server.url.rsplit(":", 1)[1])
        assert Rpc(server).result("SendMessage", {"message": message("hi")})["task"]
        store_child = server.store.child_id
        assert whereis(server.store.name) is not None
        server.stop()
        server.stop()
        assert whereis(server.store.name) is None
        assert store_child not in children() and server.child_id not in children()
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.card_url)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_refused_and_leaves_nothing_running() -> None:
    """A port that cannot be bound is ``("a2a_server_bind_failed", errno)``; the task
    store started for it is stopped again."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        refused = reason(auth_token=ALICE, port=port)
    assert refused[0] == "a2a_server_bind_failed"
    assert not {c for c in children() if str(c).startswith("a2a_")}


def test_the_daemon_mounts_the_same_routes_with_the_developer_token(tmp_path: Path) -> None:
    """``adk serve --a2a``'s routes (`a2a_routes_for_daemon`) inside the daemon's app:
    the card is public once published, the JSON-RPC endpoint takes the developer token
    (another is 401), tasks complete, and the daemon's Host guard still applies; `close`
    stops the store."""
    token = "developer-token-0123456789abcdef"
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps({"name": "DevEcho", "provider": "scripted", "script": [{"text": "hi there"}]})
    )
    agent_file = load_agent_file(config)
    agent = adk.spawn_agent("DevEcho", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    settings = dev_settings(token_digest=token_digest(token))
    sessions = InMemorySessionService()
    mounted = a2a_routes_for_daemon(agent, agent_file, settings, sessions)
    listener = start_listener(
        build_app(DevState(settings, sessions), mounted.routes), listener_config(settings)
    )
    try:
        assert httpx.get(listener.url + "/.well-known/agent-card.json").status_code == 503
        mounted.publish(listener.url)
        card = httpx.get(listener.url + "/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"][0]["url"] == listener.url + "/a2a/v1"
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
        answer = httpx.post(
            listener.url + "/a2a/v1",
            json=envelope("SendMessage", {"message": message("daemon")}),
            headers=headers,
        ).json()
        task = answer["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        scope = principal_scope(PRINCIPAL)  # the store keeps the principal's hash only
        assert sessions.get_session(agent_file.name, scope, task["contextId"]) is not None
        streamed = httpx.post(
            listener.url + "/a2a/v1",
            json=envelope("SendStreamingMessage", {"message": message("stream")}),
            headers={**headers, "Accept": "text/event-stream"},
        )
        assert streamed.headers["content-type"].startswith("text/event-stream")
        events = sse_events(streamed.text)
        assert "task" in events[0][1]["result"]
        assert events[-1][1]["result"]["statusUpdate"]["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )
        wrong = httpx.post(
            listener.url + "/a2a/v1",
            json=envelope("GetTask", {"id": "task-x"}),
            headers={**headers, "Authorization": f"Bearer {ALICE}"},
        )
        assert wrong.status_code == 401
        misdirected = httpx.get(
            listener.url + "/.well-known/agent-card.json", headers={"Host": "evil.example"}
        )
        assert misdirected.status_code == 421
    finally:
        stop_listener(listener)
        mounted.close()
        sessions.close()
    assert "daemon_a2a_tasks" not in children()
