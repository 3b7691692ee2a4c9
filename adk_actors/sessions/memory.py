"""`InMemorySessionService`: sessions in tables owned by the session-owner process.

Like an ETS table, the tables belong to a GenServer in the application tree
(``adk.sessions``): they are created and dropped by it, and they die with it (an
operation on the tables of a dead owner fails ``unavailable``). Operations run in
the caller's thread, each as one atomic step under the tables' mutex, so no request
queues behind another session's in a mailbox; `SessionService.lock` adds an explicit
per-session lock on top. Records are copied in and out, so a failed step leaves
nothing half-written.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable
from typing import Any

import msgspec

from adk_actors.events import Event
from adk_actors.sessions.core import SessionRecord
from adk_actors.sessions.service import SessionService
from providers.errors import AdkError
from supervision import From, GenServer, Pid, ProcessExit, Reply, call, self_pid

OWNER_NAME = "adk.sessions"
_table_ids = itertools.count(1)


class _Tables:
    def __init__(self, owner: Pid) -> None:
        self.owner = owner
        self.closed = False
        self.mutex = threading.Lock()
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

    def replace_events(self, record: SessionRecord, events: list[Event]) -> None:
        self._t.events[(record.app_name, record.user_id, record.id)] = list(events)

    def events(self, record: SessionRecord) -> list[Event]:
        return list(self._t.events.get((record.app_name, record.user_id, record.id), ()))


class SessionOwner(GenServer):
    """Owns every in-memory session table: creates and drops them; they die with it."""

    def init(self, args: Any) -> dict[int, _Tables]:
        return {}

    def handle_call(self, request: tuple[Any, ...], from_: From, state: dict[int, _Tables]) -> Any:
        if request[0] == "new_table":
            table_id = next(_table_ids)
            state[table_id] = _Tables(self_pid())
            return Reply((table_id, state[table_id]), state)
        if request[0] == "drop_table":
            tables = state.pop(request[1], None)
            if tables is not None:
                tables.closed = True
            return Reply(None, state)
        return Reply(("error", AdkError("unknown_request", "no such session request")), state)


class InMemorySessionService(SessionService):
    """Sessions kept in memory, in tables owned by the application's session owner."""

    def __init__(self, timeout: float = 30.0) -> None:
        from adk_actors.app import ensure_started

        ensure_started()
        self._timeout = timeout
        self._table, self._tables = call(OWNER_NAME, ("new_table",), timeout)

    def close(self) -> None:
        self._tables.closed = True
        try:
            call(OWNER_NAME, ("drop_table", self._table), self._timeout)
        except ProcessExit:
            pass  # the owner is gone, and its tables with it

    def _run(self, operation: Callable[..., Any], *args: Any) -> Any:
        tables = self._tables
        if tables.closed or not tables.owner.is_alive():
            raise AdkError(
                "unavailable", "this session service's tables are gone (closed or owner restarted)"
            )
        with tables.mutex:
            return operation(_MemoryStorage(tables), *args)
