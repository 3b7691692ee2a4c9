"""The MCP server's own session table: what the SDK's session manager does not enforce.

The SDK's `StreamableHTTPSessionManager` owns the protocol session (its transport and
server task); this table, kept by `McpHttpApp` beside it, adds the spec's rules: each
session is bound to the SHA-256 scope of the principal that opened it (another
principal gets the same 404 as an unknown id), keeps its negotiated protocol version
(a later request must name it), is ready once the client confirms
``notifications/initialized`` (before that only ``ping`` is served), remembers the request ids it has seen (a repeated id is
``-32600``), allows at most ``max_session_requests`` requests, and expires
``session_ttl`` seconds after its last request. The table holds at most
``max_sessions`` live sessions. Everything runs on the listener's event loop, so no
lock is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class SessionRecord:
    scope: str
    version: str
    last_seen: float
    seen_ids: set[str | int] = field(default_factory=set)
    requests: int = 0
    ready: bool = False
    """Set by ``notifications/initialized``: until then only ``ping`` is served."""


class SessionTable:
    """Live sessions by id, bounded in number and age."""

    def __init__(self, max_sessions: int, ttl: float, max_requests: int) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self.max_requests = max_requests
        self._sessions: dict[str, SessionRecord] = {}

    def __len__(self) -> int:
        self.expire()
        return len(self._sessions)

    def full(self) -> bool:
        return len(self) >= self.max_sessions

    def open(self, session_id: str, scope: str, version: str, first_id: str | int) -> None:
        self._sessions[session_id] = SessionRecord(scope, version, time.monotonic(), {first_id}, 1)

    def find(self, session_id: str, scope: str) -> SessionRecord | None:
        """The live session `session_id` of `scope`; None if unknown, expired or another
        principal's (the caller cannot tell which)."""
        self.expire()
        record = self._sessions.get(session_id)
        if record is None or record.scope != scope:
            return None
        record.last_seen = time.monotonic()
        return record

    def admit(self, record: SessionRecord, request_id: str | int) -> bool:
        """Record a request id; False if it was seen before or the budget is spent."""
        if request_id in record.seen_ids or record.requests >= self.max_requests:
            return False
        record.seen_ids.add(request_id)
        record.requests += 1
        return True

    def close(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def expire(self) -> list[str]:
        """Forget sessions idle for more than ``ttl``; returns their ids."""
        cutoff = time.monotonic() - self.ttl
        gone = [sid for sid, record in self._sessions.items() if record.last_seen < cutoff]
        for sid in gone:
            del self._sessions[sid]
        return gone
