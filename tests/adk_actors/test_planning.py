"""Explicit planning and replanning (`adk.run_planning`, `adk.planning.*`).

Each test follows a case of the reference's `adk_planning_runtime_test` or
`erlang_adk_planning_test` (named in its docstring), adapted to Python: callbacks
are objects the application built, times are seconds, the reference's heap cap is a
byte cap on callback answers, and its atom-safety case is a planner given by name.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from typing import Any

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import planning
from adk_actors.planning import CONTINUE, Complete, Fail, Replan, new_plan, plan_step
from tests.helpers import in_thread, wait_dead, wait_until

GOAL = {"task": "deterministic planning"}
CONTEXT = {"invocation_id": "planning-test", "authorization": "must-not-leak"}
METADATA = {"build": "test", "client_secret": "hidden"}


def reason(fn: Any) -> Any:
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def make_plan(
    plan_id: str, revision: int, goal: Any, steps: list[dict[str, Any]]
) -> dict[str, Any]:
    return new_plan(
        plan_id, revision, goal, steps, {"suite": "planning-runtime", "api_key": "must-be-pruned"}
    )


def step(step_id: str, mode: str, value: Any) -> dict[str, Any]:
    return plan_step(
        step_id, "Execute a deterministic fixture action", {"mode": mode, "value": value}
    )


class FixturePlanner:
    """The reference's test planner: one behaviour per mode."""

    def __init__(self, mode: str = "normal", **config: Any) -> None:
        self.mode = mode
        self.config = config
        self.calls: list[str] = []

    def plan(self, goal: Any, context: dict[str, Any]) -> Any:
        self.calls.append("plan")
        match self.mode:
            case "plan_crash":
                raise RuntimeError("planner crash with token=abc")
            case "plan_timeout":
                time.sleep(0.3)
                return make_plan("test-plan", 0, goal, [step("1", "echo", 1)])
            case "invalid_plan":
                return {"not": "a-plan"}
            case "initial_complete":
                return Complete({"answer": "ready"})
            case "configured_plan":
                return self.config["plan"]
            case "replan_once":
                return make_plan("test-plan", 0, goal, [step("first", "error", 1)])
            case "replan_forever":
                return make_plan("test-plan", 0, goal, [step("revision-0", "echo", 0)])
            case "bad_replan":
                return make_plan("test-plan", 0, goal, [step("first", "echo", 1)])
        count = self.config.get("step_count", 1)
        steps = [step(str(n), "echo", n) for n in range(1, count + 1)]
        return make_plan("test-plan", 0, goal, steps)

    def review(self, plan: Any, step_: Any, observation: Any, context: Any) -> Any:
        self.calls.append("review")
        match self.mode:
            case "review_crash":
                raise RuntimeError("review crash")
            case "invalid_review":
                return "invalid_decision"
            case "replan_once" if plan["revision"] == 0:
                return Replan(
                    make_plan(plan["id"], 1, plan["goal"], [step("recovered", "echo", 42)])
                )
            case "replan_forever":
                revision = plan["revision"] + 1
                steps = [step(f"revision-{revision}", "echo", revision)]
                return Replan(make_plan(plan["id"], revision, plan["goal"], steps))
            case "bad_replan":
                return Replan(
                    make_plan("different-plan", 7, plan["goal"], [step("bad", "echo", 7)])
                )
        return CONTINUE


class FixtureExecutor:
    """The reference's test executor: its mode, or the step action's ``mode``."""

    def __init__(self, mode: str = "from_action", delay: float = 0.5) -> None:
        self.mode = mode
        self.delay = delay
        self.started: queue.Queue[tuple[sv.Pid, str]] = queue.Queue()

    async def execute(self, step_: dict[str, Any], context: dict[str, Any]) -> Any:
        self.started.put((sv.self_pid(), step_["id"]))
        action = step_["action"]
        mode = action["mode"] if self.mode == "from_action" else self.mode
        match mode:
            case "echo":
                return action.get("value")
            case "error":
                return Fail({"reason": "deliberate", "access_token": "executor-secret"})
            case "invalid":
                return Replan({"not": "a result"})
            case "opaque":
                return object()
            case "crash":
                raise RuntimeError("executor crash")
            case "timeout":
                await asyncio.sleep(self.delay)
                return "late"
            case "heap":
                return list(range(200_000))
        raise AssertionError(mode)


def run(planner_mode: str, executor_mode: str, **options: Any) -> planning.PlanningResult:
    return adk.run_planning(
        FixturePlanner(planner_mode),
        FixtureExecutor(executor_mode),
        GOAL,
        CONTEXT,
        **{"result_metadata": METADATA, **options},
    )


def assert_failed_kind(result: dict[str, Any], kind: str) -> None:
    assert result["status"] == "failed"
    assert result["error"]["kind"] == kind
    assert result["result"] is None


def assert_observation_kind(result: dict[str, Any], kind: str) -> None:
    assert_failed_kind(result, "step_failed")
    [observation] = result["observations"]
    assert observation["error"]["kind"] == kind


# -- adk_planning_runtime_test --------------------------------------------------------------


def test_plan_codec_round_trip_and_secret_pruning():
    """Follows adk_planning_runtime_test: plan_codec_roundtrip_and_secret_pruning_test."""
    checked = plan_step(
        "lookup",
        "Look up a value",
        {"kind": "tool", "api_key": "hidden"},
        {"password": "hidden", "safe": True},
    )
    assert "api_key" not in checked["action"] and "password" not in checked["metadata"]
    plan = new_plan(
        "plan-1",
        0,
        {"task": "inspect", "access_token": "hidden"},
        [checked],
        {"build": "abc", "secret": "hidden"},
    )
    assert plan["goal"] == {"task": "inspect"}
    assert plan["metadata"] == {"build": "abc"}
    assert planning.validate_plan(json.loads(json.dumps(plan))) == plan
    assert planning.decode_plan_json(json.dumps(plan)) == plan


