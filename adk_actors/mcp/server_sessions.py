"""The MCP server's own session table: what the SDK's session manager does not enforce.

The SDK's `StreamableHTTPSessionManager` owns the protocol session (its transport and
server task); this table, kept by `McpHttpApp` beside it, adds the spec's rules: each
session is bound to the SHA-256 scope of the principal that opened it (another
principal gets the same 404 as an unknown id), keeps its negotiated protocol version
(a later request must name it), goes through `SessionPhase` (``AWAITING_INITIALIZED``:
only ``ping`` is served until the client confirms ``notifications/initialized``;
``READY``; ``EXHAUSTED`` once it has admitted ``max_session_requests`` requests: it is
then closed, so the next request gets 404 and the client initializes again), refuses a
request id it has seen among its last `id_window` ids (``-32600``; the window is
bounded, never the whole history), and expires ``session_ttl`` seconds after its last
request (a request still being answered keeps it). The table holds at most ``max_sessions`` sessions, counting the initializes
in progress (`reserve` takes a slot before the SDK opens the session, `release` gives
it back), so concurrent initializes never open more. Everything runs on the listener's
event loop, so no lock is needed.
"""

from __future__ import annotations

import enum
import time
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_ID_WINDOW = 10_000
"""The most request ids a session remembers (the spec's default request budget)."""


class SessionPhase(enum.Enum):
    AWAITING_INITIALIZED = "awaiting_initialized"
    READY = "ready"
    EXHAUSTED = "exhausted"


_NEXT_PHASES = {
    SessionPhase.AWAITING_INITIALIZED: (SessionPhase.READY, SessionPhase.EXHAUSTED),
    SessionPhase.READY: (SessionPhase.EXHAUSTED,),
    SessionPhase.EXHAUSTED: (),
}


class Admission(enum.Enum):
    """What `SessionTable.admit` says of a request."""

    ADMITTED = "admitted"
    REPEATED = "repeated"
    """The id is among the session's recent ids: ``-32600``."""
    EXHAUSTED = "exhausted"
    """The session's budget is spent: it is closed (404, initialize again)."""


@dataclass
class SessionRecord:
    scope: str
    version: str
    last_seen: float
    seen_ids: OrderedDict[str | int, None] = field(default_factory=OrderedDict)
    requests: int = 0
    phase: SessionPhase = SessionPhase.AWAITING_INITIALIZED
    in_flight: int = 0
    """Requests of this session being answered: an idle session with some is not
    expired, and an exhausted one is ended in the SDK only once they are done."""

    def move(self, phase: SessionPhase) -> None:
        """Go to `phase`; a transition the lifecycle does not have is a bug."""
        if phase not in _NEXT_PHASES[self.phase]:
            raise RuntimeError(f"session phase {self.phase.value} -> {phase.value}")
        self.phase = phase

    @property
    def ready(self) -> bool:
        return self.phase is SessionPhase.READY


class SessionTable:
    """Live sessions by id, bounded in number, age and remembered ids."""

    def __init__(self, max_sessions: int, ttl: float, max_requests: int) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self.max_requests = max_requests
        self.id_window = min(max_requests, MAX_ID_WINDOW)
        self._sessions: dict[str, SessionRecord] = {}
        self._reserved = 0

    def __len__(self) -> int:
        self.expire()
        return len(self._sessions)

    def reserve(self) -> bool:
        """Take a slot for an initialize in progress; False when the table is full."""
        if len(self) + self._reserved >= self.max_sessions:
            return False
        self._reserved += 1
        return True

    def release(self) -> None:
        """Give back a slot taken by `reserve` (opened or not)."""
        self._reserved -= 1

    def open(self, session_id: str, scope: str, version: str, first_id: str | int) -> None:
        """Record a session the SDK opened on a reserved slot (the caller then `release`s)."""
        record = SessionRecord(scope, version, time.monotonic())
        self._sessions[session_id] = record
        self._remember(record, first_id)

    def find(self, session_id: str, scope: str) -> SessionRecord | None:
        """The live session `session_id` of `scope`; None if unknown, expired or another
        principal's (the caller cannot tell which)."""
        self.expire()
        record = self._sessions.get(session_id)
        if record is None or record.scope != scope:
            return None
        record.last_seen = time.monotonic()
        return record

    def admit(self, session_id: str, record: SessionRecord, request_id: str | int) -> Admission:
        """May session `session_id` serve `request_id`? An exhausted session is closed
        here; an admitted request is counted only by `count` (a request refused for
        another reason, e.g. busy, may be sent again with its id)."""
        if record.requests >= self.max_requests:
            record.move(SessionPhase.EXHAUSTED)
            self.close(session_id)
            return Admission.EXHAUSTED
        if request_id in record.seen_ids:
            return Admission.REPEATED
        return Admission.ADMITTED

    def count(self, record: SessionRecord, request_id: str | int) -> None:
        """Remember an admitted request's id and count it against the budget."""
        self._remember(record, request_id)

    def _remember(self, record: SessionRecord, request_id: str | int) -> None:
        record.seen_ids[request_id] = None
        if len(record.seen_ids) > self.id_window:
            record.seen_ids.popitem(last=False)
        record.requests += 1

    def close(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def expire(self) -> list[str]:
        """Forget sessions idle for more than ``ttl`` (none with a request in flight);
        returns their ids."""
        cutoff = time.monotonic() - self.ttl
        gone = [
            sid
            for sid, record in self._sessions.items()
            if record.last_seen < cutoff and record.in_flight == 0
        ]
        for sid in gone:
            del self._sessions[sid]
        return gone
