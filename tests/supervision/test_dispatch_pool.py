"""The pooled dispatcher: FIFO per server, one thread at a time, fairness, blocked handlers."""

from __future__ import annotations

import threading
import time

from structlog.testing import capture_logs

import supervision as sv
from supervision.dispatch_pool import QUANTUM, get_pool
from tests.helpers import Recorder, wait_until


class Appender(sv.GenServer):
    dispatcher = "pooled"

    def init(self, args):
        self.running = 0
        self.overlaps = 0
        return []

    def handle_cast(self, msg, state):
        self.running += 1
        if self.running > 1:
            self.overlaps += 1
        time.sleep(0)  # let other threads run, to expose any overlap
        state.append(msg)
        self.running -= 1
        return state

    def handle_call(self, request, from_, state):
        if request == "overlaps":
            return sv.Reply(self.overlaps, state)
        return sv.Reply(list(state), state)


def test_many_pooled_servers_share_a_few_threads():
    pool = get_pool()
    threads_before = threading.active_count()
    pids = [Appender.start_link() for _ in range(2000)]
    assert threading.active_count() <= threads_before + 1
    for index, pid in enumerate(pids):
        sv.cast(pid, index)
    assert [sv.call(pid, "get") for pid in pids] == [[i] for i in range(2000)]
    assert pool.thread_count() <= pool.max_threads


def test_per_server_fifo_and_never_two_threads_at_once():
    pid = Appender.start_link()
    senders = []
    for sender in range(4):

        def send_many(sender=sender):
            for i in range(500):
                sv.cast(pid, (sender, i))

        senders.append(threading.Thread(target=send_many))
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    received = sv.call(pid, "get")
    assert len(received) == 2000
    for sender in range(4):
        assert [i for s, i in received if s == sender] == list(range(500))  # FIFO per sender
    assert sv.call(pid, "overlaps") == 0


def test_a_flooded_server_does_not_starve_the_others():
    log = Recorder()

    class Slowish(sv.GenServer):
        dispatcher = "pooled"

        def handle_cast(self, msg, state):
            time.sleep(0.0005)
            log.add(msg)
            return state

    flooded = [Slowish.start_link() for _ in range(get_pool().threads)]
    for pid in flooded:
        for i in range(QUANTUM * 20):
            sv.cast(pid, ("flood", i))
    quiet = Slowish.start_link()
    sv.cast(quiet, ("quiet", 0))
    wait_until(lambda: ("quiet", 0) in log.snapshot(), timeout=20)
    position = log.snapshot().index(("quiet", 0))
    # the quiet server ran after at most about one quantum per flooded server
    assert position <= QUANTUM * (len(flooded) + 1)


def test_blocked_handler_is_reported_and_others_keep_running():
    release = threading.Event()

    class Blocker(sv.GenServer):
        dispatcher = "pooled"

        def handle_cast(self, msg, state):
            release.wait(10)
            return state

    pool = get_pool()
    blockers = [Blocker.start_link() for _ in range(pool.threads)]
    with capture_logs() as logs:
        for pid in blockers:
            sv.cast(pid, "block")
        other = Appender.start_link()
        sv.cast(other, "still served")
        # every base thread is blocked: the watchdog adds a spare so `other` runs
        assert sv.call(other, "get", timeout=10) == ["still served"]
        wait_until(
            lambda: (
                sum(e["event"] == "supervision.dispatch.handler_blocked" for e in logs)
                >= pool.threads
            )
        )
    blocked = [e for e in logs if e["event"] == "supervision.dispatch.handler_blocked"]
    assert {e["server"] for e in blocked} == {
        "test_blocked_handler_is_reported_and_others_keep_running.<locals>.Blocker"
    }
    assert all(e["seconds"] >= pool.block_warning for e in blocked)
    release.set()
    assert pool.thread_count() <= pool.max_threads


def test_init_runs_as_the_new_process_before_any_message():
    seen = {}

    class Early(sv.GenServer):
        dispatcher = "pooled"

        def init(self, args):
            seen["self"] = sv.self_pid()
            sv.send(sv.self_pid(), "from init")
            time.sleep(0.05)  # nothing may be handled while init runs
            seen["handled_during_init"] = list(self.handled) if hasattr(self, "handled") else []
            self.handled = []
            return args

        def handle_info(self, msg, state):
            self.handled.append(msg)
            return state

        def handle_call(self, request, from_, state):
            return sv.Reply(list(self.handled), state)

    pid = Early.start_link()
    assert seen["self"] == pid and seen["handled_during_init"] == []
    assert sv.call(pid, "get") == ["from init"]
