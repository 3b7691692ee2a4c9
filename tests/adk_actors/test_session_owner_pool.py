"""A fresh in-memory session service used first by many pooled servers at once (issue
20's latency benchmark found it: 64 Runner calls on a new service stalled for the
service's timeout and failed ``unavailable``). Its first operation asks the session
owner for tables; the owner must never need a pool thread that the waiting callers
hold (OTP keeps such a singleton on its own scheduler the same way: here, its own
thread, as the supervisors)."""

from __future__ import annotations

import threading

import adk_actors as adk
import supervision as sv
from supervision.dispatch_pool import get_pool

SERVERS = 48  # more than the pool may ever have threads for (the bound is checked)


class _FirstUser(sv.GenServer):
    def init(self, args: tuple[object, list[object], threading.Barrier]) -> tuple:
        return args

    def handle_cast(self, msg: object, state: tuple) -> tuple:
        sessions, results, barrier = state
        try:
            barrier.wait(10)  # every server holds a pool thread before anyone goes on
        except threading.BrokenBarrierError:
            pass
        try:
            results.append(sessions.list_sessions("app", "u"))
        except adk.AdkError as error:
            results.append(error.reason)
        return state


def test_many_pooled_first_users_of_a_fresh_service_all_get_an_answer():
    adk.start()
    pool = get_pool()
    parties = min(SERVERS, pool.max_threads)
    sessions = adk.sessions.InMemorySessionService(timeout=3.0)
    results: list[object] = []
    barrier = threading.Barrier(parties)
    servers = [_FirstUser.start((sessions, results, barrier)) for _ in range(parties)]
    for server in servers:
        sv.cast(server, "go")
    done = threading.Event()

    def wait_all() -> None:
        while len(results) < parties:
            threading.Event().wait(0.01)
        done.set()

    threading.Thread(target=wait_all, daemon=True).start()
    try:
        assert done.wait(30)
        assert results == [[]] * parties  # no "unavailable": the owner always answered
    finally:
        for server in servers:
            sv.stop(server)
        sessions.close()