def test_plan_rejects_opaque_code_and_ambiguous_shapes():
    """Follows adk_planning_runtime_test: plan_rejects_opaque_code_and_ambiguous_shapes_test
    (the atom/binary alias case is a JSON text repeating a key)."""
    assert reason(
        lambda: plan_step("code", "Never execute code", {"source": lambda: "unsafe"})
    ) == (
        "invalid_plan_step",
        0,
    )
    same = plan_step("same", "A", {"kind": "noop"})
    assert reason(lambda: new_plan("duplicates", 0, "goal", [same, same])) == (
        "duplicate_plan_step_id",
        "same",
    )
    assert reason(lambda: new_plan("unknown", 0, "goal", [{**same, "unexpected": True}])) == (
        "unknown_plan_step_fields",
        0,
        ("unexpected",),
    )
    text = '{"id": "one", "id": "two", "revision": 0, "goal": "goal", "steps": []}'
    assert reason(lambda: planning.validate_plan(planning.decode_plan_json(text))) == (
        "duplicate_plan_field",
        "id",
    )
    assert reason(lambda: planning.validate_plan({"id": "x", "revision": 0, "goal": 1})) == (
        "missing_plan_field",
        "steps",
    )
    plan = make_plan("p", 0, "goal", [same])
    assert reason(lambda: planning.validate_plan({**plan, "schema_version": 2})) == (
        "unsupported_plan_schema_version",
        2,
    )
    assert reason(lambda: planning.validate_plan({**plan, "id": ""})) == "invalid_plan_id"
    assert reason(lambda: planning.validate_plan({**plan, "extra": 1})) == (
        "unknown_plan_fields",
        ("extra",),
    )
    assert reason(lambda: planning.validate_plan({**plan, "goal": {1: "x"}})) == "invalid_plan_json"
    assert reason(lambda: planning.decode_plan_json("not json")) == "invalid_plan_json"


def test_simple_plan_completes_with_json_safe_history():
    """Follows adk_planning_runtime_test: simple_plan_completes_with_json_safe_history_test."""
    result = run("normal", "echo")
    assert result["status"] == "completed"
    assert result["result"] == 1
    assert result["steps_executed"] == 1 and result["replans"] == 0
    [observation] = result["observations"]
    assert observation["status"] == "ok"
    assert observation == {
        "plan_id": "test-plan",
        "revision": 0,
        "step_id": "1",
        "attempt": 1,
        "status": "ok",
        "output": 1,
    }
    assert result["metadata"] == {"build": "test"}
    encoded = json.dumps(result)
    assert "must-be-pruned" not in encoded and "hidden" not in encoded
    assert planning.decode_result(json.loads(encoded)) == result
    assert set(result) == set(planning.RESULT_KEYS)


def test_model_supplied_code_is_only_opaque_action_data():
    """Follows adk_planning_runtime_test: model_supplied_code_is_only_opaque_action_data_test."""
    goal = "do not execute source"
    opaque = plan_step(
        "opaque",
        "Treat source as data",
        {"mode": "echo", "value": 7, "module": "os", "source": "__import__('os')._exit(1)"},
    )
    plan = new_plan("opaque-plan", 0, goal, [opaque])
    assert plan["steps"][0]["action"]["module"] == "os"
    result = adk.run_planning(
        FixturePlanner("configured_plan", plan=plan), FixtureExecutor("from_action"), goal
    )
    assert result["status"] == "completed"
    assert result["result"] == 7


def test_replanning_recovers_from_step_failure_and_records_every_revision():
    """Follows adk_planning_runtime_test: replanning_recovers_from_step_failure_test; the
    result also carries every accepted plan (`.plans`)."""
    result = run("replan_once", "from_action")
    assert result["status"] == "completed"
    assert result["result"] == 42
    assert result["steps_executed"] == 2 and result["replans"] == 1
    assert result["plan"]["revision"] == 1
    failed, recovered = result["observations"]
    assert failed["status"] == "error" and recovered["status"] == "ok"
    assert failed["error"] == {"kind": "executor_failed", "reason": {"reason": "deliberate"}}
    assert [(plan["id"], plan["revision"]) for plan in result.plans] == [
        ("test-plan", 0),
        ("test-plan", 1),
    ]
    assert [plan["steps"][0]["id"] for plan in result.plans] == ["first", "recovered"]


def test_max_steps_is_total_across_the_plan():
    """Follows adk_planning_runtime_test: max_steps_is_total_across_plan_test."""
    planner = FixturePlanner("normal", step_count=3)
    result = adk.run_planning(planner, FixtureExecutor("echo"), GOAL, CONTEXT, max_steps=2)
    assert_failed_kind(result, "max_steps_exceeded")
    assert result["error"]["reason"] == {"limit": 2}
    assert result["steps_executed"] == 2
    assert len(result["observations"]) == 2


def test_max_replans_is_enforced():
    """Follows adk_planning_runtime_test: max_replans_is_enforced_test."""
    result = run("replan_forever", "from_action", max_replans=1, max_steps=10)
    assert_failed_kind(result, "max_replans_exceeded")
    assert result["replans"] == 1 and result["steps_executed"] == 2
    assert len(result.plans) == 2


def test_absolute_deadline_is_a_failure_value():
    """Follows adk_planning_runtime_test: absolute_deadline_is_a_failure_value_test."""
    result = run("normal", "timeout", timeout=0.025, callback_timeout=1.0)
    assert_failed_kind(result, "deadline_exceeded")
    assert result["steps_executed"] == 0


