"""The daemon's bounds: settings and their environment, bodies, request heads,
connections and keep-alive."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from adk_actors.daemon.listener import ListenerConfig, stop_listener
from adk_actors.daemon.settings import (
    MAX_SESSION_RESULTS,
    MAX_SSE_BYTES,
    MAX_SSE_EVENTS,
    dev_settings,
    settings_from_env,
    token_digest,
)
from providers.errors import AdkError
from tests.daemon.conftest import PROBE, PROBE_ROUTES, TOKEN, DevServer, start_dev_server

ENV = {"ADK_DEV_TOKEN": TOKEN}


# -- settings --------------------------------------------------------------------------------


def test_the_defaults_are_the_specs() -> None:
    """Follows adk_dev_http_test: sse_config_validation_case (defaults)."""
    settings = settings_from_env(ENV)
    assert settings.sse_max_events == 128
    assert settings.sse_max_bytes == 1024 * 1024
    assert settings.sse_max_duration == 300.0
    assert settings.max_session_results == 100
    assert settings.max_body_bytes == 65_536
    assert settings.max_field_bytes == 4096
    assert settings.legacy_a2a is False
    assert settings.token_digest == token_digest(TOKEN)


def test_the_token_is_kept_only_as_its_digest() -> None:
    settings = settings_from_env(ENV)
    assert TOKEN not in repr(settings)
    assert TOKEN.encode() not in settings.token_digest


def test_a_missing_or_short_token_is_refused() -> None:
    for environ, reason in (
        ({}, "dev_token_required"),
        ({"ADK_DEV_TOKEN": ""}, "dev_token_required"),
    ):
        with pytest.raises(AdkError) as refused:
            settings_from_env(environ)
        assert refused.value.reason == reason
    with pytest.raises(AdkError) as short:
        settings_from_env({"ADK_DEV_TOKEN": "x" * 15})
    assert short.value.reason == "dev_token_too_short"
    assert settings_from_env({"ADK_DEV_TOKEN": "x" * 16}).token_digest == token_digest("x" * 16)


@pytest.mark.parametrize("token", ["with a space-0123456", "tab\tinside-0123456", "é" * 16])
def test_a_token_that_cannot_travel_in_a_header_is_refused(token: str) -> None:
    with pytest.raises(AdkError) as refused:
        settings_from_env({"ADK_DEV_TOKEN": token})
    assert refused.value.reason == "dev_token_invalid"
    assert token not in str(refused.value)


@pytest.mark.parametrize(
    ("name", "raw", "key", "value"),
    [
        ("ADK_DEV_SSE_MAX_EVENTS", "10000", "sse_max_events", 10_000),
        ("ADK_DEV_SSE_MAX_BYTES", str(MAX_SSE_BYTES), "sse_max_bytes", MAX_SSE_BYTES),
        ("ADK_DEV_SSE_MAX_DURATION_MS", "1500", "sse_max_duration", 1.5),
        ("ADK_DEV_MAX_SESSION_RESULTS", "1000", "max_session_results", 1000),
        ("ADK_DEV_DRAIN_GRACE_MS", "0", "drain_grace", 0.0),
        ("ADK_DEV_SSE_MAX_EVENTS", " 7 ", "sse_max_events", 7),
    ],
)
def test_the_environment_sets_the_bounds(name: str, raw: str, key: str, value: object) -> None:
    assert getattr(settings_from_env({**ENV, name: raw}), key) == value


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("ADK_DEV_SSE_MAX_EVENTS", "0"),
        ("ADK_DEV_SSE_MAX_EVENTS", "-1"),
        ("ADK_DEV_SSE_MAX_EVENTS", str(MAX_SSE_EVENTS + 1)),
        ("ADK_DEV_SSE_MAX_BYTES", "0"),
        ("ADK_DEV_SSE_MAX_BYTES", str(MAX_SSE_BYTES + 1)),
        ("ADK_DEV_SSE_MAX_DURATION_MS", "0"),
        ("ADK_DEV_SSE_MAX_DURATION_MS", "3600001"),
        ("ADK_DEV_MAX_SESSION_RESULTS", "0"),
        ("ADK_DEV_MAX_SESSION_RESULTS", str(MAX_SESSION_RESULTS + 1)),
        ("ADK_DEV_DRAIN_GRACE_MS", "-5"),
        ("ADK_DEV_DRAIN_GRACE_MS", "600001"),
        ("ADK_DEV_SSE_MAX_EVENTS", "1.5"),
        ("ADK_DEV_SSE_MAX_EVENTS", "12abc"),
        ("ADK_DEV_SSE_MAX_EVENTS", ""),
        ("ADK_DEV_SSE_MAX_EVENTS", "1_000"),
        ("ADK_DEV_SSE_MAX_EVENTS", "9" * 40),
        ("ADK_LEGACY_A2A", "yes"),
        ("ADK_LEGACY_A2A", "true"),
    ],
)
def test_a_bad_environment_value_names_its_variable(name: str, raw: str) -> None:
    """Follows adk_dev_http_test: sse_config_validation_case (zero and above the
    ceiling are refused)."""
    with pytest.raises(AdkError) as refused:
        settings_from_env({**ENV, name: raw})
    assert refused.value.reason == ("invalid_dev_setting", name)
    assert name in str(refused.value.detail)


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "ADK_DEV_SSE_MAX_DURATION_MS",
            "3600001",
            "ADK_DEV_SSE_MAX_DURATION_MS is an integer from 1 to 3600000 (milliseconds)",
        ),
        (
            "ADK_DEV_SSE_MAX_DURATION_MS",
            "0",
            "ADK_DEV_SSE_MAX_DURATION_MS is an integer from 1 to 3600000 (milliseconds)",
        ),
        (
            "ADK_DEV_DRAIN_GRACE_MS",
            "600001",
            "ADK_DEV_DRAIN_GRACE_MS is an integer from 0 to 600000 (milliseconds)",
        ),
        (
            "ADK_DEV_SSE_MAX_EVENTS",
            str(MAX_SSE_EVENTS + 1),
            "ADK_DEV_SSE_MAX_EVENTS is an integer from 1 to 10000",
        ),
        (
            "ADK_DEV_RUN_OPTIONS",
            '{"retention": 86401}',
            "ADK_DEV_RUN_OPTIONS.retention is a number greater than 0 and at most 86400 (seconds)",
        ),
    ],
)
def test_an_over_cap_value_is_reported_in_its_variables_unit(
    name: str, raw: str, message: str
) -> None:
    """The message names the variable and its bounds in the variable's unit (never the
    setting's seconds or its field name: ``Expected float <= 3600.0 - at
    $.sse_max_duration``)."""
    with pytest.raises(AdkError) as refused:
        settings_from_env({**ENV, name: raw})
    assert refused.value.detail == message
    assert "$." not in message


def test_run_options_come_from_json() -> None:
    raw = json.dumps({"max_buffered_events": 32, "retention": 5})
    settings = settings_from_env({**ENV, "ADK_DEV_RUN_OPTIONS": raw})
    assert settings.run_max_buffered_events == 32
    assert settings.run_retention == 5.0


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ("not json", "ADK_DEV_RUN_OPTIONS"),
        ("[1, 2]", "ADK_DEV_RUN_OPTIONS"),
        ('{"retention_ms": 5}', "ADK_DEV_RUN_OPTIONS"),
        ('{"retention": 0}', "ADK_DEV_RUN_OPTIONS.retention"),
        ('{"retention": -1}', "ADK_DEV_RUN_OPTIONS.retention"),
        ('{"retention": true}', "ADK_DEV_RUN_OPTIONS.retention"),
        ('{"retention": "5"}', "ADK_DEV_RUN_OPTIONS.retention"),
        ('{"max_buffered_events": 0}', "ADK_DEV_RUN_OPTIONS.max_buffered_events"),
        ('{"max_buffered_events": 2.5}', "ADK_DEV_RUN_OPTIONS.max_buffered_events"),
        ('{"max_buffered_events": 100001}', "ADK_DEV_RUN_OPTIONS.max_buffered_events"),
        ('{"retention": NaN}', "ADK_DEV_RUN_OPTIONS"),
        ('{"retention": 1e999}', "ADK_DEV_RUN_OPTIONS"),
        ('{"retention": 5, "retention": 6}', "ADK_DEV_RUN_OPTIONS"),
    ],
)
def test_bad_run_options_are_refused(raw: str, where: str) -> None:
    with pytest.raises(AdkError) as refused:
        settings_from_env({**ENV, "ADK_DEV_RUN_OPTIONS": raw})
    assert refused.value.reason == ("invalid_dev_setting", where)


def test_legacy_is_off_unless_enabled() -> None:
    assert settings_from_env({**ENV, "ADK_LEGACY_A2A": "0"}).legacy_a2a is False
    assert settings_from_env({**ENV, "ADK_LEGACY_A2A": "1"}).legacy_a2a is True


def test_keyword_settings_are_checked_too() -> None:
    digest = token_digest(TOKEN)
    for values in (
        {"sse_max_events": 0},
        {"max_body_bytes": -1},
        {"max_field_bytes": 70_000},  # more than max_body_bytes
        {"request_timeout": 0},
        {"no_such_setting": 1},
    ):
        with pytest.raises(AdkError) as refused:
            dev_settings(token_digest=digest, **values)
        assert refused.value.reason[0] == "invalid_dev_setting"
    with pytest.raises(AdkError):
        dev_settings(token_digest=b"short")


# -- request bodies on a JSON route ----------------------------------------------------------


@pytest.fixture
def small_server() -> Iterator[DevServer]:
    """The probe route with a 256-byte body limit."""
    server, listener = start_dev_server(
        extra_routes=PROBE_ROUTES, max_body_bytes=256, max_field_bytes=64
    )
    yield server
    server.client.close()
    stop_listener(listener)


def test_a_json_body_is_read(small_server: DevServer) -> None:
    response = small_server.client.post(PROBE, json={"a": 1})
    assert response.status_code == 200
    assert response.json() == {"echo": {"a": 1}}


def test_a_body_that_is_not_json_is_415(small_server: DevServer) -> None:
    response = small_server.client.post(
        PROBE, content=b"{}", headers={"content-type": "text/plain"}
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    missing = small_server.client.post(PROBE, content=b"{}")
    assert missing.status_code == 415


def test_a_body_past_the_limit_is_413(small_server: DevServer) -> None:
    response = small_server.client.post(PROBE, json={"a": "x" * 300})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_a_chunked_body_past_the_limit_is_413(small_server: DevServer) -> None:
    """No Content-Length: the limit applies while reading."""

    def chunks() -> Iterator[bytes]:
        yield b'{"a": "'
        for _ in range(10):
            yield b"x" * 100
        yield b'"}'

    response = small_server.client.post(
        PROBE, content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


@pytest.mark.parametrize("body", [b"{", b"[1]", b'"text"', b"\xff\xfe", b""])
def test_a_body_that_is_not_a_json_object_is_400(small_server: DevServer, body: bytes) -> None:
    response = small_server.client.post(
        PROBE, content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def _nested(depth: int) -> bytes:
    """A body object holding arrays nested `depth` deep in all (the object is level 1)."""
    return b'{"a": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": -Infinity}',
        b'{"a": 1e999}',
        b'{"a": [1, -1e400]}',
        b'{"a": 1, "a": 2}',
        b'{"a": {"b": 1, "b": 1}}',
        _nested(65),
        b'{"a": ' + b"[" * 60_000 + b"}",  # past the recursion limit: never a 500
        b"\xef\xbb\xbf{}",  # a byte order mark
        '{"a": "\u00e9"}'.encode("utf-16"),
    ],
)
def test_a_body_that_is_not_strict_json_is_400(probe_server: DevServer, body: bytes) -> None:
    """The config file's strict parser: no NaN or infinity, no duplicate key, at most 64
    levels deep, UTF-8 only."""
    response = probe_server.client.post(
        PROBE, content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_a_body_64_levels_deep_is_read(probe_server: DevServer) -> None:
    response = probe_server.client.post(
        PROBE, content=_nested(64), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert json.dumps(response.json()["echo"], separators=(",", ":")).count("[") == 63


def test_the_run_route_applies_the_body_bounds(small_server: DevServer) -> None:
    """The same refusals on the real ``POST /dev/v1/runs``."""
    client = small_server.client
    assert client.post("/dev/v1/runs", content=b"{}").status_code == 415
    assert client.post("/dev/v1/runs", json={"message": "x" * 300}).status_code == 413
    bad = client.post("/dev/v1/runs", content=b"{", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert client.get("/dev/v1/runs").status_code == 405


# -- request heads, connections, keep-alive -------------------------------------------------------


def _port(server: DevServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _raw(server: DevServer, request: bytes) -> bytes:
    """All the server says to `request` on a fresh connection, until it closes it (at
    once after a refusal, after the keep-alive timeout otherwise)."""
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=10) as conn:
        try:
            conn.sendall(request)
        except OSError:
            pass  # it may refuse before reading everything
        answer = b""
        while True:
            try:
                data = conn.recv(65_536)
            except OSError:
                return answer
            if not data:
                return answer
            answer += data


def _head(server: DevServer, headers: int, size: int) -> bytes:
    lines = b"".join(b"x-h%d: %s\r\n" % (index, b"a" * size) for index in range(headers))
    return _request_line(server) + lines + b"\r\n"


def _request_line(server: DevServer) -> bytes:
    """The probe's request line and the Host header the guards accept."""
    return b"GET %s HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n" % (PROBE.encode(), _port(server))


