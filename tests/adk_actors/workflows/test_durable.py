"""Durable invocations through the public API, on a real LMDB ledger.

Follows adk_durable_workflow_test (2-step sequential, the second step blocks):
coordinator_crash_resumes_from_persisted_checkpoint,
worker_crash_resumes_from_persisted_checkpoint, concurrent_resume_has_one_fenced_owner,
application_restart_resumes_by_invocation_id, durable_graph_pause_consumes_resume_input,
active_coordinator_renews_lease; and adk_workflow_failure_security_test's ledger cases
(mnesia_failure_and_cancel_outcomes_hide_seed). Ledger failures are real ones: another
owner takes the record over (explicit `now` past the lease), or the map is full. Also:
a version mismatch, a long action keeping its lease, a fork branch committed on its
own. Stores, retention and record bounds: test_durable_stores.py.
"""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
from adk_actors import workflows
from adk_actors.workflows import (
    Cancelled,
    Completed,
    Failed,
    LmdbLedger,
    MemoryLedger,
    Pause,
    Paused,
    Route,
)
from adk_actors.workflows.checkpoint import Checkpoint, GraphCursor, Remaining, SequentialCursor
from adk_actors.workflows.durable import DurablePersistence
from providers.errors import AdkError
from supervision import exit, is_fenced_thread, self_pid

from ._durable_support import (
    SEED,
    WAIT,
    Blocked,
    assert_second_checkpoint,
    children,
    eventually,
    kill_coordinator,
    ledger,
    reason,
    seeded_failure,
)

__all__ = ["ledger"]  # fixtures


def test_coordinator_crash_resumes_from_persisted_checkpoint(ledger):
    run = Blocked()
    ref = run.start(ledger, "inv-coordinator-crash")
    record = workflows.durable_status("inv-coordinator-crash", ledger=ledger)
    assert_second_checkpoint(record)
    assert record.phase == "running" and record.owned
    kill_coordinator(ref)
    eventually(lambda: not run.second_pids[0].is_alive())  # its worker died with it
    run.release()

    resumed = workflows.resume_durable("inv-coordinator-crash", run.wf, ledger=ledger)
    outcome = workflows.wait(resumed, WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"first_committed": True, "second_committed": True}
    assert outcome.checkpoint.completed
    assert run.first_calls == 1
    final = workflows.durable_status("inv-coordinator-crash", ledger=ledger)
    assert (final.phase, final.owned) == ("completed", False)
    assert (
        reason(lambda: workflows.resume_durable("inv-coordinator-crash", run.wf, ledger=ledger))
        == "invocation_completed"
    )


def test_worker_crash_resumes_from_persisted_checkpoint(ledger):
    run = Blocked()
    ref = run.start(ledger, "inv-worker-crash")
    exit(run.second_pids[0], "kill")
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed) and outcome.reason[:2] == ("step_failed", "second")
    failed = workflows.durable_status("inv-worker-crash", ledger=ledger)
    assert (failed.phase, failed.owned) == ("failed", False)
    assert_second_checkpoint(failed)
    assert failed.outcome[:2] == ["step_failed", "second"]

    run.release()
    resumed = workflows.resume_durable("inv-worker-crash", run.wf, ledger=ledger)
    assert isinstance(workflows.wait(resumed, WAIT), Completed)
    assert (run.first_calls, run.second_calls) == (1, 1)  # the killed call never returned


def test_concurrent_resume_has_one_fenced_owner(ledger):
    run = Blocked()
    ref = run.start(ledger, "inv-concurrent")
    kill_coordinator(ref)
    run.second_started.clear()
    gate = threading.Barrier(2)
    results: list[object] = []

    def resume() -> None:
        gate.wait(5)
        try:
            results.append(workflows.resume_durable("inv-concurrent", run.wf, ledger=ledger))
        except AdkError as error:
            results.append(error.reason)

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    winners = [r for r in results if isinstance(r, str)]
    assert len(winners) == 1
    assert [r for r in results if not isinstance(r, str)] == [
        ("workflow_start_failed", "invocation_owned")
    ]
    assert run.second_started.wait(WAIT)
    context = run.contexts[-1]
    assert context["invocation_id"] == "inv-concurrent"
    assert isinstance(context["checkpoint_cursor"], dict)
    run.release()
    assert isinstance(workflows.wait(winners[0], WAIT), Completed)
    assert run.first_calls == 1


