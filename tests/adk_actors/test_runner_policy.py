"""A Runner's runtime policy and admission control (behaviours §6)."""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
from adk_actors import admission
from adk_actors.outcomes import Failed, Paused
from adk_actors.policy import is_audit_event
from supervision.tasks import Task
from tests.helpers import wait_until

OPEN = {"id": "open", "agents": {"allow": "all"}, "tools": {"allow": "all"}}
MARKER = "RESULT-MARKER-" + "x" * 64


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def audits(session):
    return [e for e in session.events if is_audit_event(e)]


def test_a_denied_agent_never_calls_the_model_and_stores_only_the_audit(sessions):
    model = adk.ScriptedProvider(["never"])
    agent = adk.spawn_agent("Denied", {"provider": model})
    runner = adk.Runner(agent, "app", sessions, runtime_policy={"id": "empty"})
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "secret input words")
    reason, details = failure.value.reason
    assert reason == "runtime_policy_denied" and details["reason"] == "not_allowed"
    assert model.calls == 0
    session = sessions.get_session("app", "u", "s")
    (audit,) = session.events  # the input itself is not stored
    assert is_audit_event(audit) and audit.author == "system"
    (record,) = audit.actions.policy_decisions
    assert (record.operation, record.outcome, record.reason) == (
        "agent_invocation",
        "deny",
        "not_allowed",
    )
    assert "secret input words" not in str(audit)
    streamed = list(runner.invocation("u", "s2", "hi"))  # the audit event is streamed too
    assert is_audit_event(streamed[0]) and isinstance(streamed[-1], Failed)


def test_oversized_input_is_denied_and_not_stored(sessions):
    agent = adk.spawn_agent("Big", {"provider": adk.ScriptedProvider(["never"])})
    policy = {**OPEN, "max_content_bytes": 10}
    runner = adk.Runner(agent, "app", sessions, runtime_policy=policy)
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "more than ten bytes")
    assert failure.value.reason[1]["reason"] == "content_budget_exceeded"
    assert [e.author for e in sessions.get_session("app", "u", "s").events] == ["system"]


def test_a_denied_tool_that_needs_approval_never_pauses(sessions):
    before = []

    class Deploy(adk.Tool):
        name = "deploy"
        require_confirmation = True
        parameters = {"type": "object", "properties": {}}

        def execute(self, args, ctx):
            raise AssertionError("never runs")

    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "deploy", "args": {}}]}, "told"], record_histories=10
    )
    agent = adk.spawn_agent(
        "Deployer",
        {"provider": model, "callbacks": {"before_tool": lambda ctx, call: before.append(call)}},
        tools=[Deploy()],
    )
    policy = {"id": "p", "agents": {"allow": "all"}, "tools": {"allow": "all", "deny": ["deploy"]}}
    runner = adk.Runner(agent, "app", sessions, runtime_policy=policy)
    assert runner.run("u", "s", "deploy") == "told"  # no Paused outcome
    assert before == []
    (seen,) = model.histories[1][-1].parts
    assert seen.response["error"]["kind"] == "runtime_policy_denied"
    assert seen.response["error"]["reason"] == "explicitly_denied"
    (audit,) = audits(sessions.get_session("app", "u", "s"))
    assert audit.actions.policy_decisions[0].operation == "tool_call"


def test_an_oversized_tool_result_is_replaced_and_never_stored(sessions):
    @adk.tool
    def fetch() -> str:
        """Fetch a big document."""
        return MARKER

    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "fetch", "args": {}}]}, "short"], record_histories=10
    )
    agent = adk.spawn_agent("Fetcher", {"provider": model}, tools=[fetch])
    runner = adk.Runner(agent, "app", sessions, runtime_policy={**OPEN, "max_content_bytes": 50})
    assert runner.run("u", "s", "go") == "short"
    (seen,) = model.histories[1][-1].parts
    assert seen.response["error"]["reason"] == "content_budget_exceeded"
    session = sessions.get_session("app", "u", "s")
    assert MARKER not in str(session.events)
    assert [a.actions.policy_decisions[0].operation for a in audits(session)] == ["tool_result"]


def test_an_oversized_final_output_fails_and_is_not_stored(sessions):
    agent = adk.spawn_agent("Verbose", {"provider": adk.ScriptedProvider([MARKER])})
    runner = adk.Runner(agent, "app", sessions, runtime_policy={**OPEN, "max_content_bytes": 50})
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "go")
    assert failure.value.reason[0] == "runtime_policy_denied"
    session = sessions.get_session("app", "u", "s")
    assert MARKER not in str(session.events)
    assert not any(e.is_final for e in session.events)
    assert [a.actions.policy_decisions[0].operation for a in audits(session)] == ["final_output"]


