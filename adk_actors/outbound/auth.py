"""Outbound credentials: headers come only from the caller's ``auth`` callback, per
request, and only for the endpoint's origin; a bounded set of header names (by
default one ``Authorization``); static credentials are refused."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Collection, Mapping
from typing import Any

import anyio
import anyio.to_thread
import httpx2

from adk_actors.outbound.endpoints import Endpoint, same_origin
from adk_actors.outbound.observed import Observed
from adk_actors.outbound.reasons import OutboundReasons
from providers.errors import AdkError

AuthCallback = Callable[[], Mapping[str, str]]
"""``auth()`` -> ``{"Authorization": "Bearer ..."}`` (or ``{}``), called for every request."""

MAX_HEADER_BYTES = 8192
AUTHORIZATION = frozenset({"authorization"})


class OriginAuth(httpx2.Auth):
    """Calls ``auth()`` for each request to the endpoint's origin; other origins get
    nothing (and are refused by the transport anyway). The callback runs on a worker
    thread that a cancelled call abandons (so a hung callback never outlives the call's
    deadline); with ``timeout`` it has that long to answer."""

    def __init__(
        self,
        endpoint: Endpoint,
        callback: AuthCallback,
        observed: Observed,
        reasons: OutboundReasons,
        *,
        header_names: Collection[str] = AUTHORIZATION,
        timeout: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.callback = callback
        self.observed = observed
        self.reasons = reasons
        self.header_names = frozenset(name.lower() for name in header_names)
        self.timeout = timeout

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if same_origin(request.url, self.endpoint):
            try:
                headers: Any = None
                with anyio.move_on_after(self.timeout) as scope:
                    headers = await anyio.to_thread.run_sync(self.callback, abandon_on_cancel=True)
                if scope.cancelled_caught:  # our own timeout, not a TimeoutError auth() raised
                    raise AdkError(
                        (self.reasons.auth_callback_failed, "timeout"),
                        "auth() did not answer in time",
                    )
                found = auth_headers(headers, self.reasons, self.header_names)
            except AdkError as error:
                self.observed.refused = error
                raise httpx2.ConnectError(f"refused: {error.reason}", request=request) from None
            except Exception:
                self.observed.refused = AdkError(self.reasons.auth_callback_failed, "auth() raised")
                raise httpx2.ConnectError("refused: auth", request=request) from None
            for name, value in found.items():
                request.headers[name] = value
        yield request


def auth_headers(
    headers: Any, reasons: OutboundReasons, names: Collection[str] = AUTHORIZATION
) -> dict[str, str]:
    """The headers ``auth()`` returned, checked: a mapping of at most ``len(names)``
    headers, each named in `names` (case-insensitive), bounded single-line values."""
    invalid = reasons.invalid_auth_header
    if not isinstance(headers, Mapping):
        raise AdkError(invalid, "auth() returns a mapping")
    items = list(headers.items())
    allowed = frozenset(name.lower() for name in names)
    if len(items) > len(allowed):
        raise AdkError(invalid, f"auth() returns at most {len(allowed)} header(s)")
    found: dict[str, str] = {}
    for name, value in items:
        if not isinstance(name, str) or name.lower() not in allowed or name.lower() in found:
            raise AdkError(invalid, "auth() returns only " + ", ".join(sorted(allowed)))
        if (
            not isinstance(value, str)
            or not value
            or len(value.encode()) > MAX_HEADER_BYTES
            or any(ch in value for ch in "\r\n\0")
        ):
            raise AdkError(invalid, "a bounded single-line value")
        found[name.lower()] = value
    return found


def auth_header(headers: Any, reasons: OutboundReasons) -> tuple[str | None, str]:
    """The one ``Authorization`` header `headers` may hold (or none)."""
    found = auth_headers(headers, reasons)
    if not found:
        return None, ""
    return "Authorization", found["authorization"]


STATIC_HEADER_OPTIONS = ("headers", "cookies", "proxy_authorization", "static_headers")


def refuse_static_headers(options: Mapping[str, Any]) -> None:
    """Static credentials are refused: they would outlive a token and can leak."""
    for key in STATIC_HEADER_OPTIONS:
        if options.get(key) is not None:
            raise AdkError(
                "static_headers_not_supported",
                f"{key}= is not supported; pass auth=callable returning the Authorization header",
            )
