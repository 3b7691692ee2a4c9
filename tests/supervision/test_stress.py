"""10,000 processes with links, monitors, names and timers; random kills; nothing leaks."""

from __future__ import annotations

import random
import threading

import pytest

import supervision as sv
from supervision.dispatch_pool import get_pool
from tests.helpers import wait_until

PROCESSES = 10_000
LINKS = 4_000
MONITORED = 2_000
KILLS = 300


class Cell(sv.GenServer):
    def init(self, index):
        sv.send_after(sv.self_pid(), "tick", 600)  # a timer per process, cancelled at exit
        return index

    def handle_call(self, request, from_, state):
        return sv.Reply(state, state)


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@pytest.mark.parametrize("dispatcher", ["pooled", "thread"])
def test_ten_thousand_processes_random_kills_leave_nothing_behind(dispatcher, monkeypatch):
    monkeypatch.setattr(Cell, "dispatcher", dispatcher)
    get_pool()  # the shared pool's threads exist before the baseline is taken
    rng = random.Random(20261129)
    threads_before = threading.active_count()
    stats_before = sv.kernel_stats()

    pids = [Cell.start(i, name=f"cell-{i}" if i % 10 == 0 else None) for i in range(PROCESSES)]
    assert sv.kernel_stats()["processes"] == stats_before["processes"] + PROCESSES
    assert sv.kernel_stats()["timers"] >= PROCESSES

    parent = list(range(PROCESSES))
    for _ in range(LINKS):
        a, b = rng.randrange(PROCESSES), rng.randrange(PROCESSES)
        pids[a]._process.link(pids[b]._process)
        parent[_find(parent, a)] = _find(parent, b)

    watched = rng.sample(range(PROCESSES), MONITORED)
    refs = {sv.monitor(pids[i]): i for i in watched}

    victims = rng.sample(range(PROCESSES), KILLS)
    for index in victims:
        sv.exit(pids[index], "kill")

    doomed_roots = {_find(parent, i) for i in victims}
    expected_dead = {i for i in range(PROCESSES) if _find(parent, i) in doomed_roots}
    alive = {i for i, pid in enumerate(pids) if pid.is_alive()}
    assert alive == set(range(PROCESSES)) - expected_dead
    for index in victims:
        assert pids[index]._process.exit_reason == "killed"

    # every monitored process that died produced exactly one Down
    downs: list[sv.Down] = []
    expected_downs = sum(1 for i in watched if i in expected_dead)
    for _ in range(expected_downs):
        downs.append(sv.receive(10, match=lambda m: isinstance(m, sv.Down)))
    assert len({d.ref for d in downs}) == expected_downs
    assert all(refs[d.ref] in expected_dead and d.reason == "killed" for d in downs)

    # names of the dead are gone; names of the living still resolve to them
    for i in range(0, PROCESSES, 10):
        assert sv.whereis(f"cell-{i}") == (pids[i] if i in alive else None)
    sample = rng.sample(sorted(alive), 50)
    assert [sv.call(pids[i], "get") for i in sample] == sample

    for i in alive:
        sv.exit(pids[i], "kill")
    for ref in refs:
        sv.demonitor(ref, flush=True)

    wait_until(lambda: sv.kernel_stats()["processes"] == stats_before["processes"], timeout=30)
    after = sv.kernel_stats()
    assert after["registered"] == stats_before["registered"]
    assert after["monitors"] == stats_before["monitors"]
    assert after["links"] == stats_before["links"]
    assert after["timers"] == stats_before["timers"]
    wait_until(lambda: threading.active_count() <= threads_before + 1, timeout=30)
    assert sv.self_pid()._process.pending() == 0
