"""Who may use an MCP server, and for what: authentication, authorization and the
RFC 9728 protected-resource document.

`ServerAuth` is built once by `adk.mcp.serve` from its options and checked there
(authentication is `adk_actors.serving.auth.BearerAuth`, shared with `adk.a2a.serve`):

- ``auth_token`` (at least 16 bytes) is kept only as its SHA-256 digest and compared in
  constant time; every request with it is the principal ``auth_token`` (a verifier
  answering that id is refused, so the two cannot share sessions);
- ``verifier`` is a hook ``fn(token) -> principal id | None`` for any other bearer token
  (OAuth access tokens...): it receives the transient token of ``Authorization: Bearer
  <token>`` and answers who it is, or None (401);
- ``authorization_fun`` is ``fn(principal, mcp_method, resource) -> True |
  "insufficient_scope" | False`` for exact operation policy, asked for every message and
  DELETE: it never sees the credential, only the principal, the MCP method
  (``"tools/call"``, ``"initialize"``, ``"sessions/delete"``...) and a bounded resource
  descriptor (``{"tool": name}``, ``{"uri": uri}``, ``{"prompt": name}``,
  ``{"kind": "session"}`` or ``{}``); anything but True is a 403 whose Bearer challenge
  says ``insufficient_scope``;
- ``oauth_protected_resource`` publishes the unauthenticated metadata document at its
  ``metadata_path`` and adds ``resource_metadata`` and ``scope`` to the Bearer
  challenges; it requires both hooks (metadata without real authentication and
  authorization is refused at start-up). Its settings are the msgspec struct
  `OAuthResource` (``("invalid_mcp_oauth_resource", key)`` for a bad one).

Hooks run off the event loop on a bounded pool (`serving.workers.WorkerPool`, at most
``max_callback_threads`` threads, a timed-out hook's thread counted until it ends),
under ``callback_timeout``, and fail closed: a hook that raises, times out or answers
something else denies the request; with every hook thread taken, the request is
refused at once (`WorkersBusy`, which the endpoint answers with 503) and no thread is
added. A 401 for a credential that was presented but not accepted says
``error="invalid_token"`` (RFC 6750 §3.1); one without a credential carries no error.
Sessions are bound to `principal_scope`, the SHA-256 of the principal id (never the
id itself).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

import msgspec

from adk_actors.mcp.server_workers import MCP_POOL_NAMES
from adk_actors.serving.auth import (
    ANONYMOUS,
    MAX_PRINCIPAL_CHARS,
    MAX_TOKEN_CHARS,
    MIN_TOKEN_BYTES,
    TOKEN_PRINCIPAL,
    AuthNames,
    BearerAuth,
    Verifier,
    bearer_token,
    check_hook,
)
from providers.errors import AdkError, decode_options

__all__ = [
    "ANONYMOUS",
    "MAX_PRINCIPAL_CHARS",
    "MAX_TOKEN_CHARS",
    "MIN_TOKEN_BYTES",
    "TOKEN_PRINCIPAL",
    "AuthorizationFun",
    "OAuthResource",
    "ServerAuth",
    "Verifier",
    "bearer_token",
    "oauth_resource",
    "principal_scope",
]

DEFAULT_METADATA_PATH = "/.well-known/oauth-protected-resource"
OAUTH_REASON = "invalid_mcp_oauth_resource"

AuthorizationFun = Callable[[str, str, Mapping[str, Any]], "bool | str"]


HttpsUrl = Annotated[str, msgspec.Meta(min_length=9, max_length=2048)]
ScopeToken = Annotated[str, msgspec.Meta(pattern=r'^[^\s"\\,]+$', max_length=256)]
Scopes = Annotated[tuple[ScopeToken, ...], msgspec.Meta(max_length=64)]


class OAuthResource(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The RFC 9728 protected-resource settings (``oauth_protected_resource``), decoded
    by `oauth_resource`: https URLs, scope tokens, an absolute metadata path."""

    resource: HttpsUrl
    authorization_servers: Annotated[
        tuple[HttpsUrl, ...], msgspec.Meta(min_length=1, max_length=16)
    ]
    resource_metadata_url: HttpsUrl
    scopes_supported: Scopes = ()
    required_scopes: Scopes = ()
    metadata_path: Annotated[str, msgspec.Meta(pattern=r"^/[^?#\s]*$", max_length=256)] = (
        DEFAULT_METADATA_PATH
    )

    def document(self) -> bytes:
        return json.dumps(
            {
                "resource": self.resource,
                "authorization_servers": list(self.authorization_servers),
                "scopes_supported": list(self.scopes_supported),
                "bearer_methods_supported": ["header"],
            }
        ).encode()


