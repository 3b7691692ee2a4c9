"""Who may use an MCP server, and for what: authentication, authorization and the
RFC 9728 protected-resource document.

`ServerAuth` is built once by `adk.mcp.serve` from its options and checked there:

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
  authorization is refused at start-up).

Hooks run off the event loop, under ``callback_timeout``, and fail closed: a hook that
raises, times out or answers something else denies the request. Sessions are bound to
`principal_scope`, the SHA-256 of the principal id (never the id itself).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread

from providers.errors import AdkError
from supervision import get_logger

_log = get_logger("adk_actors.mcp.server")

MIN_TOKEN_BYTES = 16
MAX_PRINCIPAL_CHARS = 512
ANONYMOUS = "anonymous"
TOKEN_PRINCIPAL = "auth_token"
DEFAULT_METADATA_PATH = "/.well-known/oauth-protected-resource"


MAX_TOKEN_CHARS = 8192

Verifier = Callable[[str], "str | None"]
AuthorizationFun = Callable[[str, str, Mapping[str, Any]], "bool | str"]


@dataclass(frozen=True)
class OAuthResource:
    """The RFC 9728 protected-resource settings, checked."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...]
    required_scopes: tuple[str, ...]
    resource_metadata_url: str
    metadata_path: str

    def document(self) -> bytes:
        return json.dumps(
            {
                "resource": self.resource,
                "authorization_servers": list(self.authorization_servers),
                "scopes_supported": list(self.scopes_supported),
                "bearer_methods_supported": ["header"],
            }
        ).encode()


class ServerAuth:
    """The checked authentication and authorization settings of one server."""

    def __init__(
        self,
        *,
        auth_token: str | None,
        verifier: Verifier | None,
        authorization_fun: AuthorizationFun | None,
        oauth: Mapping[str, Any] | None,
        callback_timeout: float,
    ) -> None:
        if auth_token is not None and (
            not isinstance(auth_token, str) or len(auth_token.encode()) < MIN_TOKEN_BYTES
        ):
            raise AdkError(
                "mcp_auth_token_too_short",
                f"auth_token is a string of at least {MIN_TOKEN_BYTES} bytes",
            )
        if verifier is not None and not callable(verifier):
            raise AdkError(("invalid_mcp_server_option", "verifier"), "verifier is callable")
        if authorization_fun is not None and not callable(authorization_fun):
            raise AdkError(
                ("invalid_mcp_server_option", "authorization_fun"), "authorization_fun is callable"
            )
        self._digest = (
            hashlib.sha256(auth_token.encode()).digest() if auth_token is not None else None
        )
        self._verifier = verifier
        self._authorization_fun = authorization_fun
        self.callback_timeout = callback_timeout
        self.oauth = None if oauth is None else _oauth(oauth)
        if self.oauth is not None and (verifier is None or authorization_fun is None):
            raise AdkError(
                "mcp_oauth_requires_auth_hooks",
                "oauth_protected_resource needs both verifier and authorization_fun",
            )

    def __repr__(self) -> str:
        return (
            f"ServerAuth(token={'configured' if self._digest else 'none'}, "
            f"verifier={'configured' if self._verifier else 'none'})"
        )

    @property
    def required(self) -> bool:
        """Does every request need a credential?"""
        return self._digest is not None or self._verifier is not None

    async def authenticate(self, authorization: str | None) -> str | None:
        """The principal id of a request with this ``Authorization`` header, or None
        (answer 401)."""
        if not self.required:
            return ANONYMOUS
        token = bearer_token(authorization)
        if token is None:
            return None
        if self._digest is not None:
            digest = hashlib.sha256(token.encode()).digest()
            if hmac.compare_digest(digest, self._digest):
                return TOKEN_PRINCIPAL
        if self._verifier is None:
            return None
        principal = await _hook(self._verifier, (token,), self.callback_timeout, "verifier")
        if not isinstance(principal, str) or not 0 < len(principal) <= MAX_PRINCIPAL_CHARS:
            return None
        if self._digest is not None and principal == TOKEN_PRINCIPAL:
            return None  # would share the static token's sessions
        return principal

    async def authorize(self, principal: str, method: str, resource: Mapping[str, Any]) -> bool:
        """May `principal` run MCP `method` on `resource`? True without a hook; a hook
        that fails, times out or answers anything but True denies."""
        if self._authorization_fun is None:
            return True
        allowed = await _hook(
            self._authorization_fun,
            (principal, method, dict(resource)),
            self.callback_timeout,
            "authorization_fun",
        )
        return allowed is True

    def challenge(self, error: str | None = None) -> str:
        """A ``WWW-Authenticate`` value (with ``error`` for ``insufficient_scope``)."""
        parts = ['Bearer realm="mcp"']
        if error is not None:
            parts.append(f'error="{error}"')
        if self.oauth is not None:
            parts.append(f'resource_metadata="{self.oauth.resource_metadata_url}"')
            if self.oauth.required_scopes:
                parts.append(f'scope="{" ".join(self.oauth.required_scopes)}"')
        return ", ".join(parts)


