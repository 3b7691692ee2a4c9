"""Invocations left open by a process that died or stopped are closed.

A SIGKILLed process leaves its open invocations in an LMDB file; the next process
that opens the file closes each with one ``abandoned`` terminal (pauses stay
resumable). `adk.stop()` closes the invocations in flight with a ``shutdown``
terminal. Real LMDB files, real subprocesses, no mocks."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from structlog.testing import capture_logs

import adk_actors as adk
import supervision as sv
from adk_actors.runner.request import run_name
from adk_actors.sessions import owner
from tests.helpers import wait_until

IN_FLIGHT = 50


def child_script(path: str, in_flight: int, paused: int, stop: bool) -> str:
    """Start `paused` runs that pause for approval and `in_flight` runs blocked in
    their model forever; print READY once all are stored as such; then either wait
    to be killed or (`stop`) stop the application and exit."""
    return textwrap.dedent(
        f"""
        import sys, threading, time
        import adk_actors as adk

        class Publish(adk.Tool):
            name = "publish"
            description = "Publish."
            parameters = {{"type": "object", "properties": {{}}, "additionalProperties": False}}
            def require_confirmation(self, args, ctx):
                return {{"required": True, "hint": "publish"}}
            def execute(self, args, ctx):
                return {{"published": True}}

        forever = threading.Event()
        def blocked(history, tools):
            forever.wait()
            return {{"text": "never"}}

        adk.start()
        store = adk.sessions.LmdbSessionService({path!r})
        pauser = adk.spawn_agent("Pauser", {{"provider": adk.ScriptedProvider(
            [{{"tool_calls": [{{"name": "publish", "args": {{}}}}]}}] * {max(paused, 1)})}},
            tools=[Publish()])
        for n in range({paused}):
            assert isinstance(adk.Runner(pauser, "app", store).run("u", f"p{{n}}", "go"), adk.Paused)
        stuck = adk.spawn_agent("Stuck", {{"provider": adk.ScriptedProvider(fn=blocked),
                                          "max_concurrent_invocations": {in_flight + 1}}})
        runner = adk.Runner(stuck, "app", store, run_timeout=3600)
        runs = [adk.runs.start(runner, "u", f"s{{n}}", f"hello {{n}}") for n in range({in_flight})]

        def all_open():
            return sum(
                any(k.startswith("_adk:open:") for k in s.state)
                for s in store.list_sessions("app", "u", limit=500, include_internal=True)
            )

        while all_open() < {in_flight}:
            time.sleep(0.01)
        print("READY", flush=True)
        if {stop!r}:
            adk.stop()
            print("STOPPED", flush=True)
        else:
            forever.wait()
        """
    )


def run_child(path, in_flight, paused, stop):
    child = subprocess.Popen(
        [sys.executable, "-c", child_script(str(path), in_flight, paused, stop)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    assert read_line(child, 120) == "READY"
    return child


def read_line(child, timeout):
    """The child's next line of output (killing it if none comes within `timeout`)."""
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    if not ready:
        child.kill()
        child.wait()
        raise AssertionError("the child printed nothing in time")
    return child.stdout.readline().strip()


TERMINAL_REASONS = ("abandoned", "shutdown")


def check_consistent(store, expect_open=0):
    """Every session reads back whole; every invocation in it has exactly one terminal
    event (final, error or pause) and nothing after it, and no invocation is open."""
    terminals: dict[str, list] = {}
    sessions = store.list_sessions("app", "u", limit=500, include_internal=True)
    for listed in sessions:
        session = store.get_session("app", "u", listed.id, include_internal=True)
        assert session.revision >= len(session.events)
        open_keys = [k for k in session.state if k.startswith("_adk:open:")]
        assert len(open_keys) == expect_open, (session.id, open_keys)
        seen_end: set[str] = set()
        for event in session.events:
            inv = event.invocation_id
            if event.actions.resume is not None:  # a resume's claim reopens a pause
                assert terminals[inv][-1].actions.pause is not None
                seen_end.discard(inv)
            assert inv not in seen_end, "an event after its invocation's terminal"
            if event.is_final or event.error is not None or event.actions.pause is not None:
                terminals.setdefault(inv, []).append(event)
                seen_end.add(inv)
        invocations = {e.invocation_id for e in session.events}
        assert invocations == seen_end, (session.id, invocations - seen_end)
    return sessions, terminals