def test_callback_timeout_is_a_reviewable_step_failure():
    """Follows adk_planning_runtime_test: callback_timeout_is_reviewable_step_failure_test."""
    result = run("normal", "timeout", timeout=5.0, callback_timeout=0.02)
    assert_failed_kind(result, "step_failed")
    [observation] = result["observations"]
    assert observation["error"]["kind"] == "executor_callback_failed"
    assert observation["error"]["reason"] == "callback_timeout"


def test_planner_crash_timeout_and_invalid_plan_are_values():
    """Follows adk_planning_runtime_test: planner_crash_timeout_and_invalid_plan_are_values_test."""
    crashed = run("plan_crash", "echo")
    assert_failed_kind(crashed, "planner_callback_failed")
    assert crashed["error"] == {
        "kind": "planner_callback_failed",
        "reason": "callback_exception",
        "class": "RuntimeError",
    }
    timed_out = run("plan_timeout", "echo", timeout=5.0, callback_timeout=0.02)
    assert_failed_kind(timed_out, "planner_callback_failed")
    assert timed_out["error"]["reason"] == "callback_timeout"
    invalid = run("invalid_plan", "echo")
    assert_failed_kind(invalid, "invalid_initial_plan")
    assert invalid["error"]["reason"] == ["unknown_plan_fields", ["not"]]
    assert invalid["plan"] is None and invalid.plans == ()


def test_executor_crash_invalid_and_opaque_output_are_observations():
    """Follows adk_planning_runtime_test: executor_crash_invalid_and_opaque_output_are_values_test."""
    assert_observation_kind(run("normal", "crash"), "executor_callback_failed")
    assert_observation_kind(run("normal", "invalid"), "invalid_executor_result")
    assert_observation_kind(run("normal", "opaque"), "invalid_executor_output")


def test_planner_review_crash_and_invalid_decision_are_values():
    """Follows adk_planning_runtime_test: planner_review_crash_and_invalid_decision_are_values_test."""
    assert_failed_kind(run("review_crash", "echo"), "planner_callback_failed")
    assert_failed_kind(run("invalid_review", "echo"), "invalid_planner_decision")


def test_replan_identity_is_strict():
    """Follows adk_planning_runtime_test: replan_identity_is_strict_test."""
    result = run("bad_replan", "echo")
    assert_failed_kind(result, "invalid_replan")
    assert result["error"]["reason"] == "invalid_plan_identity"
    assert result["replans"] == 0


def test_plan_size_budget_is_checked():
    """Follows adk_planning_runtime_test: plan_size_budget_is_checked_test."""
    result = run("normal", "echo", max_plan_bytes=32)
    assert_failed_kind(result, "invalid_initial_plan")
    assert result["error"]["reason"] == "plan_size_limit_exceeded"


def test_an_oversized_callback_answer_is_isolated():
    """Follows adk_planning_runtime_test: heap_exhaustion_is_isolated_test (a byte cap on
    what a callback answers stands for the reference's per-worker heap cap)."""
    result = run("normal", "heap", max_output_bytes=10_000)
    assert_observation_kind(result, "executor_callback_failed")
    assert result["observations"][0]["error"]["reason"] == "output_size_limit_exceeded"


def test_cancellation_kills_the_active_worker_and_redacts_the_reason():
    """Follows adk_planning_runtime_test: cancellation_kills_active_worker_and_redacts_reason_test."""
    executor = FixtureExecutor("timeout", delay=30.0)
    ref = planning.start(
        FixturePlanner(), executor, GOAL, CONTEXT, timeout=60.0, callback_timeout=50.0
    )
    worker, step_id = executor.started.get(timeout=5)
    assert step_id == "1"
    planning.cancel(ref, {"reason": "user_requested", "access_token": "must-not-leak"})
    result = planning.wait(ref, 5.0)
    assert result["status"] == "cancelled"
    assert result["steps_executed"] == 0
    wait_dead(worker)
    assert not worker.is_alive()
    assert "must-not-leak" not in json.dumps(result)
    assert result["error"] == {"kind": "cancelled", "reason": {"reason": "user_requested"}}
    assert reason(lambda: planning.cancel(ref)) == "invalid_planning_ref"  # the run is gone


def test_a_mismatched_ref_is_rejected_without_stopping_the_run():
    """Follows adk_planning_runtime_test:
    mismatched_cancel_ref_is_rejected_without_stopping_runtime_test."""
    executor = FixtureExecutor("timeout", delay=30.0)
    ref = planning.start(
        FixturePlanner(), executor, GOAL, CONTEXT, timeout=60.0, callback_timeout=50.0
    )
    executor.started.get(timeout=5)
    forged = planning.PlanningRef(ref.owner, ref.server, "0" * 32)
    assert reason(lambda: planning.cancel(forged, "wrong_run")) == "invalid_planning_ref"
    assert reason(lambda: planning.wait(forged, 5.0)) == "invalid_planning_ref"
    assert ref.server.is_alive()
    planning.cancel(ref, "correct_run")
    result = planning.wait(ref, 5.0)
    assert result["status"] == "cancelled" and result["error"]["reason"] == "correct_run"


def test_a_planner_given_by_name_is_refused():
    """Follows adk_planning_runtime_test: untrusted_module_name_does_not_create_atom_test (no
    string ever selects code: a planner or executor named by a string is refused)."""
    before = sv.kernel_stats()["processes"]
    assert reason(lambda: planning.start("untrusted.planner.module", FixtureExecutor(), GOAL)) == (
        "invalid_planning_adapter",
        "planner",
    )
    assert reason(lambda: planning.start(FixturePlanner(), "os.system", GOAL)) == (
        "invalid_planning_adapter",
        "executor",
    )
    assert reason(lambda: planning.start(object(), FixtureExecutor(), GOAL)) == (
        "invalid_planning_adapter",
        "planner",
        "missing_callback",
    )
    assert sv.kernel_stats()["processes"] <= before


