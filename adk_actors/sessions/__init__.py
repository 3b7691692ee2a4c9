"""Sessions: the durable conversation layer (in memory or in LMDB)."""

from adk_actors.sessions.core import Session
from adk_actors.sessions.lmdb_store import LmdbSessionService
from adk_actors.sessions.memory import InMemorySessionService
from adk_actors.sessions.service import SessionService

__all__ = ["InMemorySessionService", "LmdbSessionService", "Session", "SessionService"]