def test_invalid_runner_options_fail_construction(sessions):
    agent = adk.spawn_agent("Opts", {"provider": adk.ScriptedProvider(["x"])})
    for options, reason in (
        ({"runtime_policy": {"id": "p", "agents": {"allow": "*"}}}, "invalid_runtime_policy"),
        ({"admission_control": {"overflow": "drop"}}, ("invalid_admission_control", "overflow")),
        (
            {"admission_control": {"limit": 1}},
            ("invalid_admission_control", ("unknown_keys", ["limit"])),
        ),
    ):
        with pytest.raises(adk.AdkError) as failure:
            adk.Runner(agent, "app", sessions, **options)
        got = failure.value.reason
        assert (
            got if isinstance(reason, tuple) else got if isinstance(got, str) else got[0]
        ) == reason


def test_admission_rejects_over_the_limit_and_a_kill_returns_the_permit(sessions):
    controller = admission.start_link({"global_limit": 1, "default_agent_limit": 1})
    gate = threading.Event()
    entered = threading.Event()

    def slow(history, tools):
        entered.set()
        gate.wait(10)
        return {"text": "done"}

    agent = adk.spawn_agent("Limited", {"provider": adk.ScriptedProvider(fn=slow)})
    runner = adk.Runner(
        agent, "app", sessions, admission_control={"overflow": "reject", "server": controller}
    )
    first = Task.start(runner.run, "u", "s1", "one")
    assert entered.wait(5)
    sessions.create_session("app", "u", "s2", {"temp:draft": 1})
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s2", "two")
    assert failure.value.reason == ("admission_failed", "concurrency_limit_reached")
    refused = sessions.get_session("app", "u", "s2")
    assert refused.events == () and refused.state == {"temp:draft": 1}  # nothing touched
    assert admission.status(controller)["active"] == 1
    first.kill()  # the worker owning the permit dies: the monitor gives it back
    wait_until(lambda: admission.status(controller)["active"] == 0)
    gate.set()
    entered.clear()
    assert runner.run("u", "s3", "three") == "done"
    assert admission.status(controller)["active"] == 0


def test_queued_admission_waits_for_a_permit(sessions):
    controller = admission.start_link({"global_limit": 1, "overflow": "queue"})
    gate = threading.Event()
    model = adk.ScriptedProvider(fn=lambda history, tools: gate.wait(10) and {"text": "ok"})
    agent = adk.spawn_agent("Queued", {"provider": model})
    runner = adk.Runner(
        agent,
        "app",
        sessions,
        admission_control={"overflow": "queue", "queue_timeout": 10, "server": controller},
    )
    tasks = [Task.start(runner.run, "u", f"s{n}", "hi") for n in range(3)]
    wait_until(lambda: admission.status(controller)["queued"] == 2)
    gate.set()
    assert [task.wait(10) for task in tasks] == ["ok"] * 3
    assert admission.status(controller) | {} and admission.status(controller)["active"] == 0


def test_a_paused_run_releases_its_permit(sessions):
    controller = admission.start_link({"global_limit": 1})

    class Gate(adk.Tool):
        name = "gate"
        require_confirmation = True
        parameters = {"type": "object", "properties": {}}

        def execute(self, args, ctx):
            return "opened"

    model = adk.ScriptedProvider([{"tool_calls": [{"name": "gate", "args": {}}]}, "through"])
    agent = adk.spawn_agent("Gated", {"provider": model}, tools=[Gate()])
    runner = adk.Runner(agent, "app", sessions, admission_control={"server": controller})
    assert isinstance(runner.run("u", "s", "go"), Paused)
    assert admission.status(controller)["active"] == 0
    assert runner.resume("u", "s", {"confirmed": True}) == "through"


def test_the_application_runs_one_admission_controller(sessions):
    adk.stop()
    with pytest.raises(adk.AdkError) as failure:
        adk.start(admission_control={"global_limit": 0})
    assert failure.value.reason[:2] == ("invalid_application_env", "admission_control")
    adk.start(admission_control={"global_limit": 1, "default_agent_limit": 1})
    adk.start(admission_control={"global_limit": 1, "default_agent_limit": 1})  # the same: fine
    with pytest.raises(adk.AdkError) as failure:
        adk.start(admission_control={"global_limit": 2})
    assert failure.value.reason == ("application_already_started", "admission_control")
    fresh = adk.sessions.InMemorySessionService()
    agent = adk.spawn_agent("AppLimited", {"provider": adk.ScriptedProvider(["ok", "ok"])})
    runner = adk.Runner(agent, "app", fresh, admission_control={})
    assert runner.run("u", "s", "hi") == "ok"
    status = admission.status()
    assert (status["active"], status["global_limit"]) == (0, 1)
    fresh.close()