def test_a_sigkilled_process_leaves_no_invocation_open(tmp_path):
    path = tmp_path / "sessions"
    child = run_child(path, IN_FLIGHT, paused=3, stop=False)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    store = adk.sessions.LmdbSessionService(path)  # its first open here: recovery
    sessions, terminals = check_consistent(store)
    assert len(sessions) == IN_FLIGHT + 3
    abandoned = [t for ts in terminals.values() for t in ts if t.error is not None]
    assert len(abandoned) == IN_FLIGHT
    assert all(t.error.reason == "abandoned" and t.author == "runner" for t in abandoned)
    assert all(len(ts) == 1 for ts in terminals.values())  # exactly one terminal each
    for n in range(IN_FLIGHT):  # the user's message, then the abandonment
        events = store.get_session("app", "u", f"s{n}").events
        assert [e.author for e in events] == ["user", "runner"]
        assert events[0].text() == f"hello {n}"
    # pauses are not abandoned: they stay resumable
    for n in range(3):
        state = store.get_session("app", "u", f"p{n}", include_internal=True).state
        assert any(k.startswith("_adk:paused:") for k in state)
    publisher = adk.spawn_agent(
        "Pauser", {"provider": adk.ScriptedProvider([{"text": "released"}])}, tools=[Publish()]
    )
    assert adk.Runner(publisher, "app", store).resume("u", "p0", {"confirmed": True}) == "released"
    _, terminals = check_consistent(store)  # the pause, then the resumed final
    # a second recovery (another process, or this one again) stores nothing more
    assert store.recover_abandoned() == 0
    store.close()
    again = adk.sessions.LmdbSessionService(path)
    _, terminals_again = check_consistent(again)
    assert sum(len(ts) for ts in terminals_again.values()) == sum(
        len(ts) for ts in terminals.values()
    )
    again.close()


class Publish(adk.Tool):
    name = "publish"
    description = "Publish."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    def require_confirmation(self, args, ctx):
        return {"required": True, "hint": "publish"}

    def execute(self, args, ctx):
        return {"published": True}


def test_recovery_runs_once_however_many_processes_open_the_file_at_once(tmp_path):
    path = tmp_path / "sessions"
    child = run_child(path, 10, paused=0, stop=False)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)
    opener = textwrap.dedent(
        f"""
        import adk_actors as adk
        adk.sessions.LmdbSessionService({str(path)!r}).close()
        """
    )
    openers = [subprocess.Popen([sys.executable, "-c", opener]) for _ in range(4)]
    store = adk.sessions.LmdbSessionService(path)
    assert all(p.wait(60) == 0 for p in openers)
    _, terminals = check_consistent(store)
    assert len(terminals) == 10 and all(len(ts) == 1 for ts in terminals.values())
    store.close()


def test_adk_stop_closes_the_invocations_in_flight_with_shutdown(tmp_path):
    path = tmp_path / "sessions"
    child = run_child(path, 20, paused=2, stop=True)
    assert read_line(child, 60) == "STOPPED"
    child.kill()  # its sync turns may keep the interpreter alive: nothing is open any more
    child.wait(30)
    store = adk.sessions.LmdbSessionService(path, recover=False)  # nothing left to recover
    _, terminals = check_consistent(store)
    ends = [t for ts in terminals.values() for t in ts if t.error is not None]
    assert len(ends) == 20 and all(t.error.reason == "shutdown" for t in ends)
    assert all(len(ts) == 1 for ts in terminals.values())
    store.close()


def test_stop_in_process_ends_running_invocations_with_shutdown(tmp_path):
    store = adk.sessions.LmdbSessionService(tmp_path / "s")
    gate = threading.Event()

    def blocked(history, tools):
        gate.wait(30)
        return {"text": "late"}

    agent = adk.spawn_agent("Blocked", {"provider": adk.ScriptedProvider(fn=blocked)})
    runner = adk.Runner(agent, "app", store)
    outcomes: list = []

    def run(n):
        try:
            outcomes.append(runner.run("u", f"s{n}", "hi"))
        except adk.AdkError as error:
            outcomes.append(error.reason)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    wait_until(
        lambda: (
            sum(
                any(k.startswith("_adk:open:") for k in s.state)
                for s in store.list_sessions("app", "u", include_internal=True)
            )
            == 5
        )
    )
    adk.stop()
    gate.set()
    for thread in threads:
        thread.join(10)
    assert outcomes == ["shutdown"] * 5
    _, terminals = check_consistent(store)
    assert all(ts[0].error.reason == "shutdown" for ts in terminals.values())
    store.close()
    adk.start()