def test_application_restart_resumes_by_invocation_id(tmp_path):
    path = tmp_path / "restart"
    ledger = LmdbLedger(path)
    run = Blocked()
    run.start(ledger, "inv-app-restart")
    adk.stop()  # the coordinator stops without finishing: the record keeps its owner
    eventually(lambda: not run.second_pids[0].is_alive())
    ledger.close()

    adk.start()
    reopened = LmdbLedger(path)
    record = workflows.durable_status("inv-app-restart", ledger=reopened)
    assert record.owned and record.phase == "running"
    assert_second_checkpoint(record)
    run.release()
    resumed = workflows.resume_durable("inv-app-restart", run.wf, ledger=reopened)
    assert isinstance(workflows.wait(resumed, WAIT), Completed)
    assert run.first_calls == 1
    assert workflows.durable_status("inv-app-restart", ledger=reopened).phase == "completed"
    reopened.close()


def test_durable_graph_pause_consumes_resume_input(ledger):
    pause_calls = []
    seen_inputs = []

    def pause(state, context):
        pause_calls.append(context)
        return Pause("request_input", "Provide the graph input", {"before_pause": True})

    def route(state, context):
        seen_inputs.append(context["input"])
        return "end"

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "durable-graph-pause",
            "kind": "graph",
            "entry": "pause",
            "max_steps": 3,
            "nodes": [{"id": "pause", "type": "action", "run": pause}],
            "edges": {"pause": Route(route)},
        }
    )
    iid, ref = workflows.start_durable(
        wf, {}, ledger=ledger, invocation_id="inv-graph-pause", timeout=WAIT
    )
    paused = workflows.wait(ref, WAIT)
    assert isinstance(paused, Paused) and paused.details["node_id"] == "pause"
    cursor = paused.checkpoint.cursor
    assert isinstance(cursor, GraphCursor) and cursor.phase == "awaiting_resume"
    assert pause_calls[0]["invocation_id"] == iid
    before = children()
    assert (
        reason(lambda: workflows.resume_durable(iid, wf, ledger=ledger)) == "resume_input_required"
    )
    assert children() == before  # refused before any coordinator started
    record = workflows.durable_status(iid, ledger=ledger)
    assert (record.phase, record.owned) == ("paused", False)
    assert record.outcome["node_id"] == "pause"
    assert record.checkpoint.state == {"before_pause": True}

    answer = {"answer": "yes"}
    resumed = workflows.resume_durable(iid, wf, ledger=ledger, resume_input=answer)
    assert isinstance(workflows.wait(resumed, WAIT), Completed)
    assert seen_inputs == [answer] and len(pause_calls) == 1
    assert workflows.durable_status(iid, ledger=ledger).phase == "completed"


def test_a_claim_that_cannot_run_gives_the_record_back(ledger):
    """The claim comes first, the stored checkpoint is checked after it (a newer pause
    may have been committed meanwhile): if it cannot run, the record is closed again
    (a pause stays paused, anything else fails) instead of waiting out our lease."""
    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "give-back",
            "kind": "graph",
            "entry": "ask",
            "nodes": [{"id": "ask", "run": lambda state: Pause("why", {"q": 1}, {"a": 1})}],
            "edges": {"ask": "end"},
        }
    )
    iid, ref = workflows.start_durable(wf, {}, ledger=ledger)
    paused = workflows.wait(ref, WAIT)
    persistence = DurablePersistence(ledger, iid, mode="resume", lease=30.0)
    assert reason(lambda: persistence.begin(wf, paused.checkpoint, self_pid())) == (
        "resume_input_required"
    )
    record = workflows.durable_status(iid, ledger=ledger)
    assert (record.phase, record.owned, record.checkpoint) == ("paused", False, paused.checkpoint)
    assert record.outcome == paused.checkpoint.cursor.pause

    other = Blocked("give-back").wf  # a sequential "give-back": the stored cursor is a graph's
    ledger.create(
        "inv-misfit",
        {"workflow_id": "give-back", "workflow_version": 1, "kind": "sequential"},
        paused.checkpoint,
    )
    assert reason(lambda: workflows.resume_durable("inv-misfit", other, ledger=ledger)) == (
        "invalid_durable_checkpoint",
        "checkpoint_workflow_mismatch",
    )
    persistence = DurablePersistence(ledger, "inv-misfit", mode="resume", lease=30.0)
    assert reason(lambda: persistence.begin(other, paused.checkpoint, self_pid())) == (
        "invalid_durable_checkpoint",
        "checkpoint_workflow_mismatch",
    )
    misfit = workflows.durable_status("inv-misfit", ledger=ledger)
    assert (misfit.phase, misfit.owned) == ("failed", False)
    assert misfit.outcome == ["invalid_durable_checkpoint", "checkpoint_workflow_mismatch"]


