"""`InMemorySessionService`: sessions in tables owned by the session-owner process.

Like an ETS table, the tables belong to a GenServer in the application tree
(``adk.sessions``): they are created and dropped by it, and they die with it (an
operation on the tables of a dead owner fails ``unavailable``). A service asks for its
tables on its first operation, not when it is created, so creating one starts nothing;
that operation needs the application running (``unavailable``, "call adk.start()
first", otherwise). Operations run in the caller's thread, each as one atomic step
under the tables' mutex, so no request queues behind another session's in a mailbox;
`SessionService.lock` adds an explicit per-session lock on top; reads take the same
path as writes. Records are copied in and out, so a failed step leaves nothing
half-written; events are stored frozen (`providers.frozen.share`), so readers share
them and nobody can change them (each reader gets empty fields of its own). Continuations (``_adk:paused:`` keys) sit in their own
table beside the records, as in LMDB.

The owner's protocol is typed (`NewTable`, `DropTable`; a malformed request is
answered `Refused` and changes nothing).
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from adk_actors.events import Event
from adk_actors.sessions.core import SessionRecord
from adk_actors.sessions.service import SessionService
from providers.errors import AdkError
from providers.frozen import Refill, share
from supervision import CallTimeout, From, GenServer, Pid, ProcessExit, Reply, call, self_pid
from supervision.logs import get_logger

OWNER_NAME = "adk.sessions"
_table_ids = itertools.count(1)
_log = get_logger("adk.sessions")


class Tables:
    """One service's tables: created, held and dropped by the session owner `owner`."""

    def __init__(self, table_id: int, owner: Pid) -> None:
        self.table_id = table_id
        self.owner = owner
        self.closed = False
        self.mutex = threading.Lock()
        self.sessions: dict[tuple[str, str, str], SessionRecord] = {}
        self.events: dict[tuple[str, str, str], list[tuple[Event, Refill | None]]] = {}
        """Per session: each event as `providers.frozen.share` keeps it."""
        self.scopes: dict[tuple[str, ...], dict[str, Any]] = {}
        self.continuations: dict[tuple[str, str, str], dict[str, Any]] = {}


class _MemoryStorage:
    def __init__(self, tables: Tables) -> None:
        self._t = tables

    def get_session(self, app: str, user: str, session_id: str) -> SessionRecord | None:
        record = self._t.sessions.get((app, user, session_id))
        return None if record is None else msgspec.structs.replace(record, state=dict(record.state))

    def put_session(self, record: SessionRecord) -> None:
        self._t.sessions[(record.app_name, record.user_id, record.id)] = record

    def delete_session(self, app: str, user: str, session_id: str) -> None:
        self._t.sessions.pop((app, user, session_id), None)
        self._t.events.pop((app, user, session_id), None)
        self._t.continuations.pop((app, user, session_id), None)

    def list_sessions(self, app: str, user: str) -> list[SessionRecord]:
        return [r for (a, u, _), r in self._t.sessions.items() if a == app and u == user]

    def get_scope_state(self, scope: tuple[str, ...]) -> dict[str, Any]:
        return dict(self._t.scopes.get(scope, {}))

    def put_scope_state(self, scope: tuple[str, ...], state: dict[str, Any]) -> None:
        self._t.scopes[scope] = copy.deepcopy(state)

    def append_event(
        self, record: SessionRecord, seq: int, event: Event, encoded: bytes | None = None
    ) -> None:
        """Keep a frozen copy (`providers.frozen.share`): every reader shares it, and
        neither the appender nor a reader can change the stored history afterwards."""
        self._t.events.setdefault(_id(record), []).append(share(event))

    def replace_events(self, record: SessionRecord, events: list[Event]) -> None:
        self._t.events[_id(record)] = [share(event) for event in events]

    def events(self, record: SessionRecord) -> list[Event]:
        return [
            event if refill is None else refill(event)  # `reader_copy`, inlined: per event
            for event, refill in self._t.events.get(_id(record), ())
        ]

    def get_continuation(self, record: SessionRecord, key: str) -> Any:
        return self._t.continuations.get(_id(record), {}).get(key)

    def put_continuation(self, record: SessionRecord, key: str, value: Any) -> None:
        if value is not None:
            self._t.continuations.setdefault(_id(record), {})[key] = value
            return
        stored = self._t.continuations.get(_id(record))
        if stored is not None:
            stored.pop(key, None)
            if not stored:
                del self._t.continuations[_id(record)]

    def continuations(self, record: SessionRecord) -> dict[str, Any]:
        return dict(self._t.continuations.get(_id(record), {}))