def test_owners_live_and_gone():
    me = owner.identity()
    assert not owner.owner_gone(me)
    dead = subprocess.Popen([sys.executable, "-c", "print(1)"], stdout=subprocess.DEVNULL)
    dead.wait(30)
    boot, namespace, _, _ = me.split(":")
    assert owner.owner_gone(f"{boot}:{namespace}:{dead.pid}:1")  # gone (or pid reused: other start)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with open(f"/proc/{live.pid}/stat") as file:
            stat = file.read().rpartition(")")[2].split()
        assert not owner.owner_gone(f"{boot}:{namespace}:{live.pid}:{stat[19]}")
        assert owner.owner_gone(f"{boot}:{namespace}:{live.pid}:{int(stat[19]) + 1}")  # reused
    finally:
        live.kill()
        live.wait()
    other_boot = ("0" if boot[0] != "0" else "1") + boot[1:]
    assert owner.owner_gone(f"{other_boot}:{namespace}:{os.getpid()}:1")  # rebooted since
    assert not owner.owner_gone(f"{boot}:999:{dead.pid}:1")  # another namespace: unknown
    marker = owner.marker("tok@en")
    assert owner.token_of(marker) == "tok@en" and owner.owner_of(marker) == me
    assert owner.token_of("legacy") == "legacy" and owner.owner_of("legacy") is None


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_an_open_invocation_of_this_process_or_a_live_one_is_kept(tmp_path):
    path = tmp_path / "sessions"
    child = run_child(path, 5, paused=0, stop=False)
    try:
        store = adk.sessions.LmdbSessionService(path)  # the child still runs them
        check_consistent_open = [
            s
            for s in store.list_sessions("app", "u", include_internal=True)
            if any(k.startswith("_adk:open:") for k in s.state)
        ]
        assert len(check_consistent_open) == 5
        assert store.recover_abandoned() == 0
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    assert store.recover_abandoned() == 5  # gone now
    check_consistent(store)
    store.close()


def logged(logs, event, **fields):
    """The first captured log entry named `event` with `fields`, or None."""
    for entry in list(logs):
        if entry["event"] == event and all(entry.get(k) == v for k, v in fields.items()):
            return entry
    return None


@pytest.mark.parametrize("backend", ["memory", "lmdb"])
def test_a_server_killed_on_its_way_to_its_opening_never_writes_it(backend, tmp_path):
    """The kernel's untrappable ``kill`` ends an invocation server while its handler's
    thread still runs towards the opening write. The run registry's lost-run path
    (`Runner.abandon`) reads the session first and finds nothing to close; the orphaned
    write then finds the session free, but its fence (liveness checked inside the
    write's step) refuses it: the session holds the invocation whole or not at all,
    here not at all. The test holds the session's lock to make that interleaving
    certain: the server blocks in its first read of the session, after its handler
    started (`adk.invocation.preparing`), and only moves on once the kill and the
    abandonment are done."""
    if backend == "memory":
        store = adk.sessions.InMemorySessionService()
    else:
        store = adk.sessions.LmdbSessionService(tmp_path / "s")
    agent = adk.spawn_agent("Opener", {"provider": adk.ScriptedProvider([{"text": "ok"}])})
    runner = adk.Runner(agent, "app", store)
    store.create_session("app", "u", "s")
    with capture_logs() as logs:
        with store.lock("app", "u", "s"):
            run_id = adk.runs.start(runner, "u", "s", "hello")
            preparing = wait_until(lambda: logged(logs, "adk.invocation.preparing"))
            inv = preparing["invocation_id"]
            sv.exit(sv.whereis(run_name(run_id)), "kill")  # its handler's thread runs on
            outcome = adk.runs.wait(run_id, timeout=10)  # the registry's: the server died
            assert outcome == adk.Failed(("run_actor_exit", "killed"))
            assert runner.abandon("u", "s", inv, "killed") is None  # nothing to close yet
        # the orphaned thread now reaches its opening write: refused, it logs its end;
        # stored, the session shows it
        wait_until(
            lambda: (
                logged(logs, "adk.invocation.ended", invocation_id=inv)
                or store.get_session("app", "u", "s").events
            ),
            timeout=10,
        )
    session = store.get_session("app", "u", "s", include_internal=True)
    assert session.events == ()
    assert not [key for key in session.state if key.startswith("_adk:open:")]
    # the session and the agent's lane are free: the next invocation runs whole
    assert runner.run("u", "s", "again") == "ok"
    session = store.get_session("app", "u", "s", include_internal=True)
    assert [e.author for e in session.events] == ["user", "Opener"]
    assert not [key for key in session.state if key.startswith("_adk:open:")]
    store.close()
