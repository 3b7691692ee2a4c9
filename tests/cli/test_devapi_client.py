"""The developer-API client: loopback-only plain HTTP, the token only in the header, no
redirects, bounded answers, and a structured error when nothing listens.

Follows adk_cli_test: option_and_url_validation_case (insecure_non_loopback_base_url),
developer_connection_failure_is_structured_case (developer_api_unavailable with
connection_refused), oversized_chunked_developer_success_is_bounded_case and
oversized_chunked_developer_error_is_bounded_case.
"""

from __future__ import annotations

import json

import pytest

from adk_actors.cli.devapi import MAX_RESPONSE_BYTES, api_path, check_base_url
from adk_actors.cli.output import CliError
from tests.cli.conftest import DEV_TOKEN, base_env, run_adk

ENV = base_env(ADK_DEV_TOKEN=DEV_TOKEN)


def failure(*args: str, env=ENV, exit_code: int = 1) -> dict:
    done = run_adk(*args, "--json", env=env)
    assert done.returncode == exit_code, (done.stdout, done.stderr)
    assert done.stdout == ""
    error = json.loads(done.stderr)
    assert DEV_TOKEN not in done.stderr
    return error


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("http://127.0.0.2:9", "http://127.0.0.2:9"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("https://adk.example.com/base", "https://adk.example.com/base"),
    ],
)
def test_accepted_base_urls(url, expected):
    assert check_base_url(url) == expected


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://example.com:8080", "insecure_non_loopback_base_url"),
        ("http://10.0.0.1", "insecure_non_loopback_base_url"),
        ("http://0.0.0.0:8080", "insecure_non_loopback_base_url"),
        ("ftp://127.0.0.1", "invalid_base_url"),
        ("http://user:pw@127.0.0.1:8080", "invalid_base_url"),
        ("http://127.0.0.1:8080/?token=x", "invalid_base_url"),
        ("http://127.0.0.1:8080/#frag", "invalid_base_url"),
        ("http://127.0.0.1:99999", "invalid_base_url"),
        ("127.0.0.1:8080", "invalid_base_url"),
    ],
)
def test_refused_base_urls(url, code):
    with pytest.raises(CliError) as caught:
        check_base_url(url)
    assert (caught.value.reason, caught.value.exit_code) == (code, 2)


def test_nothing_listening_is_developer_api_unavailable_connection_refused(refused_url):
    """Follows adk_cli_test: developer_connection_failure_is_structured_case."""
    error = failure("inspect", "agents", "--url", refused_url)
    assert (error["reason"], error["details"]) == (
        "developer_api_unavailable",
        ["connection_refused"],
    )
    human = run_adk("inspect", "agents", "--url", refused_url, env=ENV)
    assert human.returncode == 1
    assert "developer_api_unavailable" in human.stderr and "connection_refused" in human.stderr


def test_plain_http_to_a_non_loopback_host_is_refused_before_any_request():
    """Follows adk_cli_test: option_and_url_validation_case."""
    error = failure("inspect", "run", "run-1", "--url", "http://example.invalid", exit_code=2)
    assert error["reason"] == "insecure_non_loopback_base_url"


def test_the_token_comes_only_from_the_environment():
    error = failure("inspect", "agents", env=base_env(), exit_code=2)
    assert error["reason"] == "missing_developer_token"


def test_the_token_goes_only_in_the_authorization_header(raw_http):
    body = b'{"agents": [{"name": "A"}], "total": 1}'
    server = raw_http(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (len(body), body)
    )
    done = run_adk("inspect", "agents", "--url", server.url, "--json", env=ENV)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"agents": [{"name": "A"}], "total": 1}
    request = server.requests[0].decode()
    request_line, headers = request.split("\r\n", 1)
    assert request_line == "GET /dev/v1/agents HTTP/1.1"
    fields = dict(line.split(": ", 1) for line in headers.strip().split("\r\n"))
    assert {name.lower(): value for name, value in fields.items()}["authorization"] == (
        f"Bearer {DEV_TOKEN}"
    )
    assert request.count(DEV_TOKEN) == 1


def test_redirects_are_not_followed(raw_http):
    server = raw_http(
        b"HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/elsewhere\r\n"
        b"content-length: 0\r\nconnection: close\r\n\r\n"
    )
    error = failure("inspect", "agents", "--url", server.url)
    assert (error["reason"], error["details"][0]) == ("developer_api_http_error", 302)
    assert len(server.requests) == 1


