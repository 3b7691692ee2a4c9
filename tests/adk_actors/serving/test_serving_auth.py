"""`serving.auth.BearerAuth` given a token's digest (the daemon's developer token).

Review F11: ``adk serve --a2a`` checked its developer token with a verifier, i.e. a
thread hop on the hook pool (503 once it is busy) for every A2A request; a digest is
compared in-loop, like ``auth_token``.
"""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from adk_actors.serving.auth import BearerAuth
from providers.errors import AdkError

TOKEN = "developer-token-0123456789abcdef"


def test_a_token_digest_is_checked_in_loop_as_its_principal() -> None:
    """The right token is the given principal, another is refused; no hook thread runs."""
    auth = BearerAuth(
        auth_token=None,
        verifier=None,
        callback_timeout=1.0,
        token_digest=hashlib.sha256(TOKEN.encode()).digest(),
        token_principal="developer",
    )
    assert auth.required

    async def check() -> tuple[str | None, str | None, str | None]:
        return (
            await auth.authenticate(f"Bearer {TOKEN}"),
            await auth.authenticate("Bearer someone-else-0123456789abcdef"),
            await auth.authenticate(None),
        )

    assert asyncio.run(check()) == ("developer", None, None)
    assert auth.hooks.alive == 0


def test_a_token_digest_is_checked() -> None:
    """A digest is a SHA-256 (32 bytes), and never given with ``auth_token``."""
    with pytest.raises(AdkError) as short:
        BearerAuth(auth_token=None, verifier=None, callback_timeout=1.0, token_digest=b"x" * 8)
    assert short.value.reason == ("invalid_server_option", "token_digest")
    with pytest.raises(AdkError) as both:
        BearerAuth(auth_token=TOKEN, verifier=None, callback_timeout=1.0, token_digest=bytes(32))
    assert both.value.reason == ("invalid_server_option", "token_digest")
