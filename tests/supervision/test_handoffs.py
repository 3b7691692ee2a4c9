"""OneShotHandoffs: a child spec carries a reference, the child takes the value once."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

import supervision as sv


def test_a_value_is_taken_exactly_once():
    table: sv.OneShotHandoffs[dict[str, Any]] = sv.OneShotHandoffs()
    value = {"request": 1}
    ref = table.put(value)
    assert table.pending() == 1
    assert table.take(ref) is value
    assert table.pending() == 0
    with pytest.raises(sv.HandoffTaken) as info:
        table.take(ref)
    assert info.value.reason == "handoff_taken"
    assert isinstance(info.value, sv.HandoffError | sv.KernelError)
    assert table.discard(ref) is False  # taken: discarding only forgets it
    with pytest.raises(sv.UnknownHandoff):  # forgotten: now unknown, still refused
        table.take(ref)


def test_unknown_and_withdrawn_references_are_refused():
    table: sv.OneShotHandoffs[str] = sv.OneShotHandoffs()
    for ref in ("handoff-never-handed-out", None, 42, ("handoff",)):
        with pytest.raises(sv.UnknownHandoff) as info:
            table.take(ref)
        assert info.value.reason == "unknown_handoff"
        assert table.discard(ref) is False
    ref = table.put("value")
    assert table.discard(ref) is True  # withdrawn before any child took it
    assert table.pending() == 0
    with pytest.raises(sv.UnknownHandoff):
        table.take(ref)


def test_references_are_fresh_and_opaque():
    table: sv.OneShotHandoffs[str] = sv.OneShotHandoffs(prefix="planning")
    refs = {table.put("secret-value") for _ in range(100)}
    assert len(refs) == 100
    assert all(ref.startswith("planning-") and "secret" not in ref for ref in refs)


def test_the_table_is_bounded_with_a_typed_error():
    table: sv.OneShotHandoffs[int] = sv.OneShotHandoffs(3)
    refs = [table.put(n) for n in range(3)]
    with pytest.raises(sv.HandoffsFull) as info:
        table.put(3)
    assert info.value.reason == "busy" and info.value.max_pending == 3
    assert table.pending() == 3
    table.take(refs[0])  # a taken entry frees its place
    table.discard(refs[1])  # and so does a withdrawn one
    table.put(4)
    table.put(5)
    with pytest.raises(sv.HandoffsFull):
        table.put(6)
    for bad in (0, -1, True, 2.5, "3"):
        with pytest.raises(ValueError):
            sv.OneShotHandoffs(bad)  # type: ignore[arg-type]


def test_taken_references_are_remembered_boundedly():
    table: sv.OneShotHandoffs[int] = sv.OneShotHandoffs(2)
    refs = []
    for n in range(3):  # never discarded: the oldest taken reference is forgotten
        refs.append(table.put(n))
        table.take(refs[-1])
    with pytest.raises(sv.UnknownHandoff):
        table.take(refs[0])
    for ref in refs[1:]:
        with pytest.raises(sv.HandoffTaken):
            table.take(ref)


class Taker(sv.GenServer):
    """A child that takes its arguments in `init`, as the upper layers' servers do."""

    table: sv.OneShotHandoffs[dict[str, Any]]

    def init(self, ref: str) -> Any:
        if ref.endswith("-crash-before"):
            raise RuntimeError("crashed before taking")
        try:
            value = self.table.take(ref.removesuffix("-crash-after"))
        except sv.HandoffError:
            return sv.Stop(("shutdown", "handoff_taken"))
        if ref.endswith("-crash-after"):
            raise RuntimeError("crashed after taking")
        return value

    def handle_call(self, request: Any, from_: sv.From, state: Any) -> Any:
        return sv.Reply(state, state)


def start(table: sv.OneShotHandoffs[dict[str, Any]], dyn: sv.Pid, value: Any, suffix: str = ""):
    """What a starter does: put, start with the reference only, discard whatever happened."""
    ref = table.put(value)
    spec = sv.ChildSpec(ref, lambda: Taker.start_link(ref + suffix), restart="temporary")
    try:
        return ref, sv.DynamicSupervisor.start_child(dyn, spec)
    finally:
        table.discard(ref)


def test_a_failed_start_leaves_nothing_behind(monkeypatch):
    table: sv.OneShotHandoffs[dict[str, Any]] = sv.OneShotHandoffs()
    monkeypatch.setattr(Taker, "table", table, raising=False)
    dyn = sv.DynamicSupervisor.start_link()

    ref, pid = start(table, dyn, {"n": 1})
    assert sv.call(pid, "get") == {"n": 1}
    for suffix in ("-crash-before", "-crash-after"):
        with pytest.raises(sv.SupervisorError) as info:
            start(table, dyn, {"secret": "x"}, suffix)
        assert isinstance(info.value.reason, sv.Crash)
        assert table.pending() == 0

    spent = sv.ChildSpec("again", lambda: Taker.start_link(ref), restart="temporary")
    with pytest.raises(sv.SupervisorError) as info:  # a second child on a spent reference
        sv.DynamicSupervisor.start_child(dyn, spent)
    assert info.value.reason == ("shutdown", "handoff_taken")
    assert table.pending() == 0
    sv.exit(dyn, "shutdown")


def test_concurrent_takers_each_value_goes_to_one():
    table: sv.OneShotHandoffs[int] = sv.OneShotHandoffs(1000)
    refs = [table.put(n) for n in range(500)]
    won: list[list[int]] = [[] for _ in range(8)]
    refused = Counter[str]()
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def taker(slot: int) -> None:
        barrier.wait()
        for ref in refs:
            try:
                won[slot].append(table.take(ref))
            except sv.HandoffError as error:
                with lock:
                    refused[error.reason] += 1

    threads = [threading.Thread(target=taker, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(n for values in won for n in values) == list(range(500))
    assert refused == Counter({"handoff_taken": 500 * 7})
    assert table.pending() == 0


def test_concurrent_starters_never_pass_the_bound():
    table: sv.OneShotHandoffs[int] = sv.OneShotHandoffs(50)
    accepted: list[str] = []
    full = Counter[int]()
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def starter(n: int) -> None:
        barrier.wait()
        for i in range(10):
            try:
                ref = table.put(n * 10 + i)
            except sv.HandoffsFull:
                with lock:
                    full[n] += 1
            else:
                with lock:
                    accepted.append(ref)

    threads = [threading.Thread(target=starter, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(accepted) == 50 == table.pending()
    assert sum(full.values()) == 160 - 50
    assert all(table.discard(ref) for ref in accepted)
    assert table.pending() == 0
