"""`adk.a2a.serve`'s HTTP binding, request by request over loopback (httpx and raw
sockets): the public card, authentication before anything else, the JSON-RPC envelope
and method rules in their order, principal scoping, and body bounds.

Follows adk_a2a_v1_http_test (well_known_and_unary_client_case,
malformed_and_legacy_rpc_case, optional_methods_return_a2a_errors_case,
version_and_auth_are_enforced_case, cross_principal_http_scope_case) and
adk_a2a_v1_auth_test (crashing_hook_fails_closed, slow_hook_is_killed,
oversized_result_fails_closed); behaviors.md §12.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest

import adk_actors as adk
from adk_actors.a2a.server import A2AServer, serve
from adk_actors.a2a.server_http import CardSlot, a2a_routes
from adk_actors.a2a.server_options import server_options
from adk_actors.a2a.tasks import start_task_store, stop_task_store
from adk_actors.serving import BearerAuth
from tests.adk_actors.a2a.conftest import (
    ALICE,
    ALICE_AGAIN,
    BOB,
    Rpc,
    echo,
    envelope,
    message,
    raw_http,
)

LEGACY_METHODS = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "agent/getAuthenticatedExtendedCard",
    "example.test/Custom",
]
PUSH_METHODS = [
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
]


def test_the_card_is_public_at_the_well_known_path(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: well_known_and_unary_client_case. The card needs no
    credential, is cacheable, names one JSON-RPC 1.0 interface at the RPC URL and
    declares the bearer scheme the endpoint requires; only GET (and HEAD) are served."""
    response = httpx.get(echo_server.card_url)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "public, max-age=300"
    card = response.json()
    assert card["supportedInterfaces"] == [
        {"url": echo_server.rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["name"] == "Echo" and card["capabilities"]["streaming"] is True
    assert card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert echo_server.card_url == echo_server.url + "/.well-known/agent-card.json"
    refused = httpx.post(echo_server.card_url, json={})
    assert refused.status_code == 405 and refused.headers["allow"] == "GET"
    head = httpx.head(echo_server.card_url)
    assert head.status_code == 200 and head.content == b""
    missing = httpx.get(echo_server.url + "/nowhere")
    assert missing.status_code == 404 and missing.json()["id"] is None


def test_send_message_answers_the_completed_task(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: well_known_and_unary_client_case. SendMessage waits
    for the task: COMPLETED, the user's message in its history, one text artifact; the
    JSON-RPC id comes back as sent (string or integer)."""
    rpc = Rpc(echo_server)
    answer = rpc.call("SendMessage", {"message": message("hello")})
    assert answer["id"] == 1 and answer["jsonrpc"] == "2.0"
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [part["text"] for part in task["artifacts"][0]["parts"]] == ["echo: hello"]
    assert task["history"][0]["parts"] == [{"text": "hello"}]
    fetched = rpc.post(envelope("GetTask", {"id": task["id"]}, request_id="get-1")).json()
    assert fetched["id"] == "get-1" and fetched["result"]["id"] == task["id"]
    assert fetched["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_authentication_comes_first(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: version_and_auth_are_enforced_case. No credential:
    401 with a bare Bearer challenge, before the version or the body are looked at; a
    refused one says invalid_token; the answer is JSON and says nothing more."""
    request = envelope("GetTask", {"id": "missing"})
    anonymous = Rpc(echo_server, token=None).post(request, version=False)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert anonymous.json()["error"]["message"] == "unauthorized"
    wrong = Rpc(echo_server, token="not-a-known-token-0123456789abcdef").post(request)
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    garbage = Rpc(echo_server, token=None).post(
        request, raw=b"{", headers={"Authorization": "Basic YWxpY2U6c2VjcmV0"}
    )
    assert garbage.status_code == 401
    get = httpx.get(echo_server.rpc_url, headers={"Authorization": f"Bearer {ALICE}"})
    assert get.status_code == 405 and get.headers["allow"] == "POST"


def test_a_missing_or_old_version_is_version_not_supported(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: version_and_auth_are_enforced_case. Without
    ``A2A-Version`` (or with 0.3) a known method is -32009 (HTTP 200); any 1.x passes."""
    rpc = Rpc(echo_server)
    params = {"id": "missing"}
    assert rpc.error_code("GetTask", params, version=False) == -32009
    assert rpc.error_code("GetTask", params, headers={"A2A-Version": "0.3"}) == -32009
    assert rpc.error_code("GetTask", params, headers={"A2A-Version": "2.0"}) == -32009
    assert rpc.error_code("GetTask", params, headers={"A2A-Version": "1.1"}) == -32001
    assert rpc.error_code("GetTask", params) == -32001


def test_malformed_requests(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: malformed_and_legacy_rpc_case. Invalid JSON is HTTP
    400 with -32700 (id null); JSON that is not a JSON-RPC 2.0 request (not an object, a
    wrong ``jsonrpc``, a missing, boolean, float or null id, non-object params, no method)
    is HTTP 400 with -32600; a non-JSON content type is 415."""
    rpc = Rpc(echo_server)
    for raw in (b"{", b"", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": NaN}'):
        parse = rpc.post(None, raw=raw)
        assert parse.status_code == 400, raw
        assert parse.json()["id"] is None, raw
        assert parse.json()["error"]["code"] == -32700, raw
        assert parse.json()["error"]["message"] == "invalid JSON payload", raw
    bad: list[Any] = [
        [envelope("GetTask", {})],
        "GetTask",
        {**envelope("GetTask", {}), "jsonrpc": "1.0"},
        {"jsonrpc": "2.0", "method": "GetTask", "params": {}},
        envelope("GetTask", {}, request_id=True),
        envelope("GetTask", {}, request_id=1.5),
        envelope("GetTask", {}, request_id=None),
        envelope("GetTask", {}, request_id="x" * 257),
        envelope("GetTask", ["missing"]),
        {"jsonrpc": "2.0", "id": 3},
        envelope("", {}),
    ]
    for body in bad:
        invalid = rpc.post(body)
        assert invalid.status_code == 400, body
        assert invalid.json()["error"]["code"] == -32600, body
    echoed = rpc.post({**envelope("GetTask", []), "id": "kept"})
    assert echoed.json()["id"] == "kept"
    plain = rpc.post(envelope("GetTask", {"id": "x"}), headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415


def test_legacy_and_unknown_methods_are_method_not_found(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: malformed_and_legacy_rpc_case and
    optional_methods_return_a2a_errors_case. With ``A2A-Version: 1.0``, the 0.3 method
    names and any other unknown method are -32601."""
    rpc = Rpc(echo_server)
    for method in LEGACY_METHODS:
        assert rpc.error_code(method, {"message": message("old")}) == -32601, method


def test_the_version_is_checked_before_the_method(echo_server: A2AServer) -> None:
    """Review F8, as the reference's dispatch_versioned: without ``A2A-Version`` (a 0.3
    client) every method, unknown, legacy, push config or extended card alike, is -32009
    with the supported versions, the error that tells the client what to change."""
    rpc = Rpc(echo_server)
    for method in [*LEGACY_METHODS, *PUSH_METHODS, "GetExtendedAgentCard", "SendMessage"]:
        answer = rpc.call(method, {}, version=False)
        assert answer["error"]["code"] == -32009, method
        assert answer["error"]["data"] == {"supportedVersions": ["1.0"]}, method
        old = rpc.call(method, {}, headers={"A2A-Version": "0.3"})
        assert old["error"]["code"] == -32009, method


def test_optional_methods_answer_their_a2a_errors(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: optional_methods_return_a2a_errors_case. Push
    notification config methods are -32003; the extended card is -32004."""
    rpc = Rpc(echo_server)
    for method in PUSH_METHODS:
        assert rpc.error_code(method, {}) == -32003, method
    assert rpc.error_code("GetExtendedAgentCard", {}) == -32004


def test_pre_1_0_parts_and_unknown_fields_are_invalid_params(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: malformed_and_legacy_rpc_case. A part with the
    0.3 ``kind`` member, an unknown member, a lower-case role or no message: -32602."""
    rpc = Rpc(echo_server)
    legacy = {
        "message": {
            "messageId": "legacy",
            "role": "ROLE_USER",
            "parts": [{"kind": "text", "text": "old"}],
        }
    }
    assert rpc.error_code("SendMessage", legacy) == -32602
    assert rpc.error_code("SendMessage", {"message": message("x"), "extra": 1}) == -32602
    assert rpc.error_code("SendMessage", {"message": {**message("x"), "role": "user"}}) == -32602
    assert rpc.error_code("SendMessage", {}) == -32602
    assert rpc.error_code("GetTask", {"id": "../etc"}) == -32602


def test_another_principals_task_is_not_found(echo_server: A2AServer) -> None:
    """Follows adk_a2a_v1_http_test: cross_principal_http_scope_case. Bob cannot get,
    cancel, subscribe to or list alice's task (-32001, the same as an unknown id); the
    store scopes by the verifier's principal, not the token: alice's second token sees it."""
    alice, bob = Rpc(echo_server, ALICE), Rpc(echo_server, BOB)
    task = alice.result("SendMessage", {"message": message("private")})["task"]
    for method in ("GetTask", "CancelTask"):
        assert bob.error_code(method, {"id": task["id"]}) == -32001
    subscribe = bob.post(
        envelope("SubscribeToTask", {"id": task["id"]}), headers={"Accept": "text/event-stream"}
    )
    assert subscribe.json()["error"]["code"] == -32001
    assert bob.result("ListTasks", {}).get("tasks", []) == []
    again = Rpc(echo_server, ALICE_AGAIN)
    assert again.result("GetTask", {"id": task["id"]})["id"] == task["id"]
    listed = again.result("ListTasks", {})["tasks"]
    assert [t["id"] for t in listed] == [task["id"]]


def test_a_static_token_is_its_own_principal() -> None:
    """With ``auth_token`` the token is checked against its digest; a verifier answering
    the static token's principal id (``auth_token``) is refused, so no verifier token can
    share the static token's tasks."""
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    static = "static-token-0123456789abcdefghij"
    with serve(agent, auth_token=static, verifier=lambda token: "auth_token") as server:
        task = Rpc(server, static).result("SendMessage", {"message": message("hi")})["task"]
        impostor = Rpc(server, "other-token-0123456789abcdefghij").post(
            envelope("GetTask", {"id": task["id"]})
        )
        assert impostor.status_code == 401


def test_a_failing_verifier_fails_closed() -> None:
    """Follows adk_a2a_v1_auth_test: crashing_hook_fails_closed, slow_hook_is_killed,
    oversized_result_fails_closed. A verifier that raises, outlives callback_timeout or
    answers something other than a bounded string id refuses the request (401); the
    server keeps serving the good tokens."""
    release = threading.Event()

    def verifier(token: str) -> Any:
        match token.split("-")[0]:
            case "raise":
                raise RuntimeError("secret detail")
            case "slow":
                release.wait(5)
                return "late"
            case "number":
                return 42
            case "huge":
                return "x" * 513
            case "empty":
                return ""
        return "ok-principal"

    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    try:
        with serve(agent, verifier=verifier, callback_timeout=0.2) as server:
            for kind in ("raise", "slow", "number", "huge", "empty"):
                refused = Rpc(server, f"{kind}-token-0123456789abcdef").post(
                    envelope("GetTask", {"id": "missing"})
                )
                assert refused.status_code == 401, kind
                assert "secret" not in refused.text
            good = Rpc(server, "good-token-0123456789abcdef")
            assert good.error_code("GetTask", {"id": "missing"}) == -32001
    finally:
        release.set()


def test_a_body_past_the_bound_is_413() -> None:
    """``max_input_bytes`` bounds the request body: a larger one is 413 (a declared
    Content-Length past it is refused before the body is read); one at the bound passes
    to the JSON-RPC checks."""
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with serve(agent, auth_token=ALICE, options={"max_input_bytes": 2048}) as server:
        rpc = Rpc(server)
        big = envelope("SendMessage", {"message": message("x" * 4096)})
        assert rpc.post(big).status_code == 413
        padded = json.dumps(envelope("GetTask", {"id": "missing"}))
        at_bound = padded + " " * (2048 - len(padded))
        assert rpc.error_code("GetTask", None, raw=at_bound.encode()) == -32001
        port = int(server.url.rsplit(":", 1)[1])
        head = (
            f"POST /a2a/v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ALICE}\r\n"
            "A2A-Version: 1.0\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000000000\r\n\r\n"
        ).encode()
        answer = raw_http(port, head)
        assert answer.startswith(b"HTTP/1.1 413 ")
        chunked = (
            f"POST /a2a/v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ALICE}\r\n"
            "A2A-Version: 1.0\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            + "".join(f"400\r\n{'x' * 1024}\r\n" for _ in range(4))
            + "0\r\n\r\n"
        ).encode()
        assert raw_http(port, chunked).startswith(b"HTTP/1.1 413 ")


def test_a_message_past_the_message_bound_is_invalid_params() -> None:
    """A message larger than ``max_message_bytes`` (within the body bound) is -32602 and
    starts no task."""
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    with serve(agent, auth_token=ALICE, options={"max_message_bytes": 1024}) as server:
        rpc = Rpc(server)
        assert rpc.error_code("SendMessage", {"message": message("y" * 2048)}) == -32602
        assert rpc.result("ListTasks", {}).get("tasks", []) == []


@pytest.mark.parametrize("accept", ["application/json", "text/html, application/xml"])
def test_a_stream_needs_an_sse_accept(echo_server: A2AServer, accept: str) -> None:
    """A streaming method with an Accept that refuses text/event-stream is -32004, as the
    reference's stream_method_requires_sse; no task is started."""
    rpc = Rpc(echo_server)
    params = {"message": message("hi")}
    assert rpc.error_code("SendStreamingMessage", params, headers={"Accept": accept}) == -32004
    assert rpc.result("ListTasks", {}).get("tasks", []) == []


def test_json_is_read_strictly(echo_server: A2AServer) -> None:
    """Review W3 and W4 (through `wire.loads`): a member name twice in one object (the
    role smuggled past a first-wins gateway) and a UTF-16 body are -32700 (HTTP 400), and
    neither starts a task."""
    rpc = Rpc(echo_server)
    text = json.dumps(envelope("SendMessage", {"message": message("dup")}))
    twice = text.replace('"role": "ROLE_USER"', '"role": "ROLE_AGENT", "role": "ROLE_USER"')
    assert twice != text
    utf16 = text.encode("utf-16")
    for raw in (twice.encode(), utf16):
        refused = rpc.post(None, raw=raw)
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32700
    assert rpc.result("ListTasks", {})["tasks"] == []


def test_list_tasks_always_has_its_required_members(echo_server: A2AServer) -> None:
    """Review W2: the 1.0 proto marks ``tasks``, ``nextPageToken``, ``pageSize`` and
    ``totalSize`` REQUIRED; they are sent at their defaults too (an empty page, the last
    page), as the SDK's server sends them."""
    rpc = Rpc(echo_server)
    assert rpc.result("ListTasks", {}) == {
        "tasks": [],
        "nextPageToken": "",
        "pageSize": 50,
        "totalSize": 0,
    }
    rpc.result("SendMessage", {"message": message("one")})
    page = rpc.result("ListTasks", {})
    assert page["nextPageToken"] == "" and page["totalSize"] == 1 and page["pageSize"] == 50
    assert len(page["tasks"]) == 1


def test_an_accept_with_zero_quality_refuses_a_stream(echo_server: A2AServer) -> None:
    """Review F11: ``Accept: text/event-stream;q=0`` refuses SSE (RFC 9110 quality 0),
    so a streaming method is -32004; any other quality accepts it."""
    rpc = Rpc(echo_server)
    params = {"message": message("hi")}
    for accept in ("text/event-stream;q=0", "text/event-stream; q=0.000, application/json"):
        headers = {"Accept": accept}
        assert rpc.error_code("SendStreamingMessage", params, headers=headers) == -32004
    response, events = rpc.stream(
        "SendStreamingMessage", params, headers={"Accept": "text/event-stream;q=0.5"}
    )
    assert response.status_code == 200 and "task" in events[0][1]["result"]


def _endpoint(server_routes: list[Any]) -> Any:
    return next(route.app for route in server_routes if route.path == "/a2a/v1")


def _scope(headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/a2a/v1",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


def test_body_reading_refuses_a_bad_length_and_drops_a_cut_body() -> None:
    """Review F4 (the ASGI messages uvicorn would hand over): a non-numeric
    ``Content-Length`` is HTTP 400 -32600 (not 413); a client that leaves mid-body (a
    complete JSON request in what arrived) gets no answer and starts no task."""
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo, inline=True)})
    store = start_task_store(agent, server_options(None), child_id="a2a_body_tasks")
    auth = BearerAuth(auth_token=ALICE, verifier=None, callback_timeout=1.0)
    endpoint = _endpoint(a2a_routes(store, CardSlot(), auth, server_options(None)))
    headers = {
        "Authorization": f"Bearer {ALICE}",
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
    }
    body = json.dumps(envelope("SendMessage", {"message": message("cut")})).encode() + b" "

    async def exchange(scope: dict[str, Any], messages: list[dict[str, Any]]) -> list[Any]:
        sent: list[Any] = []
        queue = list(messages)

        async def receive() -> dict[str, Any]:
            return queue.pop(0)

        async def send(message: Any) -> None:
            sent.append(message)

        await endpoint(scope, receive, send)
        return sent

    try:
        length = {**headers, "Content-Length": "12abc"}
        sent = asyncio.run(exchange(_scope(length), [{"type": "http.request", "body": body}]))
        assert sent[0]["status"] == 400
        assert json.loads(sent[1]["body"])["error"]["code"] == -32600
        cut = {**headers, "Content-Length": str(len(body) + 100)}
        messages: list[dict[str, Any]] = [
            {"type": "http.request", "body": body, "more_body": True},
            {"type": "http.disconnect"},
        ]
        assert asyncio.run(exchange(_scope(cut), messages)) == []
        assert store.stats()["tasks"] == 0
    finally:
        stop_task_store(store)