def test_active_coordinator_renews_lease(ledger):
    run = Blocked()
    ref = run.start(ledger, "inv-renew", lease=0.3)
    before = workflows.durable_status("inv-renew", ledger=ledger)
    eventually(
        lambda: workflows.durable_status("inv-renew", ledger=ledger).revision >= before.revision + 2
    )
    after = workflows.durable_status("inv-renew", ledger=ledger)
    assert after.lease_until > before.lease_until and after.checkpoint == before.checkpoint
    workflows.cancel(ref, "lease_test_complete")
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Cancelled) and outcome.reason == "lease_test_complete"
    record = workflows.durable_status("inv-renew", ledger=ledger)
    assert (record.phase, record.outcome, record.owned) == (
        "cancelled",
        "lease_test_complete",
        False,
    )
    run.release()


def test_resume_refuses_another_workflow_and_unknown_ids(ledger):
    run = Blocked("durable-mismatch")
    ref = run.start(ledger, "inv-mismatch")
    workflows.cancel(ref, "stop_here")
    workflows.wait(ref, WAIT)
    run.release()
    other = Blocked("another-workflow").wf
    newer = adk.compile_workflow(
        {
            "version": 1,
            "id": "durable-mismatch",
            "kind": "loop",
            "body": run.first,
            "until": lambda state: True,
            "max_iterations": 1,
        }
    )
    for wf in (other, newer):
        assert (
            reason(lambda wf=wf: workflows.resume_durable("inv-mismatch", wf, ledger=ledger))
            == "invocation_workflow_mismatch"
        )
    assert reason(lambda: workflows.resume_durable("inv-none", run.wf, ledger=ledger)) == (
        "not_found"
    )
    assert reason(lambda: workflows.durable_status("inv-none", ledger=ledger)) == "not_found"


def test_start_refuses_a_taken_id_and_leaves_nothing_behind(ledger):
    run = Blocked()
    run.start(ledger, "inv-taken")
    before = children()
    assert reason(
        lambda: workflows.start_durable(run.wf, {}, ledger=ledger, invocation_id="inv-taken")
    ) == ("workflow_start_failed", "already_exists")
    assert children() == before
    assert run.first_calls == 1
    run.release()


def test_start_checks_its_options(ledger):
    wf = Blocked().wf
    assert reason(lambda: workflows.start_durable(wf, {}, ledger=None)) == (
        "durable_invocation_ledger_required"
    )
    assert reason(lambda: workflows.start_durable(wf, {}, ledger=object())) == (
        "invalid_invocation_ledger"
    )
    for lease in (0, -1.0, 86_401.0, "30"):
        assert (
            reason(lambda lease=lease: workflows.start_durable(wf, {}, ledger=ledger, lease=lease))
            == "invalid_lease"
        )
    assert (
        reason(lambda: workflows.start_durable(wf, {}, ledger=ledger, invocation_id=""))
        == "invalid_invocation_id"
    )
    assert ledger.invocation_ids() == []


def test_delete_refuses_a_running_invocation(ledger):
    run = Blocked()
    ref = run.start(ledger, "inv-delete")
    assert reason(lambda: workflows.delete_durable("inv-delete", ledger=ledger)) == (
        "invocation_owned"
    )
    workflows.cancel(ref, "done_here")
    workflows.wait(ref, WAIT)
    workflows.delete_durable("inv-delete", ledger=ledger)
    assert reason(lambda: workflows.durable_status("inv-delete", ledger=ledger)) == "not_found"
    run.release()


def test_memory_ledger_runs_durable_invocations_too():
    run = Blocked()
    ledger = MemoryLedger()
    ref = run.start(ledger, "inv-memory")
    kill_coordinator(ref)
    run.release()
    resumed = workflows.resume_durable("inv-memory", run.wf, ledger=ledger)
    assert isinstance(workflows.wait(resumed, WAIT), Completed)
    assert run.first_calls == 1


# -- ledger failures end the run with the spec's reasons ----------------------------------------


def steal(ledger, iid: str, lease: float) -> str:
    """Another owner takes the record over at an explicit time past the current lease."""
    token = "f" * 64
    until = workflows.durable_status(iid, ledger=ledger).lease_until
    ledger.claim(iid, self_pid(), token, until, lease)
    return token