@pytest.fixture
def tight_server() -> Iterator[DevServer]:
    """The probe route on a listener with small head bounds and short timeouts."""
    config = ListenerConfig(
        max_head_bytes=4096,
        max_headers=20,
        head_timeout=0.5,
        keepalive_timeout=0.5,
    )
    server, listener = start_dev_server(extra_routes=PROBE_ROUTES, listener_config=config)
    yield server
    server.client.close()
    stop_listener(listener)


def test_a_head_within_the_bounds_is_served(tight_server: DevServer) -> None:
    answer = _raw(tight_server, _head(tight_server, 10, 100))
    assert answer.startswith(b"HTTP/1.1 401")  # served: the guards answered (no token)


@pytest.mark.parametrize(("headers", "size"), [(30, 10), (1, 5000), (1, 1_000_000)])
def test_a_head_past_the_bounds_is_431(tight_server: DevServer, headers: int, size: int) -> None:
    answer = _raw(tight_server, _head(tight_server, headers, size))
    assert answer.startswith(b"HTTP/1.1 431")
    assert b"request_header_fields_too_large" in answer


def test_an_unfinished_head_is_408_after_the_head_timeout(tight_server: DevServer) -> None:
    answer = _raw(tight_server, _request_line(tight_server))
    assert answer.startswith(b"HTTP/1.1 408")


