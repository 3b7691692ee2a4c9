"""The guards in front of every route: loopback Host, bearer token, same origin, drain,
errors.

Real uvicorn on a loopback port, real httpx clients; the probe route (conftest) stands
for any /dev/v1 route, and one test checks a real one (``/dev/v1/agents``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import Message, Scope
from starlette.websockets import WebSocket

import adk_actors as adk
from adk_actors.daemon import auth
from adk_actors.daemon.app import build_app
from adk_actors.daemon.listener import stop_listener
from adk_actors.daemon.settings import dev_settings, token_digest
from adk_actors.daemon.state import DevState
from tests.daemon.conftest import PROBE, PROBE_ROUTES, TOKEN, DevServer, start_dev_server


def _error(response: httpx.Response) -> str:
    code: str = response.json()["error"]["code"]
    return code


def _get(server: DevServer, path: str = PROBE, **headers: str) -> httpx.Response:
    with server.anonymous() as client:
        return client.get(path, headers=headers)


# -- the bearer token ----------------------------------------------------------------------


def test_no_token_is_401_with_a_bearer_challenge(probe_server: DevServer) -> None:
    """Follows adk_dev_http_test: auth_case (missing header)."""
    response = _get(probe_server)
    assert response.status_code == 401
    assert _error(response) == "unauthorized"
    assert response.headers["www-authenticate"] == 'Bearer realm="adk_dev"'
    assert response.headers["cache-control"] == "no-store"


def test_the_right_token_is_served(probe_server: DevServer) -> None:
    response = probe_server.client.get(PROBE)
    assert response.status_code == 200
    assert response.json() == {"ok": True}


def test_a_wrong_token_is_403(probe_server: DevServer) -> None:
    """Follows adk_dev_http_test: auth_case (wrong token -> forbidden)."""
    response = _get(probe_server, authorization="Bearer wrong-token-value")
    assert response.status_code == 403
    assert _error(response) == "forbidden"
    assert TOKEN not in response.text


@pytest.mark.parametrize("name", ["access_token", "token", "bearer", "auth"])
def test_a_token_in_the_query_alone_never_authenticates(probe_server: DevServer, name: str) -> None:
    """Follows adk_dev_http_test: auth_case (a URI token is never an authentication
    channel)."""
    response = _get(probe_server, f"{PROBE}?{name}={TOKEN}")
    assert response.status_code == 401
    assert _error(response) == "unauthorized"


def test_a_token_in_the_query_is_ignored_beside_the_header(probe_server: DevServer) -> None:
    """As the reference: the query is never read, so the header alone decides (a wrong
    token in the query does not spoil a right header, a right one does not save a
    wrong header)."""
    right = probe_server.client.get(f"{PROBE}?access_token=wrong-token-value")
    assert right.status_code == 200
    wrong = _get(probe_server, f"{PROBE}?access_token={TOKEN}", authorization="Bearer nope-nope")
    assert wrong.status_code == 403


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_the_scheme_is_case_insensitive(probe_server: DevServer, scheme: str) -> None:
    response = _get(probe_server, authorization=f"{scheme} {TOKEN}")
    assert response.status_code == 200


@pytest.mark.parametrize("header", [f"Basic {TOKEN}", TOKEN, "Bearer", f"Token {TOKEN}"])
def test_another_scheme_or_no_credential_is_401(probe_server: DevServer, header: str) -> None:
    """Follows adk_dev_http_test: auth_case (``Basic`` -> unauthorized)."""
    response = _get(probe_server, authorization=header)
    assert response.status_code == 401
    assert _error(response) == "unauthorized"


@pytest.mark.parametrize("candidate", [f" {TOKEN}", f"{TOKEN} extra", f"{TOKEN}\tx"])
def test_a_credential_with_whitespace_is_403(probe_server: DevServer, candidate: str) -> None:
    response = _get(probe_server, authorization=f"Bearer {candidate}")
    assert response.status_code == 403


def test_a_prefix_of_the_token_is_403(probe_server: DevServer) -> None:
    response = _get(probe_server, authorization=f"Bearer {TOKEN[:-1]}")
    assert response.status_code == 403


def test_only_the_digest_is_compared() -> None:
    digest = token_digest(TOKEN)
    headers = [(b"authorization", f"Bearer {TOKEN}".encode())]
    assert auth.authorize(headers, digest) == "ok"
    assert auth.authorize(headers, token_digest("another-token-0123456789")) == "forbidden"
    assert auth.authorize([], digest) == "unauthorized"
    assert auth.authorize([(b"authorization", b"Bearer ")], digest) == "unauthorized"


def test_the_guards_cover_the_real_routes(probe_server: DevServer) -> None:
    assert _get(probe_server, "/dev/v1/agents").status_code == 401
    assert probe_server.client.get("/dev/v1/agents").status_code == 200


# -- the same-origin check -----------------------------------------------------------------


def test_a_foreign_origin_is_403(probe_server: DevServer) -> None:
    """Follows adk_dev_http_test: auth_case (bad origin -> forbidden, token right)."""
    for origin in ("https://attacker.invalid", "null", "http://localhost:1", "file://"):
        response = probe_server.client.get(PROBE, headers={"origin": origin})
        assert response.status_code == 403, origin
        assert _error(response) == "forbidden"


def test_the_same_origin_is_served(probe_server: DevServer) -> None:
    response = probe_server.client.get(PROBE, headers={"origin": probe_server.url})
    assert response.status_code == 200
    upper = probe_server.client.get(PROBE, headers={"origin": probe_server.url.upper()})
    assert upper.status_code == 200


def test_another_port_is_another_origin(probe_server: DevServer) -> None:
    host, port = probe_server.url.rsplit(":", 1)
    response = probe_server.client.get(PROBE, headers={"origin": f"{host}:{int(port) + 1}"})
    assert response.status_code == 403


def test_a_same_origin_without_the_token_is_still_401(probe_server: DevServer) -> None:
    response = _get(probe_server, origin=probe_server.url)
    assert response.status_code == 401


def test_same_origin_needs_one_origin_and_one_host() -> None:
    assert auth.same_origin("http", [(b"host", b"127.0.0.1:1")])
    assert auth.same_origin("http", [(b"host", b"a:1"), (b"origin", b"http://a:1")])
    assert not auth.same_origin("http", [(b"origin", b"http://a:1")])
    assert not auth.same_origin("https", [(b"host", b"a:1"), (b"origin", b"http://a:1")])
    two = [(b"host", b"a:1"), (b"origin", b"http://a:1"), (b"origin", b"http://a:1")]
    assert not auth.same_origin("http", two)


def test_a_forwarded_proto_does_not_change_the_origin_check(probe_server: DevServer) -> None:
    """uvicorn's proxy headers are off: every client is local, so any of them could
    claim ``X-Forwarded-Proto: https`` and pass as an https origin."""
    forwarded = {"x-forwarded-proto": "https"}
    https = probe_server.url.replace("http://", "https://")
    spoofed = probe_server.client.get(PROBE, headers={**forwarded, "origin": https})
    assert spoofed.status_code == 403
    real = probe_server.client.get(PROBE, headers={**forwarded, "origin": probe_server.url})
    assert real.status_code == 200


@pytest.mark.parametrize("path", ["/dev", "/dev/no-such-asset"])
def test_a_foreign_origin_is_403_off_the_api_too(probe_server: DevServer, path: str) -> None:
    response = _get(probe_server, path, origin="https://attacker.invalid")
    assert response.status_code == 403
    assert _error(response) == "forbidden"


# -- the Host header (DNS rebinding) -------------------------------------------------------


def _port(server: DevServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]"])
def test_a_loopback_host_with_the_port_is_served(probe_server: DevServer, name: str) -> None:
    host = f"{name}:{_port(probe_server)}"
    assert probe_server.client.get(PROBE, headers={"host": host}).status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1",
        "localhost",
        "127.0.0.1:{other}",
        "127.0.0.2:{port}",
        "localhost.:{port}",
        "127.0.0.1:{port}.evil.example",
        "",
    ],
)
@pytest.mark.parametrize("path", [PROBE, "/dev", "/dev/v1/agents"])
def test_any_other_host_is_421_on_every_path(probe_server: DevServer, host: str, path: str) -> None:
    """A page that reaches the daemon by DNS rebinding sends its own host name: no
    route answers it, with or without the token."""
    port = _port(probe_server)
    header = host.format(port=port, other=port + 1)
    response = probe_server.client.get(path, headers={"host": header})
    assert response.status_code == 421
    assert _error(response) == "misdirected_request"
    assert response.headers["connection"] == "close"


def test_the_host_check_reads_one_host_header() -> None:
    ok = [(b"host", b"localhost:8080")]
    assert auth.loopback_host(ok, 8080)
    assert not auth.loopback_host(ok * 2, 8080)
    assert not auth.loopback_host([], 8080)
    assert auth.loopback_host([(b"host", b"127.0.0.1")], 80)  # the default port left out
    assert not auth.loopback_host([(b"host", b"127.0.0.1")], 8080)


# -- what needs no token -------------------------------------------------------------------


def test_the_console_page_needs_no_token(probe_server: DevServer) -> None:
    assert _get(probe_server, "/dev").status_code == 200


# -- the error body, 404, 405 and the headers of every answer ---------------------------------


def test_an_unknown_api_path_is_a_json_404(probe_server: DevServer) -> None:
    response = probe_server.client.get("/dev/v1/no-such-thing")
    assert response.status_code == 404
    assert _error(response) == "not_found"
    assert response.headers["cache-control"] == "no-store"


def test_an_unknown_api_path_without_token_is_401(probe_server: DevServer) -> None:
    """The token comes first, so an anonymous client learns nothing about routes."""
    assert _get(probe_server, "/dev/v1/no-such-thing").status_code == 401


def test_a_wrong_method_is_405_with_allow(probe_server: DevServer) -> None:
    response = probe_server.client.delete(PROBE)
    assert response.status_code == 405
    assert _error(response) == "method_not_allowed"
    assert set(response.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


def test_api_answers_carry_the_security_headers(probe_server: DevServer) -> None:
    for response in (probe_server.client.get(PROBE), _get(probe_server)):
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"


async def _explode(request: Request) -> Response:
    raise RuntimeError("secret-detail /home/me/.key")


async def _sleep(request: Request) -> Response:
    await asyncio.sleep(30)
    return Response("late")


async def _stream(request: Request) -> Response:
    async def frames() -> object:
        for index in range(4):
            yield f"data: {index}\n\n".encode()
            await asyncio.sleep(0.2)

    return StreamingResponse(frames(), media_type="text/event-stream")


@pytest.fixture
def odd_server() -> Iterator[DevServer]:
    """Routes that fail, hang, and stream past a 0.3 s request timeout."""
    routes = [
        Route("/dev/v1/explode", _explode),
        Route("/dev/v1/sleep", _sleep),
        Route("/dev/v1/stream", _stream),
        *PROBE_ROUTES,
    ]
    server, listener = start_dev_server(extra_routes=routes, request_timeout=0.3)
    yield server
    server.client.close()
    stop_listener(listener)


def test_an_unexpected_error_is_a_bare_500(odd_server: DevServer) -> None:
    response = odd_server.client.get("/dev/v1/explode")
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal_error", "message": "The request failed"}}
    assert "secret" not in response.text and "Traceback" not in response.text
    assert odd_server.client.get(PROBE).status_code == 200  # the server goes on


def test_a_request_past_its_timeout_is_503(odd_server: DevServer) -> None:
    response = odd_server.client.get("/dev/v1/sleep")
    assert response.status_code == 503
    assert _error(response) == "request_timeout"
    assert odd_server.state.requests_in_flight == 0


def test_an_event_stream_outlives_the_request_timeout(odd_server: DevServer) -> None:
    """Four frames 0.2 s apart take longer than the 0.3 s request timeout: a stream has
    its own bounds once it started."""
    with odd_server.client.stream("GET", "/dev/v1/stream") as response:
        assert response.status_code == 200
        body = b"".join(response.iter_bytes())
    assert body == b"".join(f"data: {index}\n\n".encode() for index in range(4))
    assert odd_server.state.requests_in_flight == 0


# -- draining ------------------------------------------------------------------------------


def test_draining_refuses_every_new_request(probe_server: DevServer) -> None:
    assert probe_server.client.get(PROBE).status_code == 200
    probe_server.state.start_draining()
    for path in (PROBE, "/dev", "/dev/v1/agents"):
        response = probe_server.client.get(path)
        assert response.status_code == 503, path
        assert _error(response) == "developer_api_unavailable"
        assert response.headers["connection"] == "close"
    assert _get(probe_server).status_code == 503


async def _endless(request: Request) -> Response:
    async def frames() -> object:
        yield b"data: first\n\n"
        await asyncio.sleep(3600)
        yield b"data: never\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream")


def test_the_drain_ends_open_event_streams() -> None:
    """A stream waiting for its next item ends cleanly (a complete body) as soon as the
    drain starts, so a stopping daemon does not wait for it."""
    server, listener = start_dev_server(extra_routes=[Route("/dev/v1/endless", _endless)])
    try:
        with server.client.stream("GET", "/dev/v1/endless") as response:
            assert response.status_code == 200
            chunks = response.iter_bytes()
            assert next(chunks) == b"data: first\n\n"
            assert server.state.requests_in_flight == 0  # a started stream is not counted
            server.state.start_draining()
            assert b"".join(chunks) == b""  # the body ends: no ReadTimeout, no broken chunk
    finally:
        server.client.close()
        stop_listener(listener)


@pytest.mark.parametrize(
    "path", ["/dev/v1/agents/", "/dev%2Fv1/agents", "/dev/v1%2Fagents", "/dev/v1"]
)
def test_every_spelling_of_an_api_path_is_guarded(probe_server: DevServer, path: str) -> None:
    """uvicorn decodes the path before the guards see it, as the router does."""
    assert _get(probe_server, path).status_code == 401


@pytest.mark.parametrize(
    "path", ["/dev%2Fv1/agents", "/dev/v1%2Fagents", "/dev/v1%2fprobe", "/dev/v1/probe%2F"]
)
def test_an_encoded_slash_never_reaches_a_route(probe_server: DevServer, path: str) -> None:
    """The router matches the decoded path: ``/dev/v1%2Fagents`` would be the agents
    list. With the token it is 400, without it still 401 (the guards come first)."""
    response = probe_server.client.get(path)
    assert response.status_code == 400, response.text
    assert _error(response) == "invalid_path_parameter"
    assert _get(probe_server, path).status_code == 401


# -- a WebSocket handshake (no route takes one yet; the guards apply all the same) ---------


PORT = 8080
HOST = f"127.0.0.1:{PORT}".encode()
WS_PATH = "/dev/v1/ws"


async def _accept(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.close()


def _handshake(path: str = WS_PATH, *headers: tuple[bytes, bytes]) -> list[Message]:
    """What the app sends for a WebSocket handshake on `path` with `headers`: the ASGI
    app called directly, no server (so no ``ws="none"`` to hide behind)."""
    state = DevState(
        dev_settings(token_digest=token_digest(TOKEN)),
        adk.sessions.InMemorySessionService(),
    )
    app = build_app(state, [WebSocketRoute(WS_PATH, _accept)])
    scope: Scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "http_version": "1.1",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": list(headers),
        "server": ("127.0.0.1", PORT),
        "client": ("127.0.0.1", 50000),
        "subprotocols": [],
    }
    incoming: list[Message] = [{"type": "websocket.connect"}]
    sent: list[Message] = []

    async def receive() -> Message:
        if incoming:
            return incoming.pop(0)
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


BEARER = (b"authorization", f"Bearer {TOKEN}".encode())


def test_a_websocket_with_the_token_reaches_its_route() -> None:
    sent = _handshake(WS_PATH, (b"host", HOST), BEARER)
    assert sent[0]["type"] == "websocket.accept"


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        (((b"host", HOST),), "unauthorized"),
        (((b"host", HOST), (b"authorization", b"Bearer wrong-token-0123456789")), "forbidden"),
        (((b"host", b"evil.example"), BEARER), "misdirected_request"),
        (((b"host", HOST), BEARER, (b"origin", b"http://evil.example")), "forbidden"),
        ((BEARER,), "misdirected_request"),  # no Host at all
    ],
)
def test_a_websocket_failing_a_guard_is_closed_1008(
    headers: tuple[tuple[bytes, bytes], ...], reason: str
) -> None:
    """The Host, token and Origin checks apply to a handshake as to a request: refused
    with close code 1008 (policy violation), never accepted, the route never run."""
    sent = _handshake(WS_PATH, *headers)
    assert sent == [{"type": "websocket.close", "code": 1008, "reason": reason}]


def test_a_websocket_from_the_same_origin_is_accepted() -> None:
    origin = (b"origin", b"http://" + HOST)
    assert _handshake(WS_PATH, (b"host", HOST), BEARER, origin)[0]["type"] == "websocket.accept"
