"""Bearer-token authentication shared by the HTTP surfaces (`adk.mcp.serve`,
`adk.a2a.serve`): who sent a request.

`BearerAuth` is built once from a server's options and checked there:

- ``auth_token`` (at least `MIN_TOKEN_BYTES` bytes) is kept only as its SHA-256 digest
  and compared in constant time, on the event loop; every request with it is the
  principal ``token_principal`` (`TOKEN_PRINCIPAL` by default; a verifier answering that
  id is refused, so the two never share what a principal owns). A caller that holds
  only the digest (the daemon's developer token) passes ``token_digest`` instead;
- ``verifier`` is a hook ``fn(token) -> principal id | None`` for any other bearer token
  (OAuth access tokens...): it receives the transient token of ``Authorization: Bearer
  <token>`` and answers who it is, or None (401).

Hooks run off the event loop on a bounded `WorkerPool` (at most ``max_callback_threads``
threads, a timed-out hook's thread counted until it ends), under ``callback_timeout``,
and fail closed (`run_hook`): a hook that raises, times out or answers something else
denies the request; with every hook thread taken the request is refused at once
(`WorkersBusy`, which an endpoint answers with 503) and no thread is added. A surface
names its errors and events with `AuthNames`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any, NamedTuple

from adk_actors.serving.workers import DEFAULT_POOL_NAMES, PoolNames, WorkerPool, WorkersBusy
from providers.errors import AdkError
from supervision import get_logger

_log = get_logger("adk_actors.serving")

MIN_TOKEN_BYTES = 16
MAX_PRINCIPAL_CHARS = 512
MAX_TOKEN_CHARS = 8192
ANONYMOUS = "anonymous"
TOKEN_PRINCIPAL = "auth_token"

Verifier = Callable[[str], "str | None"]


class AuthNames(NamedTuple):
    """One surface's error reasons and log prefix: a short ``auth_token``
    (`token_too_short`), a hook that is not callable (``(invalid_option, key)``), the
    hook pool's names (`pool`: its busy reason...), and ``{log}.hook_*`` events."""

    token_too_short: str = "auth_token_too_short"
    invalid_option: str = "invalid_server_option"
    log: str = "adk.serving"
    pool: PoolNames = DEFAULT_POOL_NAMES


DEFAULT_AUTH_NAMES = AuthNames()


class BearerAuth:
    """A server's checked bearer-token settings: a static token's digest and/or a verifier."""

    def __init__(
        self,
        *,
        auth_token: str | None,
        verifier: Verifier | None,
        callback_timeout: float,
        max_callback_threads: int = 16,
        names: AuthNames = DEFAULT_AUTH_NAMES,
        token_digest: bytes | None = None,
        token_principal: str = TOKEN_PRINCIPAL,
    ) -> None:
        if auth_token is not None and token_digest is not None:
            raise AdkError(
                (names.invalid_option, "token_digest"), "auth_token or token_digest, not both"
            )
        if token_digest is not None and (
            not isinstance(token_digest, bytes) or len(token_digest) != hashlib.sha256().digest_size
        ):
            raise AdkError((names.invalid_option, "token_digest"), "token_digest is a SHA-256")
        if auth_token is not None and (
            not isinstance(auth_token, str) or len(auth_token.encode()) < MIN_TOKEN_BYTES
        ):
            raise AdkError(
                names.token_too_short,
                f"auth_token is a string of at least {MIN_TOKEN_BYTES} bytes",
            )
        check_hook(verifier, "verifier", names)
        self._digest = (
            hashlib.sha256(auth_token.encode()).digest() if auth_token is not None else token_digest
        )
        self._token_principal = token_principal
        self._verifier = verifier
        self.names = names
        self.callback_timeout = callback_timeout
        self.hooks = WorkerPool(max_callback_threads, "auth-hooks", names.pool)

    def __repr__(self) -> str:
        return (
            f"BearerAuth(token={'configured' if self._digest else 'none'}, "
            f"verifier={'configured' if self._verifier else 'none'})"
        )

    @property
    def required(self) -> bool:
        """Does every request need a credential?"""
        return self._digest is not None or self._verifier is not None

    async def authenticate(self, authorization: str | None) -> str | None:
        """The principal id of a request with this ``Authorization`` header, or None
        (answer 401); `ANONYMOUS` when no credential is required."""
        if not self.required:
            return ANONYMOUS
        token = bearer_token(authorization)
        if token is None:
            return None
        if self._digest is not None:
            digest = hashlib.sha256(token.encode()).digest()
            if hmac.compare_digest(digest, self._digest):
                return self._token_principal
        if self._verifier is None:
            return None
        principal = await self.run_hook(self._verifier, (token,), "verifier")
        if not isinstance(principal, str) or not 0 < len(principal) <= MAX_PRINCIPAL_CHARS:
            return None
        if self._digest is not None and principal == self._token_principal:
            return None  # would share the static token's principal
        return principal

    async def run_hook(self, fn: Callable[..., Any], args: tuple[Any, ...], what: str) -> Any:
        """Run a hook on the bounded pool under ``callback_timeout``; None when it fails
        (fail closed). `WorkersBusy` passes through: the request is refused, not denied."""
        try:
            return await self.hooks.run(lambda: fn(*args), self.callback_timeout)
        except WorkersBusy:
            _log.debug(f"{self.names.log}.hooks_busy", hook=what)
            raise
        except TimeoutError:
            _log.warning(f"{self.names.log}.hook_timeout", hook=what)
        except Exception as error:
            _log.warning(
                f"{self.names.log}.hook_failed", hook=what, error_class=type(error).__name__
            )
        return None


def check_hook(hook: object, key: str, names: AuthNames) -> None:
    """Refuse a hook option that is given but not callable: ``(names.invalid_option, key)``."""
    if hook is not None and not callable(hook):
        raise AdkError((names.invalid_option, key), f"{key} is callable")


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