def oauth_resource(options: Mapping[str, Any]) -> OAuthResource:
    """The checked `OAuthResource`; a bad key fails as
    ``("invalid_mcp_oauth_resource", key)``."""
    checked = decode_options(
        OAuthResource, options, OAUTH_REASON, what="oauth_protected_resource option"
    )
    for key in ("resource", "resource_metadata_url"):
        _https(getattr(checked, key), key)
    for url in checked.authorization_servers:
        _https(url, "authorization_servers")
    return checked


MCP_AUTH_NAMES = AuthNames(
    token_too_short="mcp_auth_token_too_short",
    invalid_option="invalid_mcp_server_option",
    log="adk.mcp.server",
    pool=MCP_POOL_NAMES,
)


class ServerAuth:
    """The checked authentication (`serving.auth.BearerAuth`) and authorization settings
    of one server."""

    def __init__(
        self,
        *,
        auth_token: str | None,
        verifier: Verifier | None,
        authorization_fun: AuthorizationFun | None,
        oauth: Mapping[str, Any] | None,
        callback_timeout: float,
        max_callback_threads: int = 16,
    ) -> None:
        self.bearer = BearerAuth(
            auth_token=auth_token,
            verifier=verifier,
            callback_timeout=callback_timeout,
            max_callback_threads=max_callback_threads,
            names=MCP_AUTH_NAMES,
        )
        check_hook(authorization_fun, "authorization_fun", MCP_AUTH_NAMES)
        self._authorization_fun = authorization_fun
        self.callback_timeout = callback_timeout
        self.hooks = self.bearer.hooks
        self.oauth = None if oauth is None else oauth_resource(oauth)
        if self.oauth is not None and (verifier is None or authorization_fun is None):
            raise AdkError(
                "mcp_oauth_requires_auth_hooks",
                "oauth_protected_resource needs both verifier and authorization_fun",
            )

    def __repr__(self) -> str:
        return f"Server{self.bearer!r}"

    @property
    def required(self) -> bool:
        """Does every request need a credential?"""
        return self.bearer.required

    async def authenticate(self, authorization: str | None) -> str | None:
        """The principal id of a request with this ``Authorization`` header, or None
        (answer 401)."""
        return await self.bearer.authenticate(authorization)

    async def authorize(self, principal: str, method: str, resource: Mapping[str, Any]) -> bool:
        """May `principal` run MCP `method` on `resource`? True without a hook; a hook
        that fails, times out or answers anything but True denies."""
        if self._authorization_fun is None:
            return True
        allowed = await self.bearer.run_hook(
            self._authorization_fun, (principal, method, dict(resource)), "authorization_fun"
        )
        return allowed is True

    def challenge(self, error: str | None = None) -> str:
        """A ``WWW-Authenticate`` value, with ``error`` (``invalid_token`` for a refused
        credential, ``insufficient_scope`` for a denied operation) when given."""
        parts = ['Bearer realm="mcp"']
        if error is not None:
            parts.append(f'error="{error}"')
        if self.oauth is not None:
            parts.append(f'resource_metadata="{self.oauth.resource_metadata_url}"')
            if self.oauth.required_scopes:
                parts.append(f'scope="{" ".join(self.oauth.required_scopes)}"')
        return ", ".join(parts)


def principal_scope(principal: str) -> str:
    """The SHA-256 scope a session is bound to."""
    return hashlib.sha256(principal.encode()).hexdigest()


def _https(value: str, what: str) -> None:
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname or parts.fragment or parts.username:
        raise AdkError((OAUTH_REASON, what), f"{what} is an https URL")
