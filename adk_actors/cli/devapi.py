"""The developer-API client of ``adk inspect``, ``adk session``, ``adk resume`` and
``adk cancel``: one bounded JSON request to a running ``adk serve``.

The bearer token comes from ``ADK_DEV_TOKEN`` and goes only in the ``Authorization``
header. Plain HTTP is allowed only to a loopback host (``insecure_non_loopback_base_url``
otherwise); anything else must be HTTPS, verified. A URL with credentials, a query or
a fragment is ``invalid_base_url``. Redirects are never followed, proxies from the
environment are never used (they would see the token), the whole exchange has one
deadline (`TIMEOUT`), and a response body is read up to `MAX_RESPONSE_BYTES`. When
nothing answers, the error is ``developer_api_unavailable`` with the transport reason
(``connection_refused``, ``timeout``, ``name_resolution_failed`` or
``connection_failed``). An HTTP error is ``developer_api_http_error`` with the status
and the server's ``error`` object, redacted.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from adk_actors.cli.output import EXIT_REFUSED, CliError
from providers.errors import redact

DEFAULT_URL = "http://127.0.0.1:8080"
TOKEN_VARIABLE = "ADK_DEV_TOKEN"
TIMEOUT = 5.0
MAX_RESPONSE_BYTES = 1 << 20
MAX_URL_CHARS = 2048


def check_base_url(url: str) -> str:
    """`url` without a trailing slash, if the CLI may send a token to it."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises on a bad port
    except ValueError:
        raise _refused("invalid_base_url", "the URL is not a valid http(s) URL") from None
    if (
        len(url) > MAX_URL_CHARS
        or parts.scheme not in ("http", "https")
        or not host
        or parts.query
        or parts.fragment
        or parts.username is not None
        or parts.password is not None
    ):
        raise _refused(
            "invalid_base_url",
            "give the daemon's base URL, e.g. http://127.0.0.1:8080 (no credentials, query or fragment)",
        )
    if parts.scheme == "http" and not is_loopback_host(host):
        raise _refused(
            "insecure_non_loopback_base_url",
            "plain HTTP is only for a loopback host (127.0.0.1, ::1, localhost); use https:// otherwise",
        )
    return url.rstrip("/")


def _refused(reason: str, message: str) -> CliError:
    return CliError(reason, message, exit_code=EXIT_REFUSED)


def is_loopback_host(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def developer_token(environ: Mapping[str, str] | None = None) -> str:
    """The bearer token from ``ADK_DEV_TOKEN``."""
    token = (os.environ if environ is None else environ).get(TOKEN_VARIABLE, "")
    if not token:
        raise _refused(
            "missing_developer_token",
            f"export {TOKEN_VARIABLE} with the token `adk serve` was started with",
        )
    if not token.isascii() or not token.isprintable() or " " in token:
        raise _refused("invalid_developer_token", f"{TOKEN_VARIABLE} must be printable ASCII")
    return token


def check_id(value: str) -> str:
    """`value` if it can be an id (app, user, session or run): not empty, ``.`` or
    ``..``, and without a ``/``; otherwise ``invalid_path_segment`` (exit 2), before any
    request. HTTP clients remove dot segments, so ``adk session delete .. runs RUN_ID``
    would otherwise become ``DELETE /dev/v1/runs/RUN_ID``; and the daemon refuses an id
    with a ``/`` (in a path, as ``%2F``, it would otherwise be two segments)."""
    if value in ("", ".", "..") or "/" in value:
        raise _refused("invalid_path_segment", "an id cannot be empty, '.' or '..', or contain '/'")
    return value


def segment(value: str) -> str:
    """One path segment, checked (`check_id`) and percent-encoded: a ``?``, ``#`` or
    ``%`` in an id stays inside its segment."""
    return quote(check_id(value), safe="")


def api_path(*segments: str) -> str:
    """``/dev/v1/`` and the segments, each checked and encoded by `segment`."""
    return "/dev/v1/" + "/".join(segment(value) for value in segments)


class DevApiClient:
    """Sends requests to one daemon with one token."""

    def __init__(self, base_url: str, token: str, timeout: float = TIMEOUT) -> None:
        self.base_url = check_base_url(base_url)
        self._token = token
        self._timeout = timeout

    def __repr__(self) -> str:  # never the token
        return f"DevApiClient({self.base_url!r})"

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of `method` `path`, or `CliError`."""
        headers = {"authorization": f"Bearer {self._token}", "accept": "application/json"}
        content = None
        if body is not None:
            headers["content-type"] = "application/json"
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        deadline = time.monotonic() + self._timeout
        try:
            with (
                httpx.Client(
                    timeout=httpx.Timeout(self._timeout),
                    follow_redirects=False,
                    trust_env=False,
                ) as client,
                client.stream(
                    method, self.base_url + path, headers=headers, content=content
                ) as response,
            ):
                status = response.status_code
                data = _bounded_body(response, deadline)
        except httpx.TimeoutException:
            raise self._unavailable("timeout") from None
        except httpx.HTTPError as error:
            raise self._unavailable(_transport_reason(error)) from None
        return _answer(status, data)

    def _unavailable(self, reason: str) -> CliError:
        hints = {
            "connection_refused": "nothing is listening there; is `adk serve` running? (check --url)",
            "timeout": "the daemon did not answer in time",
            "name_resolution_failed": "the host name does not resolve",
        }
        return CliError(
            "developer_api_unavailable",
            f"{self.base_url}: {hints.get(reason, 'the connection failed')}",
            details=[reason],
        )


def _bounded_body(response: httpx.Response, deadline: float) -> bytes | None:
    """The body, or None when it is larger than `MAX_RESPONSE_BYTES` (never read past
    it) or arrives past the deadline (then `httpx.ReadTimeout`)."""
    declared = response.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            return None
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("deadline")
    return b"".join(chunks)


def _answer(status: int, data: bytes | None) -> Any:
    if 200 <= status < 300:
        if data is None:
            raise CliError("invalid_developer_api_response", "the answer is too large")
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise CliError("invalid_developer_api_response", "the answer is not JSON") from None
    error = _server_error(data)
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    shown = f"HTTP {status}" + (f" {code}" if isinstance(code, str) else "")
    if isinstance(message, str):
        shown += f": {message[:512]}"
    if 300 <= status < 400:
        shown += " (redirects are not followed)"
    raise CliError("developer_api_http_error", shown, details=[status, error])


def _server_error(data: bytes | None) -> Any:
    """The server's ``error`` object, redacted; a fixed word if there is none."""
    if not data:
        return "developer_api_request_failed"
    try:
        body = json.loads(data)
    except ValueError:
        return "developer_api_request_failed"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return redact(body["error"])
    return "developer_api_request_failed"


def _transport_reason(error: BaseException) -> str:
    """What went wrong below HTTP, from the exception chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or (
            isinstance(current, OSError) and current.errno == errno.ECONNREFUSED
        ):
            return "connection_refused"
        if isinstance(current, socket.gaierror):
            return "name_resolution_failed"
        if isinstance(current, TimeoutError | httpx.TimeoutException):
            return "timeout"
        current = current.__cause__ or current.__context__
    text = str(error).lower()
    if "connection refused" in text or "errno 111" in text:
        return "connection_refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "name_resolution_failed"
    return "connection_failed"