def test_a_silent_connection_is_closed(tight_server: DevServer) -> None:
    assert _raw(tight_server, b"") == b""


def test_an_idle_keepalive_connection_is_closed(tight_server: DevServer) -> None:
    with socket.create_connection(("127.0.0.1", _port(tight_server)), timeout=10) as conn:
        conn.sendall(_head(tight_server, 1, 10))
        first = conn.recv(65_536)
        assert first.startswith(b"HTTP/1.1 401")
        rest = b""
        while data := conn.recv(65_536):  # the server closes it after keepalive_timeout
            rest += data
    assert b"HTTP/1.1" not in rest


def test_connections_past_the_limit_get_503() -> None:
    """uvicorn counts the connection asking too: max_connections=3 leaves room for two
    others. Once they close, requests are served again."""
    config = ListenerConfig(max_connections=3, head_timeout=60.0)
    server, listener = start_dev_server(extra_routes=PROBE_ROUTES, listener_config=config)
    try:
        held = [
            socket.create_connection(("127.0.0.1", _port(server)), timeout=10) for _ in range(2)
        ]
        try:
            with _client(server) as client:
                refused = client.get(PROBE)
            assert refused.status_code == 503
            # the API's typed error body, not uvicorn's text/plain "Service Unavailable"
            assert refused.headers["content-type"] == "application/json"
            assert refused.json()["error"]["code"] == "too_many_connections"
            assert refused.headers["retry-after"] == "1"
            assert refused.headers["connection"] == "close"
            assert refused.headers["cache-control"] == "no-store"
        finally:
            for conn in held:
                conn.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the server notices the closes on its own time
            with _client(server) as client:
                if client.get(PROBE).status_code == 200:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("never served again after the connections closed")
    finally:
        server.client.close()
        stop_listener(listener)


def _client(server: DevServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.client.headers, timeout=10)