def test_a_stolen_record_fails_the_next_commit(ledger):
    """durable_checkpoint_failed: the commit is refused (stale_owner); no finish, and
    the step after it never starts."""
    run = Blocked(tail=True)
    ref = run.start(ledger, "inv-commit-fails", lease=60.0)
    steal(ledger, "inv-commit-fails", 600.0)
    run.release()
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("durable_checkpoint_failed", "stale_owner")
    assert outcome.checkpoint.cursor == SequentialCursor(next_index=1)
    record = workflows.durable_status("inv-commit-fails", ledger=ledger)
    assert record.phase == "running" and record.owned  # the new owner's, untouched
    assert (run.second_calls, run.third_calls) == (1, 0)


def test_a_stolen_record_fails_the_completion_with_the_last_committed_checkpoint(ledger):
    """durable_terminal_failed: the last step's result is recorded by the finish, which
    is refused (stale_owner): the run fails with its last committed checkpoint, never
    the final one nothing recorded."""
    run = Blocked()
    ref = run.start(ledger, "inv-finish-refused", lease=60.0)
    steal(ledger, "inv-finish-refused", 600.0)
    run.release()
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("durable_terminal_failed", "stale_owner")
    assert not outcome.checkpoint.completed
    assert outcome.checkpoint.cursor == SequentialCursor(next_index=1)
    assert outcome.checkpoint.state == {"first_committed": True}
    record = workflows.durable_status("inv-finish-refused", ledger=ledger)
    assert record.phase == "running" and record.owned  # the new owner's, untouched
    assert record.checkpoint == outcome.checkpoint


def test_a_lost_lease_stops_the_run(ledger):
    """durable_lease_lost: a renewal is refused while a step runs."""
    run = Blocked()
    ref = run.start(ledger, "inv-lease-lost", lease=0.3)
    steal(ledger, "inv-lease-lost", 600.0)
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("durable_lease_lost", "stale_owner")
    eventually(lambda: not run.second_pids[0].is_alive())
    run.release()


def test_a_refused_finish_fails_the_outcome(ledger):
    """durable_terminal_failed: the terminal record is refused (cancel after takeover)."""
    run = Blocked()
    ref = run.start(ledger, "inv-finish-fails", lease=60.0)
    steal(ledger, "inv-finish-fails", 600.0)
    workflows.cancel(ref, "too_late")
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed)
    assert outcome.reason == ("durable_terminal_failed", "stale_owner")
    run.release()


@pytest.mark.parametrize("last", [False, True], ids=["commit", "finish"])
def test_a_full_ledger_fails_the_commit(tmp_path, last):
    """storage_full: a step's result followed by another step is refused at its commit
    (``durable_checkpoint_failed``); the last step's, at the finish
    (``durable_terminal_failed``). Either way the run keeps its last committed
    checkpoint."""
    ledger = LmdbLedger(tmp_path / "small", map_size=1 << 16, max_map_size=1 << 17)
    steps = [{"id": "big", "run": lambda state: {"blob": "x" * 300_000}}]
    if not last:
        steps.append({"id": "after", "run": lambda state: {"after": True}})
    wf = adk.compile_workflow({"version": 1, "id": "too-big", "kind": "sequential", "steps": steps})
    iid, ref = workflows.start_durable(wf, {}, ledger=ledger)
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed)
    failed = "durable_terminal_failed" if last else "durable_checkpoint_failed"
    assert outcome.reason == (failed, "storage_full")
    assert outcome.checkpoint.state == {} and not outcome.checkpoint.completed
    assert workflows.durable_status(iid, ledger=ledger).checkpoint == outcome.checkpoint
    ledger.close()


# -- nothing secret reaches the ledger -------------------------------------------------------


def test_failure_and_cancel_outcomes_hide_the_seed(ledger):
    """Follows mnesia_failure_and_cancel_outcomes_hide_seed."""
    failing = seeded_failure("seeded-failure")
    iid, ref = workflows.start_durable(failing, {}, ledger=ledger)
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Failed) and outcome.reason[:2] == ("step_failed", "step")
    stored = workflows.durable_status(iid, ledger=ledger).outcome
    assert stored[2]["reason"] == "http_error" and stored[2]["status"] == 503

    run = Blocked("seeded-cancel")
    ref = run.start(ledger, "inv-seeded-cancel")
    workflows.cancel(ref, {"api_key": SEED})
    assert isinstance(workflows.wait(ref, WAIT), Cancelled)
    run.release()
    cancelled = workflows.durable_status("inv-seeded-cancel", ledger=ledger)
    assert cancelled.outcome["operation"] == "cancel"
    for _, value in ledger.raw_records():
        assert SEED.encode() not in value