def test_the_result_codec_rejects_unknown_fields_and_versions():
    """Follows adk_planning_runtime_test: result_codec_rejects_unknown_fields_and_versions_test."""
    result = dict(run("normal", "echo"))
    assert reason(lambda: planning.decode_result({**result, "result_schema_version": 99})) == (
        "unsupported_planning_result_version",
        99,
    )
    assert reason(lambda: planning.decode_result({**result, "unexpected": True})) == (
        "invalid_planning_result"
    )
    missing = {key: value for key, value in result.items() if key != "result"}
    assert reason(lambda: planning.decode_result(missing)) == "invalid_planning_result"
    impossible = {**result, "error": {"kind": "impossible"}}
    assert reason(lambda: planning.decode_result(impossible)) == "invalid_planning_result"
    assert reason(lambda: planning.decode_result({**result, "status": "paused"})) == (
        "invalid_planning_result"
    )


# -- erlang_adk_planning_test: the public calls -----------------------------------------------


class ReadmePlanner:
    """The README planner: one step returning the application-approved result."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def plan(self, goal: Any, context: dict[str, Any]) -> Any:
        value = self.value
        if value is None:
            value = {"goal": goal, "invocation_id": context.get("invocation_id")}
        action = {"kind": "return", "value": value}
        steps = [plan_step("return-result", "Return the application-approved result", action)]
        return new_plan("readme-plan", 0, goal, steps, {"source": "readme_planner"})

    def review(self, plan: Any, step_: Any, observation: dict[str, Any], context: Any) -> Any:
        if observation["status"] == "ok":
            return Complete(observation["output"])
        return Fail(observation["error"])


def readme_executor(started: queue.Queue[sv.Pid] | None = None, delay: float = 0.0) -> Any:
    """The README executor as a plain async callable: a declared action vocabulary."""

    async def execute(step_: dict[str, Any], context: dict[str, Any]) -> Any:
        if started is not None:
            started.put(sv.self_pid())
        if delay:
            await asyncio.sleep(delay)
        action = step_["action"]
        if action.get("kind") == "return":
            return action.get("value")
        return Fail({"kind": "unsupported_action"})

    return execute


def test_sync_run_with_defaults():
    """Follows erlang_adk_planning_test: sync_defaults."""
    goal = {"task": "prepare release"}
    result = adk.run_planning(
        ReadmePlanner(), readme_executor(), goal, {"invocation_id": "planning-public-default"}
    )
    assert result["status"] == "completed"
    assert result["result"] == {"goal": goal, "invocation_id": "planning-public-default"}
    assert result["steps_executed"] == 1


def test_sync_run_with_options_prunes_metadata():
    """Follows erlang_adk_planning_test: sync_options."""
    expected = {"release": "0.3.0", "ready": True}
    result = adk.run_planning(
        ReadmePlanner(expected),
        readme_executor(),
        "check release",
        {},
        max_steps=1,
        max_replans=0,
        result_metadata={"build": "public-wrapper", "api_key": "must-not-leak"},
    )
    assert result["result"] == expected
    assert result["metadata"] == {"build": "public-wrapper"}
    assert reason(
        lambda: adk.run_planning(ReadmePlanner(), readme_executor(), "g", max_steps=0)
    ) == (
        "invalid_planning_options",
        "max_steps",
    )
    assert reason(lambda: adk.run_planning(ReadmePlanner(), readme_executor(), "g", nope=1)) == (
        "invalid_planning_options",
        ("unknown_keys", ["nope"]),
    )


def test_async_cancel_with_the_default_reason():
    """Follows erlang_adk_planning_test: async_default_cancel_and_await."""
    started: queue.Queue[sv.Pid] = queue.Queue()
    ref = planning.start(ReadmePlanner(), readme_executor(started, delay=30.0), "cancel default")
    started.get(timeout=5)
    planning.cancel(ref)
    result = planning.wait(ref)
    assert result["status"] == "cancelled"
    assert result["error"]["reason"] == "user_cancelled"


def test_async_await_timeout_custom_cancel_and_ownership():
    """Follows erlang_adk_planning_test: async_timeout_custom_cancel_and_ownership."""
    started: queue.Queue[sv.Pid] = queue.Queue()
    ref = planning.start(
        ReadmePlanner(),
        readme_executor(started, delay=30.0),
        "cancel custom",
        timeout=10.0,
        callback_timeout=9.0,
    )
    assert reason(lambda: planning.wait(ref, 0)) == "planning_await_timeout"
    started.get(timeout=5)
    foreign = in_thread(
        lambda: (reason(lambda: planning.wait(ref, 0)), reason(lambda: planning.cancel(ref)))
    )
    assert foreign == ("not_planning_owner", "not_planning_owner")
    planning.cancel(ref, {"reason": "caller_requested", "access_token": "must-not-leak"})
    result = planning.wait(ref, 5.0)
    assert result["status"] == "cancelled"
    assert result["error"]["reason"] == {"reason": "caller_requested"}


def test_malformed_refs_fail_explicitly():
    """Follows erlang_adk_planning_test: malformed_refs_fail_explicitly."""
    assert reason(lambda: planning.wait("not_a_planning_ref", 0)) == "invalid_planning_ref"
    assert reason(lambda: planning.cancel("not_a_planning_ref")) == "invalid_planning_ref"
    me = sv.self_pid()
    swapped = planning.PlanningRef(me, "server", "token")  # type: ignore[arg-type]
    assert reason(lambda: planning.wait(swapped, 0)) == "invalid_planning_ref"
    assert reason(lambda: planning.cancel(swapped, "test")) == "invalid_planning_ref"


# -- owner death, supervision, the agent planner ---------------------------------------------


def test_owner_death_stops_the_run_and_its_active_callback():
    """Follows the spec's "Explicit planning and replanning": owner death stops the runtime
    and its active callback (the reference's owner monitor)."""
    started: queue.Queue[sv.Pid] = queue.Queue()

    def owner() -> planning.PlanningRef:
        ref = planning.start(ReadmePlanner(), readme_executor(started, delay=30.0), "orphan")
        started_worker = started.get(timeout=5)
        started.put(started_worker)
        return ref

    ref = in_thread(owner)  # the thread ends: its pseudo-process exits
    worker = started.get(timeout=5)
    wait_dead(ref.server)
    wait_dead(worker)
    assert not worker.is_alive() and not ref.server.is_alive()


def test_a_run_is_a_temporary_child_of_the_workflow_supervisor():
    """A running plan is one supervised child (`adk.workflows`), gone once awaited."""
    before = len(sv.DynamicSupervisor.which_children("adk.workflows"))
    started: queue.Queue[sv.Pid] = queue.Queue()
    ref = planning.start(ReadmePlanner(), readme_executor(started, delay=30.0), "supervised")
    started.get(timeout=5)
    children = sv.DynamicSupervisor.which_children("adk.workflows")
    assert ref.server in [child.pid for child in children]
    assert len(children) == before + 1
    planning.cancel(ref)
    planning.wait(ref, 5.0)
    wait_until(lambda: len(sv.DynamicSupervisor.which_children("adk.workflows")) == before)


def _agent_answers(*answers: str) -> adk.ScriptedProvider:
    return adk.ScriptedProvider([{"text": answer} for answer in answers], record_histories=10)


class ActionExecutor:
    """A declared vocabulary: ``add`` adds to a running total, ``fail`` fails."""

    def __init__(self) -> None:
        self.total = 0

    def execute(self, step_: dict[str, Any], context: dict[str, Any]) -> Any:
        action = step_["action"]
        if action["kind"] == "add":
            self.total += action["amount"]
            return {"total": self.total}
        return Fail("unsupported_action")


def test_agent_planner_plans_and_replans_from_json_answers():
    """The spec's planner agent: an agent proposes a validated JSON plan, a failed step is
    reviewed by the agent, which replans; every revision is recorded."""
    model = _agent_answers(
        '```json\n{"steps": [{"id": "a", "description": "add two", "action": {"kind": "add", "amount": 2}},'
        ' {"id": "b", "description": "unknown", "action": {"kind": "explode"}}]}\n```',
        '{"decision": "replan", "steps": [{"id": "c", "description": "add three",'
        ' "action": {"kind": "add", "amount": 3}}]}',
    )
    adk.spawn_agent("PlannerAgent", {"provider": model})
    planner = planning.AgentPlanner(
        "PlannerAgent", actions={"add": {"kind": "add", "amount": "<int>"}}
    )
    result = adk.run_planning(planner, ActionExecutor(), {"task": "sum"})
    assert result["status"] == "completed"
    assert result["result"] == {"total": 5}
    assert [(plan["id"], plan["revision"]) for plan in result.plans] == [
        ("agent-plan", 0),
        ("agent-plan", 1),
    ]
    assert [obs["status"] for obs in result["observations"]] == ["ok", "error", "ok"]
    assert len(model.histories) == 2  # the ok steps continued without a model call
    first_prompt = model.histories[0][-1].text_value()
    assert '"task": "sum"' in first_prompt and '"add"' in first_prompt


def test_agent_planner_answers_that_are_not_plans_fail_the_run():
    """An agent answer that is not JSON, repeats a key or breaks the plan rules fails the
    run with the reason (the reference's planner_callback_failed / invalid_initial_plan)."""
    adk.spawn_agent("Chatty", {"provider": _agent_answers("Sure! Here is my plan: step one...")})
    chatty = adk.run_planning(planning.AgentPlanner("Chatty"), ActionExecutor(), "goal")
    assert chatty["error"] == {
        "kind": "planner_callback_failed",
        "reason": "invalid_plan_json",
        "class": "AdkError",
    }
    adk.spawn_agent("Repeats", {"provider": _agent_answers('{"steps": [], "steps": []}')})
    repeats = adk.run_planning(planning.AgentPlanner("Repeats"), ActionExecutor(), "goal")
    assert repeats["error"]["reason"] == "duplicate_plan_field"
    adk.spawn_agent("Empty", {"provider": _agent_answers('{"steps": []}')})
    empty = adk.run_planning(planning.AgentPlanner("Empty"), ActionExecutor(), "goal")
    assert empty["error"] == {"kind": "invalid_initial_plan", "reason": "invalid_plan_fields"}
    missing = adk.run_planning(planning.AgentPlanner("NoSuchAgent"), ActionExecutor(), "goal")
    assert missing["error"]["kind"] == "planner_callback_failed"


# -- the budgets, the deadline and failure values, rule by rule ------------------------------


class RevisionPlanner:
    """Proposes one step per revision and replans after every step, forever."""

    def plan(self, goal: Any, context: dict[str, Any]) -> Any:
        return new_plan("revisions", 0, goal, [plan_step("r0", "Revision 0", {"value": 0})])

    def review(self, plan: Any, step_: Any, observation: Any, context: Any) -> Any:
        revision = plan["revision"] + 1
        steps = [plan_step(f"r{revision}", f"Revision {revision}", {"value": revision})]
        return Replan(new_plan(plan["id"], revision, plan["goal"], steps))


def value_executor(step_: dict[str, Any], context: dict[str, Any]) -> Any:
    return step_["action"]["value"]


def test_max_steps_counts_every_revision_together():
    """``max_steps`` bounds executor calls across all revisions, not per plan."""
    result = adk.run_planning(RevisionPlanner(), value_executor, "g", max_steps=3, max_replans=10)
    assert_failed_kind(result, "max_steps_exceeded")
    assert result["steps_executed"] == 3
    assert [obs["revision"] for obs in result["observations"]] == [0, 1, 2]
    assert [plan["revision"] for plan in result.plans] == [0, 1, 2, 3]


def test_max_replans_zero_refuses_the_first_replan():
    """With ``max_replans=0`` the first replacement plan ends the run, unaccepted."""
    result = adk.run_planning(RevisionPlanner(), value_executor, "g", max_replans=0)
    assert_failed_kind(result, "max_replans_exceeded")
    assert result["error"]["reason"] == {"limit": 0}
    assert result["replans"] == 0 and result["steps_executed"] == 1
    assert [plan["revision"] for plan in result.plans] == [0]
    assert result["plan"]["revision"] == 0


def test_every_accepted_revision_is_recorded_with_its_observations():
    """Each accepted plan is in ``.plans`` in order; each observation names the
    revision it ran under; the current ``plan`` is the last accepted one."""
    result = adk.run_planning(RevisionPlanner(), value_executor, "g", max_steps=4, max_replans=2)
    assert_failed_kind(result, "max_replans_exceeded")
    assert [plan["revision"] for plan in result.plans] == [0, 1, 2]
    assert result["plan"] == result.plans[-1]
    assert [(obs["revision"], obs["output"]) for obs in result["observations"]] == [
        (0, 0),
        (1, 1),
        (2, 2),
    ]
    assert all(plan["id"] == "revisions" for plan in result.plans)


def test_the_deadline_during_the_planner_call_is_a_failure_value():
    """A planner still thinking at the run's deadline ends ``deadline_exceeded`` (not
    ``callback_timeout``), with nothing executed and no plan recorded."""
    started = time.monotonic()
    result = run("plan_timeout", "echo", timeout=0.05, callback_timeout=5.0)
    assert time.monotonic() - started < 0.25
    assert_failed_kind(result, "deadline_exceeded")
    assert result["steps_executed"] == 0 and result.plans == ()


def test_the_callback_timeout_is_capped_by_the_deadline():
    """A per-call timeout longer than the run cannot outlive the run."""
    started = time.monotonic()
    result = run("normal", "timeout", timeout=0.1, callback_timeout=60.0)
    assert_failed_kind(result, "deadline_exceeded")
    assert time.monotonic() - started < 1.0


class SecretFailingPlanner:
    """Gives up with a reason full of credentials, or completes with a huge value."""

    def __init__(self, how: str) -> None:
        self.how = how

    def plan(self, goal: Any, context: dict[str, Any]) -> Any:
        match self.how:
            case "nested":
                return Fail(
                    {
                        "detail": "Authorization: Bearer sk-abcdefabcdefabcdef1234",
                        "password": "hunter2",
                    }
                )
            case "text":
                return Fail("api_key=AIzaSyA1234567890abcdefghijklmnopqrstu")
            case "huge_failure":
                return Fail("x" * 5_000)
        return Complete("y" * 5_000)

    def review(self, *args: Any) -> Any:
        return CONTINUE


def test_failure_values_are_secret_free_and_bounded():
    """A planner's failure reason reaches the result redacted, without secret-named
    keys, and never bigger than ``max_output_bytes``; so does a completed value."""
    nested = adk.run_planning(SecretFailingPlanner("nested"), value_executor, "g")
    assert_failed_kind(nested, "planner_failed")
    encoded = json.dumps(nested)
    assert "sk-abcdef" not in encoded and "hunter2" not in encoded
    assert "password" not in nested["error"]["reason"]
    text = adk.run_planning(SecretFailingPlanner("text"), value_executor, "g")
    assert "AIzaSy" not in json.dumps(text)
    huge = adk.run_planning(
        SecretFailingPlanner("huge_failure"), value_executor, "g", max_output_bytes=100
    )
    assert huge["error"] == {"kind": "planner_failed", "reason": "output_size_limit_exceeded"}
    big = adk.run_planning(SecretFailingPlanner("big"), value_executor, "g", max_output_bytes=100)
    assert big["error"] == {
        "kind": "invalid_planner_result",
        "reason": "output_size_limit_exceeded",
    }


def test_a_callback_cannot_change_what_was_recorded():
    """Callbacks get fresh copies: an executor that mutates its step (or the context)
    changes neither the recorded plan nor what the next call sees."""
    seen: list[dict[str, Any]] = []

    def mutating(step_: dict[str, Any], context: dict[str, Any]) -> Any:
        seen.append(json.loads(json.dumps(context)))
        step_["action"]["mode"] = "tampered"
        context["invocation_id"] = "tampered"
        return step_["action"]["value"]

    result = adk.run_planning(FixturePlanner("normal", step_count=2), mutating, GOAL, CONTEXT)
    assert result["status"] == "completed"
    assert [item["action"]["mode"] for item in result["plan"]["steps"]] == ["echo", "echo"]
    assert seen == [{"invocation_id": "planning-test"}] * 2  # secret-named key pruned


def test_a_cancel_after_the_run_ended_is_already_terminal():
    """The run ends once: a cancel after it ended is refused and the result stays."""
    reviewed = threading.Event()

    class Reviewed(ReadmePlanner):
        def review(self, *args: Any) -> Any:
            reviewed.set()
            return super().review(*args)

    ref = planning.start(Reviewed({"done": True}), readme_executor(), "ended")
    assert reviewed.wait(5)
    time.sleep(0.2)  # the engine's ending reaches the server
    assert reason(lambda: planning.cancel(ref)) == "already_terminal"
    result = planning.wait(ref, 5.0)
    assert result["status"] == "completed" and result["result"] == {"done": True}
    assert reason(lambda: planning.wait(ref, 1.0)) == "invalid_planning_ref"


def test_concurrent_runs_are_independent():
    """Runs started from many processes at once each get their own result."""
    results: dict[int, Any] = {}

    def one(n: int) -> None:
        results[n] = adk.run_planning(ReadmePlanner({"n": n}), readme_executor(), f"goal-{n}")

    threads = [threading.Thread(target=one, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == list(range(16))
    assert all(results[n]["result"] == {"n": n} for n in range(16))
    assert all(results[n]["plan"]["goal"] == f"goal-{n}" for n in range(16))


# -- the planner agent: every decision it may answer -----------------------------------------


def test_agent_planner_reviews_every_step_when_asked():
    """``review="always"``: the agent reviews each step, including the ones that worked,
    and may complete the goal with its own result."""
    model = _agent_answers(
        '{"steps": [{"id": "a", "description": "add one", "action": {"kind": "add", "amount": 1}},'
        ' {"id": "b", "description": "add ten", "action": {"kind": "add", "amount": 10}}]}',
        '{"decision": "continue"}',
        '{"decision": "complete", "result": {"answer": "eleven"}}',
    )
    adk.spawn_agent("AlwaysReviews", {"provider": model})
    planner = planning.AgentPlanner("AlwaysReviews", review="always")
    result = adk.run_planning(planner, ActionExecutor(), "add", {"authorization": "leak-me"})
    assert result["status"] == "completed"
    assert result["result"] == {"answer": "eleven"}
    assert result["steps_executed"] == 2
    assert len(model.histories) == 3
    prompts = [history[-1].text_value() for history in model.histories]
    assert all("leak-me" not in prompt for prompt in prompts)
    assert '"observation"' in prompts[1] and '"total": 1' in prompts[1]


def test_agent_planner_fail_complete_and_unknown_decisions():
    """The agent may give up (``planner_failed`` with its reason), complete without a
    step, or answer something that is no decision (``invalid_planner_answer``)."""
    adk.spawn_agent(
        "GivesUp",
        {
            "provider": _agent_answers(
                '{"steps": [{"id": "x", "description": "explode", "action": {"kind": "explode"}}]}',
                '{"decision": "fail", "reason": "no such action"}',
            )
        },
    )
    gives_up = adk.run_planning(planning.AgentPlanner("GivesUp"), ActionExecutor(), "goal")
    assert gives_up["error"] == {"kind": "planner_failed", "reason": "no such action"}
    adk.spawn_agent("Knows", {"provider": _agent_answers('{"complete": 42}')})
    knows = adk.run_planning(planning.AgentPlanner("Knows"), ActionExecutor(), "goal")
    assert (knows["status"], knows["result"], knows["steps_executed"]) == ("completed", 42, 0)
    adk.spawn_agent(
        "Rambles",
        {
            "provider": _agent_answers(
                '{"steps": [{"id": "x", "description": "explode", "action": {"kind": "explode"}}]}',
                '{"decision": "maybe"}',
            )
        },
    )
    rambles = adk.run_planning(planning.AgentPlanner("Rambles"), ActionExecutor(), "goal")
    assert rambles["error"]["kind"] == "planner_callback_failed"
    assert rambles["error"]["reason"] == "invalid_planner_answer"


def test_agent_planner_cannot_rewrite_the_plan_identity():
    """The runtime, not the model, sets a plan's id, revision and goal: an agent that
    answers them has them overwritten, and its replan keeps the same identity."""
    model = _agent_answers(
        '{"id": "evil", "revision": 9, "goal": "other", "steps": [{"id": "a",'
        ' "description": "unknown", "action": {"kind": "explode"}}]}',
        '{"decision": "replan", "id": "evil", "steps": [{"id": "b", "description": "add",'
        ' "action": {"kind": "add", "amount": 4}}]}',
    )
    adk.spawn_agent("Rewrites", {"provider": model})
    result = adk.run_planning(
        planning.AgentPlanner("Rewrites", plan_id="mine"), ActionExecutor(), {"task": "t"}
    )
    assert result["status"] == "completed" and result["result"] == {"total": 4}
    assert [(p["id"], p["revision"], p["goal"]) for p in result.plans] == [
        ("mine", 0, {"task": "t"}),
        ("mine", 1, {"task": "t"}),
    ]


def test_the_facade_exports_planning():
    """`adk.run_planning` is `adk.planning.run_planning`."""
    assert adk.run_planning is planning.run_planning
    assert "run_planning" in adk.__all__ and "planning" in adk.__all__


# -- retention, start failures, the handoff ---------------------------------------------------


def _ended(ref: planning.PlanningRef) -> bool:
    """True once the run's server holds its one terminal result (it may stay retained)."""
    return sv.get_state(ref.server).result is not None


def test_unawaited_runs_stop_after_their_retention():
    """A run nobody awaits (finished or cancelled) does not outlive its retention, even
    when its owner is the main thread, which never exits."""
    assert threading.current_thread() is threading.main_thread()
    before = sv.DynamicSupervisor.count_children("adk.workflows")["active"]
    started: queue.Queue[sv.Pid] = queue.Queue()
    refs = []
    for n in range(20):
        if n % 2:  # running until cancelled
            ref = planning.start(
                ReadmePlanner(), readme_executor(started, delay=30.0), f"g{n}", retention=0.2
            )
            started.get(timeout=5)
            planning.cancel(ref)
        else:  # finishes on its own
            ref = planning.start(ReadmePlanner(), readme_executor(), f"g{n}", retention=0.2)
        refs.append(ref)
    wait_until(lambda: not any(ref.server.is_alive() for ref in refs), timeout=10)
    wait_until(lambda: sv.DynamicSupervisor.count_children("adk.workflows")["active"] == before)
    for ref in refs[:2]:
        assert reason(lambda ref=ref: planning.wait(ref, 1.0)) == "invalid_planning_ref"


def test_a_run_awaited_within_its_retention_answers_once():
    """Ended but not yet awaited, a run keeps its result for `retention` seconds; the
    first `wait` gets it and stops the run."""
    ref = planning.start(ReadmePlanner({"done": 1}), readme_executor(), "kept", retention=30.0)
    wait_until(lambda: _ended(ref))
    assert ref.server.is_alive()  # retained, not stopped
    result = planning.wait(ref, 5.0)
    assert result["status"] == "completed" and result["result"] == {"done": 1}
    wait_dead(ref.server)
    assert reason(lambda: planning.wait(ref, 1.0)) == "invalid_planning_ref"
    cancelled = planning.start(ReadmePlanner(), readme_executor(delay=30.0), "kept", retention=30.0)
    planning.cancel(cancelled)
    assert cancelled.server.is_alive()
    assert planning.wait(cancelled, 5.0)["status"] == "cancelled"
    wait_dead(cancelled.server)


def test_retention_zero_stops_an_unawaited_run_at_its_end():
    """``retention=0``: the run stops as it ends unless a waiter has it; `run_planning`
    still gets its result (it raises a shorter retention for its own wait)."""
    started: queue.Queue[sv.Pid] = queue.Queue()
    ref = planning.start(ReadmePlanner(), readme_executor(started, delay=30.0), "g", retention=0)
    started.get(timeout=5)
    planning.cancel(ref)
    wait_dead(ref.server)
    done = planning.start(ReadmePlanner(), readme_executor(), "g", retention=0)
    wait_dead(done.server)
    assert reason(lambda: planning.wait(done, 1.0)) == "invalid_planning_ref"
    for _ in range(20):
        result = adk.run_planning(ReadmePlanner({"ok": 1}), readme_executor(), "g", retention=0)
        assert result["result"] == {"ok": 1}


def test_retention_is_a_checked_option():
    for bad in (-1, 86_401, "60", None):
        assert reason(
            lambda bad=bad: planning.start(ReadmePlanner(), readme_executor(), "g", retention=bad)
        ) == ("invalid_planning_options", "retention")
        assert reason(
            lambda bad=bad: adk.run_planning(ReadmePlanner(), readme_executor(), "g", retention=bad)
        ) == ("invalid_planning_options", "retention")


def test_a_start_failure_reason_is_structural(monkeypatch):
    """A server whose start crashes gives its exception class, never its text; a spent
    handoff gives its tag; nothing is left in the handoff table."""
    from adk_actors.planning import launch

    def crash(ref: str) -> Any:
        raise RuntimeError("boom with token=sk-abcdefabcdefabcdef123456 and user text")

    with monkeypatch.context() as patch:
        patch.setattr(launch.handoffs, "take", crash)
        error = reason(lambda: planning.start(ReadmePlanner(), readme_executor(), "g"))
    assert error == ("planning_start_failed", ("crash", "RuntimeError"))
    assert "boom" not in repr(error) and "sk-" not in repr(error)

    take = launch.handoffs.take

    def spent(ref: str) -> Any:
        take(ref)
        return take(ref)  # a second take: this area says handoff_taken

    with monkeypatch.context() as patch:
        patch.setattr(launch.handoffs, "take", spent)
        error = reason(lambda: planning.start(ReadmePlanner(), readme_executor(), "g"))
    assert error == ("planning_start_failed", "handoff_taken")
    assert launch.handoffs.pending() == 0


def test_start_failure_reasons_keep_only_structure():
    from adk_actors.planning.result import start_failure_reason

    assert start_failure_reason(("shutdown", "handoff_taken")) == "handoff_taken"
    assert start_failure_reason(sv.Crash("ValueError", "secret text")) == ("crash", "ValueError")
    assert start_failure_reason(("shutdown", sv.Crash("Bad Name!", "x"))) == ("crash", "exception")
    assert start_failure_reason(("invalid_child_spec", "start")) == "invalid_child_spec"
    assert start_failure_reason("Some text with a password=hunter2") == "failed"
    assert start_failure_reason({"reason": "x"}) == "failed"
    assert start_failure_reason(("x" * 65, 1)) == "failed"


def test_a_full_handoff_table_is_busy(monkeypatch):
    """The kernel's bound keeps this area's ``busy`` reason, and nothing starts."""
    from adk_actors.planning import launch

    small: sv.OneShotHandoffs[Any] = sv.OneShotHandoffs(1, prefix="planning")
    small.put("occupied")
    monkeypatch.setattr(launch, "handoffs", small)
    monkeypatch.setattr(planning.api, "handoffs", small)
    before = sv.DynamicSupervisor.count_children("adk.workflows")["active"]
    assert reason(lambda: planning.start(ReadmePlanner(), readme_executor(), "g")) == "busy"
    assert sv.DynamicSupervisor.count_children("adk.workflows")["active"] == before
