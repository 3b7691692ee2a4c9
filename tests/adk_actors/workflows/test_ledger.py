"""The durable invocation ledger: the same suite against `MemoryLedger` and `LmdbLedger`,
and its protocol part also against `SqliteLedger` (_sql_ledger.py), a store written
from the protocol alone.

Times are explicit (the protocol's `now`), so every lease boundary is exact. Follows
adk_durable_workflow_test's ledger cases (expired_owner_cannot_write_without_takeover,
expired_live_local_owner_is_claimable, stale_fencing_token_cannot_commit,
concurrent_expiry_claim_has_single_winner, ledger_restart_preserves_expiry_fence),
plus what the protocol adds: dead owners in other OS processes, revisions, the hidden
token, outcome shaping, storage bounds (retention and record bounds:
test_ledger_retention.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import lmdb
import msgspec
import pytest

from adk_actors.workflows.ledger import Ledger
from adk_actors.workflows.ledger_lmdb import DB_NAME, LmdbLedger
from providers.errors import AdkError
from supervision import Task

from ._ledger_support import (
    CP0,
    CP1,
    META,
    LiveOwner,
    checkpoint,
    ledger,
    owner,
    reason,
    store,
    token,
)

__all__ = ["ledger", "owner", "store"]  # fixtures
ROOT = Path(__file__).resolve().parents[3]


def test_all_implement_the_protocol(store):
    assert isinstance(store, Ledger)


def test_expired_owner_cannot_write_without_takeover(store, owner):
    """Follows expired_owner_cannot_write_without_takeover: equality is expired and
    a refused write leaves the record exactly as it was."""
    store.create("inv-expired", META, CP0)
    mine, now, lease = token(), 1_000_000.0, 10.0
    claimed = store.claim("inv-expired", owner.pid, mine, now, lease)
    until = now + lease
    assert claimed.lease_until == until and claimed.phase == "running" and claimed.owned
    before = store.get("inv-expired")
    assert reason(lambda: store.renew("inv-expired", mine, until, lease)) == "lease_expired"
    assert (
        reason(lambda: store.checkpoint("inv-expired", mine, CP1, until, lease)) == "lease_expired"
    )
    assert (
        reason(lambda: store.finish("inv-expired", mine, "completed", None, CP1, until))
        == "lease_expired"
    )
    after = store.get("inv-expired")
    assert after == before
    assert (after.phase, after.checkpoint, after.revision, after.lease_until) == (
        "running",
        CP0,
        claimed.revision,
        until,
    )
    store.renew("inv-expired", mine, until - 0.001, lease)  # just before: still valid


def test_expired_live_local_owner_is_claimable(store, owner):
    """Follows expired_live_local_owner_is_claimable."""
    store.create("inv-live", META, CP0)
    first, second, now = token(), token(), 2_000_000.0
    store.claim("inv-live", owner.pid, first, now, 10)
    assert owner.pid.is_alive()
    me = LiveOwner()
    try:
        assert (
            reason(lambda: store.claim("inv-live", me.pid, second, now + 9, 30))
            == "invocation_owned"
        )
        taken = store.claim("inv-live", me.pid, second, now + 10, 30)
        assert taken.lease_until == now + 10 + 30
        assert reason(lambda: store.renew("inv-live", first, now + 11, 30)) == "stale_owner"
        store.finish("inv-live", second, "completed", None, CP0, now + 11)
        assert store.get("inv-live").phase == "completed"
    finally:
        me.stop()


def test_stale_fencing_token_cannot_commit(ledger, owner):
    """Follows stale_fencing_token_cannot_commit: a dead local owner is claimable at
    once, long before its lease ends; its token is stale from then on."""
    ledger.create("inv-fencing", META, CP0)
    first, second, now = token(), token(), time.time()
    ledger.claim("inv-fencing", owner.pid, first, now, 10)
    me = LiveOwner()
    try:
        assert (
            reason(lambda: ledger.claim("inv-fencing", me.pid, second, now + 1, 10))
            == "invocation_owned"
        )
        owner.kill()
        assert not owner.pid.is_alive()
        ledger.claim("inv-fencing", me.pid, second, now + 1, 10)
        assert (
            reason(lambda: ledger.checkpoint("inv-fencing", first, CP1, now + 2, 10))
            == "stale_owner"
        )
        assert (
            reason(lambda: ledger.finish("inv-fencing", first, "failed", "stale", CP1, now + 2))
            == "stale_owner"
        )
        ledger.finish("inv-fencing", second, "failed", "test_complete", CP1, now + 3)
        final = ledger.get("inv-fencing")
        assert final.checkpoint == CP1 and not final.owned and final.outcome == "test_complete"
    finally:
        me.stop()


def test_concurrent_expiry_claim_has_single_winner(store, owner):
    """Follows concurrent_expiry_claim_has_single_winner, with eight threads."""
    store.create("inv-race", META, CP0)
    now, lease = 3_000_000.0, 10.0
    store.claim("inv-race", owner.pid, token(), now, lease)
    contenders = [LiveOwner() for _ in range(8)]
    gate = threading.Barrier(len(contenders))
    results: list[object] = []

    def contend(who: LiveOwner) -> None:
        mine = token()
        gate.wait(5)
        try:
            store.claim("inv-race", who.pid, mine, now + lease, 100)
            results.append(("ok", mine))
        except AdkError as error:
            results.append(error.reason)

    threads = [threading.Thread(target=contend, args=(who,)) for who in contenders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    try:
        winners = [r for r in results if isinstance(r, tuple)]
        assert len(winners) == 1
        assert sorted(r for r in results if not isinstance(r, tuple)) == ["invocation_owned"] * 7
        store.finish("inv-race", winners[0][1], "completed", None, CP0, now + lease + 1)
    finally:
        for who in contenders:
            who.stop()


def test_revision_grows_by_one_per_mutation_and_status_hides_the_token(store, owner):
    store.create("inv-rev", META, CP0)
    assert store.get("inv-rev").revision == 0 and store.get("inv-rev").phase == "ready"
    mine, now = token(), 5_000_000.0
    assert store.claim("inv-rev", owner.pid, mine, now, 30).revision == 1
    store.renew("inv-rev", mine, now + 1, 30)
    renewed = store.get("inv-rev")
    assert (renewed.revision, renewed.lease_until) == (2, now + 31)
    store.checkpoint("inv-rev", mine, CP1, now + 2, 30)
    committed = store.get("inv-rev")
    assert (committed.revision, committed.checkpoint, committed.lease_until) == (3, CP1, now + 32)
    store.finish("inv-rev", mine, "paused", {"node_id": "approval"}, CP1, now + 3)
    paused = store.get("inv-rev")
    assert (paused.revision, paused.phase, paused.owned, paused.lease_until) == (
        4,
        "paused",
        False,
        0.0,
    )
    assert paused.outcome == {"node_id": "approval"}
    again = store.claim("inv-rev", owner.pid, token(), now + 4, 30)
    assert (again.revision, again.phase, again.outcome) == (5, "running", None)
    shown = repr(again) + json.dumps(msgspec.to_builtins(again))
    assert mine not in shown and "token" not in shown


def test_create_refuses_an_existing_id_and_get_an_unknown_one(store):
    store.create("inv-dup", META, CP0)
    assert reason(lambda: store.create("inv-dup", META, CP1)) == "already_exists"
    assert store.get("inv-dup").checkpoint == CP0
    assert reason(lambda: store.get("inv-none")) == "not_found"
    for call in (
        lambda: store.claim("inv-none", Task.start(lambda: None).pid, token(), 1.0, 1.0),
        lambda: store.renew("inv-none", token(), 1.0, 1.0),
        lambda: store.checkpoint("inv-none", token(), CP0, 1.0, 1.0),
        lambda: store.finish("inv-none", token(), "failed", None, CP0, 1.0),
        lambda: store.delete("inv-none"),
    ):
        assert reason(call) == "not_found"


def test_completed_is_immutable_other_terminals_are_claimable(store, owner):
    now = time.time()
    for phase in ("failed", "timed_out", "cancelled", "paused", "completed"):
        iid = f"inv-{phase}"
        store.create(iid, META, CP0)
        mine = token()
        store.claim(iid, owner.pid, mine, now, 30)
        store.finish(iid, mine, phase, "why", CP1, now + 1)
        assert store.get(iid).phase == phase
        if phase == "completed":
            assert (
                reason(lambda iid=iid: store.claim(iid, owner.pid, token(), now + 2, 30))
                == "invocation_completed"
            )
        else:
            assert store.claim(iid, owner.pid, token(), now + 2, 30).phase == "running"


def test_finish_refuses_a_phase_that_is_not_terminal(ledger, owner):
    ledger.create("inv-phase", META, CP0)
    mine, now = token(), time.time()
    ledger.claim("inv-phase", owner.pid, mine, now, 30)
    for phase in ("running", "ready", "done"):
        assert reason(
            lambda phase=phase: ledger.finish("inv-phase", mine, phase, None, CP1, now + 1)
        ) == ("invalid_terminal_phase", phase)
    assert ledger.get("inv-phase").revision == 1


def test_delete_refuses_a_live_owner(ledger, owner):
    ledger.create("inv-del", META, CP0)
    mine, now = token(), time.time()
    ledger.claim("inv-del", owner.pid, mine, now, 30)
    assert reason(lambda: ledger.delete("inv-del")) == "invocation_owned"
    ledger.finish("inv-del", mine, "cancelled", "revise_later", CP1, now + 1)
    ledger.delete("inv-del")
    assert reason(lambda: ledger.get("inv-del")) == "not_found"
    ledger.create("inv-del", META, CP0)  # the id is free again
    ledger.claim("inv-del", owner.pid, token(), now, 30)
    owner.kill()
    ledger.delete("inv-del")  # a dead owner holds nothing
    assert reason(lambda: ledger.get("inv-del")) == "not_found"


def test_failure_outcomes_are_reshaped_and_secret_free(ledger, owner):
    """A direct ledger caller cannot put an arbitrary payload on disk (the reference's
    persisted_outcome): failure reasons go through errors.failure_reason."""
    ledger.create("inv-secret", META, CP0)
    mine, now = token(), time.time()
    ledger.claim("inv-secret", owner.pid, mine, now, 30)
    raw = ("step_failed", "fetch", {"reason": "http_error", "status": 503, "body": "SEED-42"})
    ledger.finish("inv-secret", mine, "failed", raw, CP1, now + 1)
    outcome = ledger.get("inv-secret").outcome
    assert outcome[0:2] == ["step_failed", "fetch"]
    assert outcome[2]["reason"] == "http_error" and outcome[2]["status"] == 503
    assert "SEED-42" not in json.dumps(outcome)
    if isinstance(ledger, LmdbLedger):
        assert not any(b"SEED-42" in value for _, value in ledger.raw_records())
        assert not any(mine.encode() in value for _, value in ledger.raw_records())


def test_invalid_arguments_are_refused_before_any_change(ledger, owner):
    ledger.create("inv-args", META, CP0)
    pid = owner.pid
    cases = {
        "invalid_invocation_id": [
            lambda: ledger.create("", META, CP0),
            lambda: ledger.create("x" * 300, META, CP0),
            lambda: ledger.create("bad\nid", META, CP0),
            lambda: ledger.get(42),
        ],
        "invalid_metadata": [lambda: ledger.create("inv-m", {"workflow_id": "w"}, CP0)],
        "invalid_checkpoint": [lambda: ledger.create("inv-c", META, {"state": {}})],
        "invalid_lease": [
            lambda: ledger.claim("inv-args", pid, token(), 1.0, 0),
            lambda: ledger.claim("inv-args", pid, token(), 1.0, -1),
            lambda: ledger.claim("inv-args", pid, token(), 1.0, True),
            lambda: ledger.claim("inv-args", pid, token(), 1.0, 86_401),
        ],
        "invalid_time": [lambda: ledger.claim("inv-args", pid, token(), float("nan"), 1.0)],
        "invalid_owner_token": [lambda: ledger.claim("inv-args", pid, "", 1.0, 1.0)],
        "invalid_owner": [lambda: ledger.claim("inv-args", "me", token(), 1.0, 1.0)],
    }
    for expected, calls in cases.items():
        for call in calls:
            assert reason(call) == expected
    record = ledger.get("inv-args")
    assert (record.revision, record.phase) == (0, "ready")
    assert ledger.invocation_ids() == ["inv-args"]


def test_invocation_ids_lists_by_phase_in_pages(ledger, owner):
    now = time.time()
    for n in range(5):
        ledger.create(f"inv-{n}", META, CP0)
    mine = token()
    ledger.claim("inv-1", owner.pid, mine, now, 30)
    ledger.finish("inv-1", mine, "completed", None, CP1, now + 1)
    assert ledger.invocation_ids() == [f"inv-{n}" for n in range(5)]
    assert ledger.invocation_ids(["completed"]) == ["inv-1"]
    assert ledger.invocation_ids(["ready", "running"], limit=2) == ["inv-0", "inv-2"]
    assert ledger.invocation_ids(["ready"], after="inv-2") == ["inv-3", "inv-4"]
    assert reason(lambda: ledger.invocation_ids(limit=0)) == "invalid_limit"


def test_a_killed_task_cannot_commit(ledger, owner):
    """A sync task killed while it runs is fenced: its late ledger writes are refused."""
    ledger.create("inv-killed", META, CP0)
    mine, now = token(), time.time()
    ledger.claim("inv-killed", owner.pid, mine, now, 30)
    inside, release = threading.Event(), threading.Event()
    seen: list[object] = []

    def late_commit() -> None:
        inside.set()
        release.wait(5)
        try:
            ledger.checkpoint("inv-killed", mine, CP1, time.time(), 30)
            seen.append("committed")
        except AdkError as error:
            seen.append(error.reason)

    task = Task.start(late_commit)
    assert inside.wait(5)
    task.kill()
    release.set()
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == ["fenced"]
    assert ledger.get("inv-killed").checkpoint == CP0


# -- LMDB only --------------------------------------------------------------------------------


def test_ledger_restart_preserves_expiry_fence(tmp_path, owner):
    """Follows ledger_restart_preserves_expiry_fence: close the environment, reopen it."""
    path = tmp_path / "restart"
    ledger = LmdbLedger(path)
    first, second, now, lease = token(), token(), 4_000_000.0, 10.0
    ledger.create("inv-restart", META, CP0)
    ledger.claim("inv-restart", owner.pid, first, now, lease)
    ledger.checkpoint("inv-restart", first, CP1, now + 5, lease)
    until = now + 5 + lease
    ledger.close()
    assert reason(lambda: ledger.get("inv-restart")) == "ledger_closed"

    reopened = LmdbLedger(path)
    recovered = reopened.get("inv-restart")
    assert (recovered.checkpoint, recovered.lease_until) == (CP1, until)
    assert owner.pid.is_alive()
    assert (
        reason(lambda: reopened.finish("inv-restart", first, "completed", None, CP1, until))
        == "lease_expired"
    )
    reopened.claim("inv-restart", owner.pid, second, until, lease)
    assert (
        reason(lambda: reopened.checkpoint("inv-restart", first, CP0, until + 1, lease))
        == "stale_owner"
    )
    reopened.finish("inv-restart", second, "completed", "recovered", CP1, until + 1)
    final = reopened.get("inv-restart")
    assert (final.phase, final.checkpoint) == ("completed", CP1)
    reopened.close()


def test_two_ledgers_on_one_path_share_the_environment(tmp_path, owner):
    one, two = LmdbLedger(tmp_path / "shared"), LmdbLedger(tmp_path / "shared")
    one.create("inv-shared", META, CP0)
    mine = token()
    two.claim("inv-shared", owner.pid, mine, time.time(), 30)
    one.close()  # the other keeps the environment open
    two.renew("inv-shared", mine, time.time(), 30)
    assert two.get("inv-shared").revision == 2
    two.close()


def test_a_corrupt_record_is_refused_not_guessed(tmp_path):
    ledger = LmdbLedger(tmp_path / "corrupt")
    ledger.create("inv-ok", META, CP0)
    ledger.close()
    env = lmdb.open(str(tmp_path / "corrupt"), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"inv-bad", b"\x93not a record", db=env.open_db(DB_NAME, txn=txn))
    env.close()
    ledger = LmdbLedger(tmp_path / "corrupt")
    assert ledger.get("inv-ok").checkpoint == CP0
    assert reason(lambda: ledger.get("inv-bad")) == "invalid_ledger_record"
    ledger.close()


def test_a_full_map_grows_and_a_ceiling_refuses_without_writing(tmp_path, owner):
    big = "x" * 200_000
    ledger = LmdbLedger(tmp_path / "grow", map_size=1 << 16, max_map_size=1 << 24)
    for n in range(10):
        ledger.create(f"inv-{n}", META, checkpoint(0, blob=big))
    assert len(ledger.invocation_ids()) == 10
    ledger.close()

    capped = LmdbLedger(tmp_path / "capped", map_size=1 << 16, max_map_size=1 << 18)
    created = 0
    with pytest.raises(AdkError) as info:
        for n in range(10):
            capped.create(f"inv-{n}", META, checkpoint(0, blob=big))
            created += 1
    assert info.value.reason == "storage_full"
    assert len(capped.invocation_ids()) == created  # the refused step wrote nothing
    capped.close()


# -- other OS processes -----------------------------------------------------------------------


def _child(path: Path, iid: str, now: float, lease: float, *, hold: bool) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.adk_actors.workflows._ledger_child", "claim"]
    args += [str(path), iid, repr(now), repr(lease)] + (["--hold"] if hold else [])
    child = subprocess.Popen(
        args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert json.loads(child.stdout.readline()) == {"ready": True}
    return child


def _go(child: subprocess.Popen) -> dict:
    child.stdin.write("go\n")
    child.stdin.flush()
    return json.loads(child.stdout.readline())


def test_an_owner_in_a_dead_os_process_is_claimable_at_once(tmp_path, owner):
    path = tmp_path / "dead-process"
    ledger = LmdbLedger(path)
    ledger.create("inv-os", META, CP0)
    now = time.time()
    holder = _child(path, "inv-os", now, 3600, hold=True)
    try:
        assert _go(holder)["ok"]
        # alive in its own process: its lease stands
        assert reason(lambda: ledger.claim("inv-os", owner.pid, token(), now + 1, 30)) == (
            "invocation_owned"
        )
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
    taken = ledger.claim("inv-os", owner.pid, token(), now + 1, 30)
    assert taken.revision == 2 and taken.lease_until == now + 31
    ledger.close()


def test_claims_from_two_os_processes_have_one_winner(tmp_path, owner):
    path = tmp_path / "two-processes"
    ledger = LmdbLedger(path)
    ledger.create("inv-two", META, CP0)
    now, lease = 6_000_000.0, 10.0
    ledger.claim("inv-two", owner.pid, token(), now, lease)  # expires at now + lease
    children = [_child(path, "inv-two", now + lease, 100, hold=True) for _ in range(2)]
    try:
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [json.loads(child.stdout.readline()) for child in children]
    finally:
        for child in children:
            child.stdin.close()
            child.wait(10)
    assert sorted(r["ok"] for r in results) == [False, True]
    assert [r["reason"] for r in results if not r["ok"]] == ["invocation_owned"]
    assert ledger.get("inv-two").revision == 2
    ledger.close()
    assert os.path.exists(path / "data.mdb")
