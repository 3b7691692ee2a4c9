"""The durable ledger's bounds: retention of completed records (explicit `purge` and
bounded automatic sweeps), the record size bound, bounded metadata, paged listing.
Against `MemoryLedger` and `LmdbLedger`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adk_actors.workflows import ledger as ledger_module
from adk_actors.workflows.ledger import MAX_LIST, MemoryLedger
from adk_actors.workflows.ledger_lmdb import LmdbLedger
from adk_actors.workflows.ledger_rules import MAX_OUTCOME_BYTES, MAX_RECORD_BYTES, MIN_RECORD_BYTES

from ._ledger_support import CP0, CP1, META, checkpoint, ledger, owner, reason, token

__all__ = ["ledger", "owner"]  # fixtures


def finish_at(ledger, iid: str, pid, phase: str, at: float) -> None:
    """Create `iid` and take it to `phase` at wall-clock time `at`."""
    ledger.create(iid, META, CP0)
    mine = token()
    ledger.claim(iid, pid, mine, at - 1, 30)
    ledger.finish(iid, mine, phase, None, CP1, at)


@pytest.fixture(params=["memory", "lmdb"])
def retaining(request, tmp_path):
    """A ledger that keeps completed records for 100 seconds."""
    if request.param == "memory":
        yield MemoryLedger(retention=100.0)
    else:
        store = LmdbLedger(tmp_path / "retaining", retention=100.0)
        yield store
        store.close()


def test_purge_removes_completed_records_once_their_retention_is_over(retaining, owner):
    at = time.time()  # (sweeps on the wall clock must not find them expired yet)
    for n in range(3):
        finish_at(retaining, f"inv-done-{n}", owner.pid, "completed", at + n)
    for phase in ("failed", "paused", "cancelled", "timed_out"):
        finish_at(retaining, f"inv-{phase}", owner.pid, phase, at)
    retaining.create("inv-ready", META, CP0)
    retaining.create("inv-running", META, CP0)
    retaining.claim("inv-running", owner.pid, token(), at, 30)
    everything = retaining.invocation_ids()

    assert retaining.purge(now=at + 99.999) == 0  # retention: exactly 100 s after completion
    assert retaining.purge(now=at + 100, limit=5) == 1
    assert "inv-done-0" not in retaining.invocation_ids()
    assert retaining.purge(now=at + 1_000, limit=1) == 1  # at most `limit` per call
    assert retaining.purge(now=at + 1_000) == 1
    assert retaining.purge(now=at + 1_000) == 0
    assert retaining.invocation_ids() == [i for i in everything if not i.startswith("inv-done")]
    assert reason(lambda: retaining.get("inv-done-2")) == "not_found"
    for bad in (0, -1, MAX_LIST + 1, True):
        assert reason(lambda bad=bad: retaining.purge(limit=bad)) == "invalid_limit"
    assert reason(lambda: retaining.purge(now=float("inf"))) == "invalid_time"


def test_without_a_retention_nothing_is_removed(ledger, owner):
    assert ledger.retention is None
    finish_at(ledger, "inv-kept", owner.pid, "completed", 1_000.0)
    assert ledger.purge(now=1e12) == 0
    ledger.create("inv-other", META, CP0)  # no sweep either
    assert ledger.get("inv-kept").phase == "completed"


def test_retention_is_checked(tmp_path):
    for bad in (0, -1.0, 86_401.0, "60", True, float("nan")):
        assert reason(lambda bad=bad: MemoryLedger(retention=bad)) == "invalid_retention"
        assert (
            reason(lambda bad=bad: LmdbLedger(tmp_path / "bad", retention=bad))
            == "invalid_retention"
        )
    assert LmdbLedger(tmp_path / "ok", retention=60).retention == 60.0


def test_creates_and_completions_sweep_a_bounded_page_at_a_time(retaining, owner, monkeypatch):
    """Automatic retention: each create (and each completing finish) looks at the next
    SWEEP_SCAN records only, continuing where the last sweep stopped."""
    monkeypatch.setattr(ledger_module, "SWEEP_SCAN", 4)
    past = time.time() - 1_000  # their retention (100 s) is long over
    for n in range(10):
        finish_at(retaining, f"inv-old-{n}", owner.pid, "failed", past)
    ids = retaining.invocation_ids()
    mine = {}
    for n in range(10):  # now complete them, in the past: each completion sweeps once
        iid = f"inv-old-{n}"
        mine[iid] = token()
        retaining.claim(iid, owner.pid, mine[iid], past, 30)
    sweeps = []
    for n in range(10):
        iid = f"inv-old-{n}"
        retaining.finish(iid, mine[iid], "completed", None, CP1, past + 1)
        sweeps.append(len(retaining.invocation_ids()))
    assert ids == sorted(ids) and len(ids) == 10
    # every sweep removed at most SWEEP_SCAN records, and together they removed all the
    # completed ones they saw
    removed = [before - after for before, after in zip([10, *sweeps], sweeps, strict=False)]
    assert all(0 <= r <= 4 for r in removed), sweeps
    retaining.create("inv-new-a", META, CP0)
    retaining.create("inv-new-b", META, CP0)
    retaining.create("inv-new-c", META, CP0)
    assert [i for i in retaining.invocation_ids() if i.startswith("inv-old")] == []
    assert retaining.invocation_ids() == ["inv-new-a", "inv-new-b", "inv-new-c"]


def test_every_record_is_bounded(ledger, owner):
    """A checkpoint past max_record_bytes is refused with record_too_large before any
    change; an outcome is cut to a bounded failure dict; metadata is bounded."""
    bounded = (
        MemoryLedger(max_record_bytes=MIN_RECORD_BYTES)
        if isinstance(ledger, MemoryLedger)
        else LmdbLedger(Path(ledger.path).with_name("bounded"), max_record_bytes=MIN_RECORD_BYTES)
    )
    big = checkpoint(1, blob="x" * MIN_RECORD_BYTES)
    assert reason(lambda: bounded.create("inv-big", META, big)) == "record_too_large"
    assert reason(lambda: bounded.get("inv-big")) == "not_found"
    bounded.create("inv-small", META, CP0)
    mine, now = token(), time.time()
    bounded.claim("inv-small", owner.pid, mine, now, 30)
    assert reason(lambda: bounded.checkpoint("inv-small", mine, big, now, 30)) == (
        "record_too_large"
    )
    assert reason(lambda: bounded.finish("inv-small", mine, "failed", None, big, now)) == (
        "record_too_large"
    )
    record = bounded.get("inv-small")
    assert (record.revision, record.checkpoint, record.phase) == (1, CP0, "running")
    bounded.finish("inv-small", mine, "paused", {"blob": "y" * (MAX_OUTCOME_BYTES + 1)}, CP1, now)
    assert bounded.get("inv-small").outcome["reason"] == "invalid_outcome"
    if isinstance(bounded, LmdbLedger):
        bounded.close()
    for bad in (MIN_RECORD_BYTES - 1, MAX_RECORD_BYTES + 1, 1.5e4, None):
        assert reason(lambda bad=bad: MemoryLedger(max_record_bytes=bad)) == (
            "invalid_max_record_bytes"
        )
    for meta in (
        {**META, "workflow_id": "w" * 257},
        {**META, "workflow_id": ""},
        {**META, "workflow_version": -1},
        {**META, "kind": "no_such_kind"},
    ):
        assert reason(lambda meta=meta: ledger.create("inv-meta", meta, CP0)) == (
            "invalid_metadata"
        )


def test_listing_reads_pages_and_keeps_its_order(ledger, owner, monkeypatch):
    monkeypatch.setattr(ledger_module, "_PAGE", 3)
    now = time.time()
    for n in range(10):
        ledger.create(f"inv-{n:02d}", META, CP0)
    for n in (1, 4, 5, 9):
        mine = token()
        ledger.claim(f"inv-{n:02d}", owner.pid, mine, now, 30)
        ledger.finish(f"inv-{n:02d}", mine, "completed", None, CP1, now + 1)
    assert ledger.invocation_ids() == [f"inv-{n:02d}" for n in range(10)]
    assert ledger.invocation_ids(["completed"]) == ["inv-01", "inv-04", "inv-05", "inv-09"]
    assert ledger.invocation_ids(["completed"], after="inv-04", limit=1) == ["inv-05"]
    assert ledger.invocation_ids(["ready"], after="inv-05", limit=10) == [
        "inv-06",
        "inv-07",
        "inv-08",
    ]
    assert ledger.invocation_ids(after="inv-09") == []
    assert reason(lambda: ledger.invocation_ids(after="")) == "invalid_invocation_id"
