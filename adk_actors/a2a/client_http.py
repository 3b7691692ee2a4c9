"""One A2A client call's HTTP: a guarded httpx2 client (the shared outbound transport:
one origin, addresses validated and pinned per connection, no redirects, bounded
bodies) built for the call, credentials from the callback per request and recorded so
an error message can never echo them, and every transport failure typed."""

from __future__ import annotations

import contextlib
import dataclasses
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

import httpx2

from adk_actors.a2a.client_options import A2A_REASONS
from adk_actors.a2a.client_rpc import answers, decode_json, rpc_error
from adk_actors.outbound import (
    AuthCallback,
    Endpoint,
    GuardedTransport,
    HttpPolicy,
    Observed,
    OriginAuth,
    ResponseTooLarge,
    tls_failure,
)
from providers.errors import AdkError

UNDECLARED_AUTH = "a2a_undeclared_auth_not_allowed"


@dataclass(frozen=True)
class Route:
    """An origin the client talks to and the credentials it may carry there; with
    `loopback_only` every connection of a call must go to a loopback address (checked
    per connection, so a later DNS answer never takes the credentials off-host)."""

    endpoint: Endpoint
    auth: AuthCallback | None = field(default=None, repr=False)
    header_names: frozenset[str] = frozenset({"authorization"})
    loopback_only: bool = False


@dataclass(frozen=True)
class Transport:
    """What every call's HTTP client is built from."""

    policy: HttpPolicy
    max_response_bytes: int
    auth_timeout: float
    ssl_context: ssl.SSLContext | None = None


@dataclass
class Exchange:
    """The HTTP side of one public call to one route."""

    route: Route
    transport: Transport
    observed: Observed = field(default_factory=Observed)
    sent: list[str] = field(default_factory=list, repr=False)
    """The credential values sent during the call (to keep them out of error messages;
    never in the repr, which frame-capturing error reporters serialise)."""

    def _recording(self, callback: AuthCallback) -> Callable[[], Mapping[str, str]]:
        def auth() -> Mapping[str, str]:
            headers = callback()
            if isinstance(headers, Mapping):
                self.sent.extend(value for value in headers.values() if isinstance(value, str))
            return headers

        return auth

    def client(self) -> httpx2.AsyncClient:
        route, transport = self.route, self.transport
        auth = None
        if route.auth is not None:
            auth = OriginAuth(
                route.endpoint,
                self._recording(route.auth),
                self.observed,
                A2A_REASONS,
                header_names=route.header_names,
                timeout=transport.auth_timeout,
            )
        policy = transport.policy
        if route.loopback_only:
            policy = dataclasses.replace(policy, loopback_only=UNDECLARED_AUTH)
        return httpx2.AsyncClient(
            transport=GuardedTransport(
                route.endpoint,
                policy,
                self.observed,
                transport.max_response_bytes,
                transport.ssl_context,
                max_connections=2,
            ),
            auth=auth,
            follow_redirects=False,
            max_redirects=0,
            trust_env=False,
            timeout=None,  # the call's one deadline bounds everything
        )

    @contextlib.asynccontextmanager
    async def open(
        self,
        method: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        request_id: int | None = None,
    ) -> AsyncIterator[httpx2.Response]:
        """The response to one request (status checked: 200, else a typed error; a
        JSON-RPC error in a non-200 JSON answer to `request_id` is raised as such); its
        body is read by the caller, bounded by ``max_response_bytes``."""
        try:
            async with (
                self.client() as client,
                client.stream(
                    method, self.route.endpoint.url, headers=dict(headers), content=body
                ) as response,
            ):
                if response.status_code != 200:
                    await self._refuse(response, request_id)
                yield response
        except _Answered as answered:
            raise answered.error from None
        except ResponseTooLarge:
            raise AdkError("a2a_response_too_large", "past max_response_bytes") from None
        except (httpx2.HTTPError, httpx2.InvalidURL) as error:
            raise self._failure(error) from None

    async def _refuse(self, response: httpx2.Response, request_id: int | None) -> None:
        status = response.status_code
        if 300 <= status < 400:
            raise AdkError("redirect_rejected", "redirects are never followed")
        if self.observed.refused is not None:  # 401 / 403, typed from the challenge
            raise self.observed.refused
        if request_id is not None and content_type(response) == "application/json":
            with contextlib.suppress(AdkError):  # not a JSON-RPC error: the status says it
                envelope = decode_json(await read_body(response))
                if (
                    isinstance(envelope, dict)
                    and isinstance(envelope.get("error"), dict)
                    and answers(envelope.get("id"), request_id, True)
                ):
                    raise _Answered(rpc_error(envelope["error"], self.sent))
        raise AdkError(("a2a_http_error", status), f"the server answered HTTP {status}")

    def _failure(self, error: BaseException) -> AdkError:
        if self.observed.refused is not None:
            return self.observed.refused
        if (tls := tls_failure(error, A2A_REASONS)) is not None:
            return tls
        if isinstance(error, httpx2.InvalidURL):
            return AdkError(("invalid_a2a_url", "unparsable"), "the HTTP client refused the URL")
        return AdkError("a2a_connection_failed", "the connection failed")


class _Answered(Exception):
    """A JSON-RPC error found in a non-200 answer (carried past the suppression)."""

    def __init__(self, error: AdkError) -> None:
        super().__init__(error.reason)
        self.error = error


def tls_context(given: ssl.SSLContext | None) -> ssl.SSLContext:
    """`given`, or the system CAs with host name checks (made once per client, not per call)."""
    return given or httpx2.create_ssl_context(verify=True, trust_env=False)


def content_type(response: httpx2.Response) -> str:
    """The media type of the response (parameters dropped, lowercased)."""
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def read_body(response: httpx2.Response) -> bytes:
    """The whole (bounded) body."""
    return b"".join([chunk async for chunk in response.aiter_bytes()])