# -- the rebuilt workflow must be the same one ---------------------------------------------------


def test_resume_refuses_another_version_with_a_typed_reason(ledger):
    """The ledger names the workflow version it ran; a rebuild of another version is
    refused before any coordinator starts, and the detail says which field differs."""
    run = Blocked("versioned")
    stored = run.wf
    ledger.create(
        "inv-v2",
        {"workflow_id": stored.id, "workflow_version": 2, "kind": stored.kind},
        Checkpoint(
            workflow_id=stored.id,
            workflow_version=2,
            kind=stored.kind,
            cursor=SequentialCursor(next_index=1),
            state={"first_committed": True},
            remaining=Remaining(steps=3, transfers=0),
        ),
    )
    before = children()
    with pytest.raises(AdkError) as info:
        workflows.resume_durable("inv-v2", stored, ledger=ledger)
    assert info.value.reason == "invocation_workflow_mismatch"
    assert "workflow_version" in str(info.value) and "kind" not in info.value.detail
    assert children() == before and run.first_calls == 0
    record = workflows.durable_status("inv-v2", ledger=ledger)
    assert (record.phase, record.owned, record.revision) == ("ready", False, 0)


# -- a long action keeps its lease --------------------------------------------------------------


def test_a_long_action_keeps_its_lease(ledger):
    """An action running for many leases: the coordinator renews while it works, so no
    one can take the invocation over, and the run completes. (The lease is 1.5 s, renewed
    every 0.5 s: a renewal up to a second late, as on a loaded machine running the suite
    on parallel workers, still keeps it; at 0.4 s it lapsed after a 0.53 s stall.)"""
    run = Blocked("long-action")
    ref = run.start(ledger, "inv-long", lease=1.5)
    me = self_pid()
    for _ in range(5):  # 5.5 s: almost four leases
        time.sleep(1.1)
        record = workflows.durable_status("inv-long", ledger=ledger)
        assert record.lease_until > time.time()
        assert reason(lambda: ledger.claim("inv-long", me, "c" * 64, time.time(), 30)) == (
            "invocation_owned"
        )
    run.release()
    outcome = workflows.wait(ref, WAIT)
    assert isinstance(outcome, Completed)
    final = workflows.durable_status("inv-long", ledger=ledger)
    assert (final.phase, final.owned) == ("completed", False)
    assert (run.first_calls, run.second_calls) == (1, 1)


# -- a finished fork branch is committed on its own ---------------------------------------------


def test_a_finished_fork_branch_never_runs_again_after_a_crash(ledger):
    calls = {"left": 0, "right": 0, "join": 0}
    right_started, allow_right = threading.Event(), threading.Event()

    def left(state):
        calls["left"] += 1
        return workflows.Output("L", {"left": True})

    def right(state):
        right_started.set()
        allow_right.wait(30)
        if not is_fenced_thread():
            calls["right"] += 1
        return workflows.Output("R", {"right": True})

    def join(state, context):
        calls["join"] += 1
        return workflows.Output(context["input"], {"joined": sorted(context["input"])})

    wf = adk.compile_workflow(
        {
            "version": 1,
            "id": "durable-fork",
            "kind": "graph",
            "entry": "fork",
            "nodes": [
                {"id": "fork", "type": "fork", "branches": ["left", "right"], "join": "join"},
                {"id": "left", "run": left},
                {"id": "right", "run": right},
                {"id": "join", "type": "join", "run": join},
            ],
            "edges": {"left": "join", "right": "join", "join": "end"},
        }
    )
    iid, ref = workflows.start_durable(wf, {}, ledger=ledger, invocation_id="inv-fork")
    assert right_started.wait(WAIT)

    def left_committed() -> bool:
        cursor = workflows.durable_status(iid, ledger=ledger).checkpoint.cursor
        return isinstance(cursor, GraphCursor) and "left" in (cursor.results or {})

    eventually(left_committed)
    kill_coordinator(ref)
    right_started.clear()
    resumed = workflows.resume_durable(iid, wf, ledger=ledger)
    assert right_started.wait(WAIT)  # the in-flight branch runs again
    allow_right.set()
    outcome = workflows.wait(resumed, WAIT)
    assert isinstance(outcome, Completed)
    assert outcome.state == {"left": True, "right": True, "joined": ["left", "right"]}
    assert (calls["left"], calls["right"], calls["join"]) == (1, 1, 1)