def test_an_http_error_carries_the_servers_redacted_error(raw_http):
    body = json.dumps(
        {"error": {"code": "run_not_found", "message": "no such run", "token": "leaked-value"}}
    ).encode()
    server = raw_http(
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (len(body), body)
    )
    error = failure("inspect", "run", "run-x", "--url", server.url)
    assert error["reason"] == "developer_api_http_error"
    status, body = error["details"]
    assert (status, body["code"]) == (404, "run_not_found")
    assert "leaked-value" not in json.dumps(error)


def _chunked(status: bytes):
    def respond():
        yield (
            b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        chunk = b"x" * 65536
        for _ in range(MAX_RESPONSE_BYTES // len(chunk) + 2):
            yield b"%x\r\n%s\r\n" % (len(chunk), chunk)
        yield b"0\r\n\r\n"

    return respond


def test_an_oversized_success_is_bounded(raw_http):
    """Follows adk_cli_test: oversized_chunked_developer_success_is_bounded_case."""
    server = raw_http(_chunked(b"200 OK"))
    error = failure("inspect", "agents", "--url", server.url)
    assert error["reason"] == "invalid_developer_api_response"


def test_an_oversized_error_is_bounded(raw_http):
    """Follows adk_cli_test: oversized_chunked_developer_error_is_bounded_case."""
    server = raw_http(_chunked(b"429 Too Many Requests"))
    error = failure("inspect", "agents", "--url", server.url)
    assert (error["reason"], error["details"]) == (
        "developer_api_http_error",
        [429, "developer_api_request_failed"],
    )


def test_bad_json_arguments_are_refused_before_any_request(refused_url):
    error = failure(
        "resume", "run-1", "--response-json", "{nope", "--url", refused_url, exit_code=2
    )
    assert error["reason"] == "invalid_response_json"
    error = failure(
        "session", "state", "a", "u", "s", "--delta-json", "[]", "--url", refused_url, exit_code=2
    )
    assert error["reason"] == "state_delta_must_be_nonempty_object"


# -- path segments --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "/", "a/", "../x"])
def test_dot_empty_and_slash_path_segments_are_refused(value):
    with pytest.raises(CliError) as caught:
        api_path("sessions", "app", value, "s")
    assert (caught.value.reason, caught.value.exit_code) == ("invalid_path_segment", 2)


def test_path_segments_are_percent_encoded():
    assert api_path("sessions", "a b", "u?x#y", "%2e%2e", "%2F", ".hidden", "...") == (
        "/dev/v1/sessions/a%20b/u%3Fx%23y/%252e%252e/%252F/.hidden/..."
    )


@pytest.mark.parametrize(
    "args",
    [
        ("session", "delete", "..", "runs", "run-1"),
        ("session", "state", "app", "user", ".", "--delta-json", '{"k": 1}'),
        ("resume", "..", "--response-json", '{"confirmed": true}'),
    ],
)
def test_a_dot_segment_never_becomes_another_route(args, refused_url):
    """`adk session delete .. runs RUN_ID` would be DELETE /dev/v1/runs/RUN_ID once the
    HTTP client removed the dot segment: it is refused before any request (nothing
    listens at the URL, so a request would fail with connection_refused, exit 1)."""
    error = failure(*args, "--url", refused_url, exit_code=2)
    assert error["reason"] == "invalid_path_segment"


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "sessions", "app/user", "sess"),
        ("inspect", "session", "app", "user", "x/y"),
        ("inspect", "context", "a/b", "user", "s"),
        ("session", "create", "app", "user", "x/y"),  # the id goes in the body
        ("session", "state", "app", "u/v", "s", "--delta-json", '{"k": 1}'),
        ("session", "delete", "app", "user", "x/y"),
        ("inspect", "run", "run-1/events"),
        ("resume", "a/b", "--response-json", '{"confirmed": true}'),
        ("cancel", "/"),
    ],
)
def test_an_id_with_a_slash_is_refused_before_any_request(args, refused_url):
    """Review M1: the daemon decodes ``%2F`` before routing, so ``app/user sess`` would
    be read as ``app``, ``user``, ``sess``; the CLI refuses it (nothing listens at the
    URL: a request would fail with connection_refused, exit 1)."""
    error = failure(*args, "--url", refused_url, exit_code=2)
    assert error["reason"] == "invalid_path_segment"


def test_an_encoded_id_is_sent_as_one_segment(raw_http):
    """The request line itself (the round trip through the real daemon is in
    test_remote_commands)."""
    body = b'{"id": "x"}'
    server = raw_http(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (len(body), body)
    )
    done = run_adk(
        "inspect", "session", "a#b", "u?x", "%2e%2e", "--url", server.url, "--json", env=ENV
    )
    assert done.returncode == 0, done.stderr
    request_line = server.requests[0].decode().split("\r\n", 1)[0]
    assert request_line == "GET /dev/v1/sessions/a%23b/u%3Fx/%252e%252e HTTP/1.1"
