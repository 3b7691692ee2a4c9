"""`InMemorySessionService`: sessions in tables owned by the session-owner process.

The owner is a GenServer in the application tree (``adk.sessions``); every operation
is one call, run to completion inside its handler, so each step is atomic. Records
are copied in and out, so a failed step leaves nothing half-written.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

import msgspec

from adk_actors.events import Event
from adk_actors.sessions.core import SessionRecord
from adk_actors.sessions.service import SessionService
from providers.errors import AdkError
from supervision import From, GenServer, Reply, call

OWNER_NAME = "adk.sessions"
_table_ids = itertools.count(1)


class _Tables:
    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str, str], SessionRecord] = {}
        self.events: dict[tuple[str, str, str], list[Event]] = {}
        self.scopes: dict[tuple[str, ...], dict[str, Any]] = {}


class _MemoryStorage:
    def __init__(self, tables: _Tables) -> None:
        self._t = tables

    def get_session(self, app: str, user: str, session_id: str) -> SessionRecord | None:
        record = self._t.sessions.get((app, user, session_id))
        return None if record is None else msgspec.structs.replace(record, state=dict(record.state))

    def put_session(self, record: SessionRecord) -> None:
        self._t.sessions[(record.app_name, record.user_id, record.id)] = record

    def delete_session(self, app: str, user: str, session_id: str) -> None:
        self._t.sessions.pop((app, user, session_id), None)
        self._t.events.pop((app, user, session_id), None)

    def list_sessions(self, app: str, user: str) -> list[SessionRecord]:
        return [r for (a, u, _), r in self._t.sessions.items() if a == app and u == user]

    def get_scope_state(self, scope: tuple[str, ...]) -> dict[str, Any]:
        return dict(self._t.scopes.get(scope, {}))

    def put_scope_state(self, scope: tuple[str, ...], state: dict[str, Any]) -> None:
        self._t.scopes[scope] = copy.deepcopy(state)

    def append_event(self, record: SessionRecord, seq: int, event: Event) -> None:
        self._t.events.setdefault((record.app_name, record.user_id, record.id), []).append(event)

    def events(self, record: SessionRecord) -> list[Event]:
        return list(self._t.events.get((record.app_name, record.user_id, record.id), ()))


class SessionOwner(GenServer):
    """Owns every in-memory session table; each request is one atomic step."""

    def init(self, args: Any) -> dict[int, _Tables]:
        return {}

    def handle_call(self, request: tuple[Any, ...], from_: From, state: dict[int, _Tables]) -> Any:
        if request[0] == "new_table":
            table_id = next(_table_ids)
            state[table_id] = _Tables()
            return Reply(table_id, state)
        if request[0] == "drop_table":
            state.pop(request[1], None)
            return Reply(None, state)
        _, table_id, operation, args = request
        tables = state.get(table_id)
        if tables is None:
            return Reply(
                ("error", AdkError("unavailable", "this session service was closed")), state
            )
        try:
            return Reply(("ok", operation(_MemoryStorage(tables), *args)), state)
        except AdkError as error:
            return Reply(("error", error), state)


class InMemorySessionService(SessionService):
    """Sessions kept in memory by the application's session owner."""

    def __init__(self, timeout: float = 30.0) -> None:
        from adk_actors.app import ensure_started

        ensure_started()
        self._timeout = timeout
        self._table = call(OWNER_NAME, ("new_table",), timeout)

    def close(self) -> None:
        call(OWNER_NAME, ("drop_table", self._table), self._timeout)

    def _run(self, operation: Callable[..., Any], *args: Any) -> Any:
        status, value = call(OWNER_NAME, ("op", self._table, operation, args), self._timeout)
        if status == "error":
            raise AdkError(value.reason, value.detail) from None
        return value