def _id(record: SessionRecord) -> tuple[str, str, str]:
    return (record.app_name, record.user_id, record.id)


# -- the session owner's protocol -------------------------------------------------------


class NewTable(NamedTuple):
    """Call: a new, empty set of tables owned by the session owner; answered `Tables`."""


class DropTable(NamedTuple):
    """Call: drop the tables `table_id` (their service fails ``unavailable`` from then
    on); answered True if they existed, False otherwise."""

    table_id: int


class Refused(NamedTuple):
    """Answer to a malformed request: a stable `reason` and a detail. Nothing changed."""

    reason: str
    detail: str


class SessionOwner(GenServer):
    """Owns every in-memory session table: creates and drops them; they die with it.

    On a thread of its own, as the supervisors are: a service's first operation asks
    it for tables from wherever that operation runs, often a pooled server's handler
    (an invocation reading its history). Were it pooled too, many invocations starting
    at once on a fresh service could hold every pool thread waiting for its answer,
    and it would get none until their calls timed out."""

    dispatcher = "thread"

    def init(self, args: Any) -> dict[int, Tables]:
        return {}

    def handle_call(self, request: object, from_: From, state: dict[int, Tables]) -> Reply:
        match request:
            case NewTable():
                tables = Tables(next(_table_ids), self_pid())
                state[tables.table_id] = tables
                return Reply(tables, state)
            case DropTable(int() as table_id) if not isinstance(table_id, bool):
                dropped = state.pop(table_id, None)
                if dropped is not None:
                    dropped.closed = True
                return Reply(dropped is not None, state)
        return Reply(
            Refused("invalid_request", f"not a session owner request: {_describe(request)}"), state
        )

    def handle_cast(self, msg: object, state: dict[int, Tables]) -> dict[int, Tables]:
        _log.warning("adk.sessions.invalid_message", via="cast", kind=type(msg).__name__)
        return state  # the protocol is calls only: nothing changes

    def handle_info(self, msg: object, state: dict[int, Tables]) -> dict[int, Tables]:
        _log.warning("adk.sessions.invalid_message", via="info", kind=type(msg).__name__)
        return state


def _describe(request: object) -> str:
    """A bounded, value-free description of a request (its type, and its tag if a tuple)."""
    if isinstance(request, tuple) and request and isinstance(request[0], str):
        return f"{type(request).__name__} {request[0][:40]!r}"
    return type(request).__name__


class InMemorySessionService(SessionService):
    """Sessions kept in memory, in tables owned by the application's session owner.

    Creating one starts nothing: the tables are asked for on the first operation (once,
    whichever thread gets there first), which needs the application running.
    """

    def __init__(self, timeout: float = 30.0) -> None:
        self._timeout = timeout
        self._tables: Tables | None = None
        self._closed = False
        self._acquire = threading.Lock()

    def close(self) -> None:
        """Drop this service's tables; every operation after it fails ``unavailable``."""
        with self._acquire:
            self._closed = True
            tables, self._tables = self._tables, None
        if tables is None:
            return
        tables.closed = True
        try:
            call(OWNER_NAME, DropTable(tables.table_id), self._timeout)
        except (ProcessExit, CallTimeout):
            pass  # the owner is gone (and its tables with it), or will drop them when it goes

    def _run(self, operation: Callable[..., Any], *args: Any) -> Any:
        tables = self._tables or self._first_tables()
        if tables.closed or not tables.owner.is_alive():
            raise AdkError(
                "unavailable", "this session service's tables are gone (closed or owner restarted)"
            )
        with tables.mutex:
            return operation(_MemoryStorage(tables), *args)

    def _first_tables(self) -> Tables:
        """This service's tables, asked of the session owner on first use (thread-safe:
        one table set per service, however many threads start at once)."""
        with self._acquire:
            if self._tables is not None:
                return self._tables
            if self._closed:
                raise AdkError("unavailable", "this session service is closed")
            try:
                answer = call(OWNER_NAME, NewTable(), self._timeout)
            except ProcessExit:
                raise AdkError(
                    "unavailable",
                    "the application is not running (no session owner): call adk.start() first",
                ) from None
            except CallTimeout:
                raise AdkError(
                    "unavailable", f"the session owner did not answer within {self._timeout} s"
                ) from None
            if not isinstance(answer, Tables):
                raise AdkError("unavailable", f"the session owner refused: {answer!r}")
            self._tables = answer
            return answer