def bearer_token(authorization: str | None) -> str | None:
    """The token of ``Bearer <token>`` (one token, no whitespace, bounded), else None."""
    if authorization is None:
        return None
    scheme, space, token = authorization.partition(" ")
    if not space or scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_CHARS:
        return None
    if any(c.isspace() for c in token) or "," in token:
        return None
    return token


def principal_scope(principal: str) -> str:
    """The SHA-256 scope a session is bound to."""
    return hashlib.sha256(principal.encode()).hexdigest()


async def _hook(fn: Callable[..., Any], args: tuple[Any, ...], timeout: float, what: str) -> Any:
    """Run a hook on a worker thread under `timeout`; None when it fails (fail closed)."""
    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(lambda: fn(*args), abandon_on_cancel=True)
    except TimeoutError:
        _log.warning("adk.mcp.server.hook_timeout", hook=what)
    except Exception as error:
        _log.warning("adk.mcp.server.hook_failed", hook=what, error_class=type(error).__name__)
    return None


def _https(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise AdkError(("invalid_mcp_oauth_resource", what), f"{what} is an https URL")
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname or parts.fragment or parts.username:
        raise AdkError(("invalid_mcp_oauth_resource", what), f"{what} is an https URL")
    return value


def _words(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise AdkError(("invalid_mcp_oauth_resource", what), f"{what} is a list of scopes")
    words = tuple(value)
    for word in words:
        if not isinstance(word, str) or not word or any(c in word for c in ' "\\'):
            raise AdkError(("invalid_mcp_oauth_resource", what), f"{what} holds scope tokens")
    return words


def _oauth(options: Mapping[str, Any]) -> OAuthResource:
    if not isinstance(options, Mapping):
        raise AdkError(
            ("invalid_mcp_oauth_resource", "oauth_protected_resource"), "a mapping of settings"
        )
    servers = options.get("authorization_servers")
    if isinstance(servers, str) or not isinstance(servers, Sequence) or not servers:
        raise AdkError(
            ("invalid_mcp_oauth_resource", "authorization_servers"),
            "authorization_servers is a non-empty list of https URLs",
        )
    path = options.get("metadata_path", DEFAULT_METADATA_PATH)
    if not isinstance(path, str) or not path.startswith("/") or "?" in path or "#" in path:
        raise AdkError(("invalid_mcp_oauth_resource", "metadata_path"), "an absolute path")
    return OAuthResource(
        resource=_https(options.get("resource"), "resource"),
        authorization_servers=tuple(_https(s, "authorization_servers") for s in servers),
        scopes_supported=_words(options.get("scopes_supported"), "scopes_supported"),
        required_scopes=_words(options.get("required_scopes"), "required_scopes"),
        resource_metadata_url=_https(options.get("resource_metadata_url"), "resource_metadata_url"),
        metadata_path=path,
    )
