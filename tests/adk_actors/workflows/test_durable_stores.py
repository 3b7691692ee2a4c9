"""Durable invocations and their stores: retention and record bounds through the public
API, a store written from the `Ledger` protocol alone (`SqliteLedger`), and a failing
store whose errors reach callers bounded and secret-free."""

from __future__ import annotations

import time

import pytest

import adk_actors as adk
from adk_actors import workflows
from adk_actors.workflows import (
    Completed,
    Failed,
    LmdbLedger,
    MemoryLedger,
)
from providers.errors import AdkError

from ._durable_support import (
    SEED,
    WAIT,
    Blocked,
    assert_second_checkpoint,
    kill_coordinator,
    reason,
    seeded_failure,
)
from ._sql_ledger import SqliteLedger

# -- retention and record bounds through the public API -----------------------------------------


def test_completed_invocations_leave_the_ledger_after_its_retention(tmp_path):
    ledger = LmdbLedger(tmp_path / "retained", retention=0.3)
    done = adk.compile_workflow(
        {
            "version": 1,
            "id": "short",
            "kind": "sequential",
            "steps": [{"id": "a", "run": lambda state: {"done": True}}],
        }
    )
    first, ref = workflows.start_durable(done, {}, ledger=ledger)
    assert isinstance(workflows.wait(ref, WAIT), Completed)
    assert workflows.durable_status(first, ledger=ledger).phase == "completed"
    cancelled = Blocked("kept")
    ref = cancelled.start(ledger, "inv-cancelled-kept")
    workflows.cancel(ref, "later")
    workflows.wait(ref, WAIT)
    cancelled.release()
    time.sleep(0.35)
    second, ref = workflows.start_durable(done, {}, ledger=ledger)  # its create sweeps
    assert reason(lambda: workflows.durable_status(first, ledger=ledger)) == "not_found"
    assert workflows.durable_status("inv-cancelled-kept", ledger=ledger).phase == "cancelled"
    assert isinstance(workflows.wait(ref, WAIT), Completed)
    assert workflows.durable_status(second, ledger=ledger).phase == "completed"
    ledger.close()


def test_a_record_past_its_bound_fails_the_commit_with_a_typed_reason(tmp_path):
    ledger = LmdbLedger(tmp_path / "bounded", max_record_bytes=16 << 10)
    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "grows",
            "kind": "sequential",
            "steps": [
                {"id": "small", "run": lambda state: {"small": 1}},
                {"id": "big", "run": lambda state: {"blob": "x" * (20 << 10)}},
                {"id": "after", "run": lambda state: {"after": True}},  # so "big" commits
            ],
        }
    )
    iid, ref = workflows.start_durable(wf, {}, ledger=ledger)
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("durable_checkpoint_failed", "record_too_large")
    record = workflows.durable_status(iid, ledger=ledger)
    assert record.checkpoint.state == {"small": 1} and record.phase == "running"
    ledger.close()


# -- another store: the protocol is all the durable layer needs ----------------------------------


def test_durable_runs_on_a_store_written_from_the_protocol_alone(tmp_path):
    """SqliteLedger shares no code with RuleLedger and knows no owner liveness: a
    crashed coordinator's claim is taken over once its lease expires."""
    sql = SqliteLedger(str(tmp_path / "ledger.sqlite"))
    run = Blocked("on-sqlite")
    ref = run.start(sql, "inv-sql", lease=0.5)
    assert_second_checkpoint(workflows.durable_status("inv-sql", ledger=sql))
    kill_coordinator(ref)
    run.release()
    resumed = None
    deadline = time.monotonic() + WAIT
    while resumed is None:
        try:
            resumed = workflows.resume_durable("inv-sql", run.wf, ledger=sql, lease=0.5)
        except AdkError as error:
            assert error.reason == ("workflow_start_failed", "invocation_owned")
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert isinstance(workflows.wait(resumed, WAIT), Completed)
    assert run.first_calls == 1
    final = workflows.durable_status("inv-sql", ledger=sql)
    assert (final.phase, final.owned) == ("completed", False)

    failing = seeded_failure("sql-secret")
    iid, ref = workflows.start_durable(failing, {}, ledger=sql)
    assert isinstance(workflows.wait(ref, WAIT), Failed)
    assert workflows.durable_status(iid, ledger=sql).phase == "failed"
    cancel = Blocked("sql-cancel")
    ref = cancel.start(sql, "inv-sql-cancel")
    workflows.cancel(ref, {"api_key": SEED, "why": SEED})
    workflows.wait(ref, WAIT)
    cancel.release()
    assert SEED not in repr(sql.raw_rows())  # the durable layer stored shaped outcomes
    workflows.delete_durable(iid, ledger=sql)
    assert reason(lambda: workflows.durable_status(iid, ledger=sql)) == "not_found"
    sql.close()


class BrokenLedger(MemoryLedger):
    """A store whose reads fail with an exception that carries a secret."""

    def get(self, invocation_id):
        raise RuntimeError(f"connection to db failed: password={SEED}")

    def delete(self, invocation_id):
        raise AdkError(("db_refused", {"dsn": f"postgres://u:{SEED}@db", "reason": "locked"}))


def test_a_failing_store_reaches_callers_bounded_and_secret_free():
    broken = BrokenLedger()
    wf = Blocked("broken").wf
    for call in (
        lambda: workflows.durable_status("inv-x", ledger=broken),
        lambda: workflows.resume_durable("inv-x", wf, ledger=broken),
    ):
        with pytest.raises(AdkError) as info:
            call()
        assert info.value.reason == (
            "invocation_ledger_failed",
            {
                "component": "adk_workflow_ledger",
                "operation": "get",
                "reason": "exception",
                "class": "RuntimeError",
            },
        )
        assert SEED not in str(info.value) and info.value.__cause__ is None
    with pytest.raises(AdkError) as info:
        workflows.delete_durable("inv-x", ledger=broken)
    assert info.value.reason[0] == "db_refused" and SEED not in str(info.value)
