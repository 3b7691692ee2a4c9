"""Sub-agents, AgentTool, tree validation, delegation ancestry, orchestration helpers."""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from tests.helpers import wait_until


def echo(prefix):
    return lambda history, tools: {"text": f"{prefix}:{history[-1].text_value()}"}


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_sub_agent_is_declared_and_resolved_by_name_at_call_time():
    adk.spawn_agent("SearchSpecialist", {"provider": adk.ScriptedProvider(fn=echo("search"))})
    coordinator_model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "SearchSpecialist", "args": {"prompt": "supervision trees"}}]},
            {"text": "summary"},
            {"tool_calls": [{"name": "SearchSpecialist", "args": {"prompt": "again"}}]},
            {"text": "summary 2"},
        ],
        record_histories=10,
    )
    coordinator = adk.spawn_agent(
        "Coordinator",
        {
            "provider": coordinator_model,
            "sub_agents": {"SearchSpecialist": {"description": "Researches OTP topics"}},
        },
    )
    assert adk.prompt(coordinator, "Research supervision trees.") == "summary"
    declared = coordinator_model.histories[0]
    assert declared  # the model was called
    tool_result = coordinator_model.histories[1][-1].parts[0]
    assert tool_result.name == "SearchSpecialist" and tool_result.response == {
        "result": "search:supervision trees"
    }
    # the sub-agent restarts under its name; the coordinator finds the new process
    old = adk.AgentRef("SearchSpecialist").pid
    sv.exit(old, "kill")
    wait_until(lambda: adk.AgentRef("SearchSpecialist").pid not in (None, old))
    assert adk.prompt(coordinator, "Again.") == "summary 2"
    assert coordinator_model.histories[3][-1].parts[0].response == {"result": "search:again"}


def test_sub_agents_are_function_declarations_with_their_description():
    seen = {}

    def capture(history, tools):
        seen["tools"] = tools
        return {"text": "ok"}

    adk.spawn_agent("Helper", {"provider": adk.ScriptedProvider(fn=echo("h"))})
    agent = adk.spawn_agent(
        "Boss",
        {
            "provider": adk.ScriptedProvider(fn=capture),
            "sub_agents": {"Helper": {"description": "Helps."}},
        },
    )
    adk.prompt(agent, "hi")
    (declaration,) = seen["tools"]
    assert declaration["name"] == "Helper" and declaration["description"] == "Helps."
    assert declaration["parameters"]["required"] == ["prompt"]


def test_tree_validation():
    adk.spawn_agent("Leaf", {"provider": adk.ScriptedProvider(fn=echo("leaf"))})
    assert reason(
        lambda: adk.spawn_agent(
            "Root", {"provider": "scripted", "script": ["x"], "sub_agents": {"Root": {}}}
        )
    ) == ("self_reference")
    assert reason(
        lambda: adk.spawn_agent(
            "Root", {"provider": "scripted", "script": ["x"], "sub_agents": {"Missing": {}}}
        )
    ) == (
        "sub_agent_not_found",
        "Missing",
    )
    assert reason(
        lambda: adk.spawn_agent(
            "Root", {"provider": "scripted", "script": ["x"], "sub_agents": {"user": {}}}
        )
    ) == ("reserved_user")

    @adk.tool(name="Leaf")
    def clash(request: str) -> str:
        return request

    error = reason(
        lambda: adk.spawn_agent(
            "Root",
            {"provider": "scripted", "script": ["x"], "sub_agents": {"Leaf": {}}},
            tools=[clash],
        )
    )
    assert (
        error[0] == "duplicate_tool_name" and error[1] == "Leaf" and "sub-agent Leaf" in error[2:]
    )
    adk.spawn_agent("Mid", {"provider": "scripted", "script": ["x"], "sub_agents": {"Leaf": {}}})
    assert reason(
        lambda: adk.spawn_agent(
            "Top", {"provider": "scripted", "script": ["x"], "sub_agents": {"Mid": {}, "Leaf": {}}}
        )
    ) == ("duplicate_name")


def test_a_delegation_cycle_is_refused_before_the_target_runs_and_the_parent_model_sees_it():
    # A and B each offer the other as a tool: A -> B -> A must stop at B's call
    b_model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "AgentA", "args": {"prompt": "back to A"}}]},
            {"text": "B gave up"},
        ],
        record_histories=10,
    )
    a_model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "AgentB", "args": {"prompt": "ask B"}}]}, {"text": "A done"}]
    )
    adk.spawn_agent("AgentB", {"provider": b_model}, tools=[adk.AgentTool("AgentA")])
    agent_a = adk.spawn_agent("AgentA", {"provider": a_model}, tools=[adk.AgentTool("AgentB")])
    assert adk.prompt(agent_a, "start") == "A done"
    refusal = b_model.histories[1][-1].parts[0].response
    assert refusal["success"] is False and refusal["error"]["reason"] == "delegation_cycle"
    assert a_model.calls == 2  # A's provider never ran for the refused nested call


def test_agent_tool_direct():
    adk.spawn_agent("Specialist", {"provider": adk.ScriptedProvider(fn=echo("spec"))})
    tool = adk.AgentTool("Specialist", "Researches things")
    assert tool.schema()["description"] == "Researches things"
    assert tool.execute({"prompt": "rest_for_one"}, adk.ToolContext()) == {
        "result": "spec:rest_for_one"
    }


def test_sequential_feeds_each_answer_to_the_next():
    translator = adk.spawn_agent("Translator", {"provider": adk.ScriptedProvider(fn=echo("fr"))})
    summarizer = adk.spawn_agent("Summarizer", {"provider": adk.ScriptedProvider(fn=echo("sum"))})
    assert adk.sequential([translator, summarizer], "hello") == "sum:fr:hello"


def test_parallel_keeps_order_bounds_time_and_reports_per_item_errors():
    fast = adk.spawn_agent("Fast", {"provider": adk.ScriptedProvider(fn=echo("fast"))})
    slow = adk.spawn_agent(
        "SlowOne",
        {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "late", "delay": 2.0})},
    )
    broken = adk.spawn_agent(
        "Broken", {"provider": adk.ScriptedProvider([{"error": "unavailable"}])}
    )
    started = time.monotonic()
    results = adk.parallel([slow, fast, broken], "go", timeout=0.5)
    assert time.monotonic() - started < 1.5
    assert [ref for ref, _ in results] == [slow, fast, broken]
    assert isinstance(results[0][1], adk.AdkError) and results[0][1].reason == "timeout"
    assert results[1][1] == "fast:go"
    assert isinstance(results[2][1], adk.AdkError) and results[2][1].reason == "unavailable"


def test_parallel_runs_independent_agents_concurrently():
    agents = [
        adk.spawn_agent(
            f"P{n}",
            {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "ok", "delay": 0.3})},
        )
        for n in range(4)
    ]
    started = time.monotonic()
    assert [value for _, value in adk.parallel(agents, "x", timeout=5)] == ["ok"] * 4
    assert time.monotonic() - started < 1.0


def test_loop_stops_on_exact_approval_or_returns_the_latest_draft():
    drafts = iter(["draft 1", "draft 2", "draft 3"])
    writer = adk.spawn_agent(
        "Writer", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": next(drafts)})}
    )
    reviews = iter(["needs work", "  approved \n"])
    reviewer = adk.spawn_agent(
        "Reviewer", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": next(reviews)})}
    )
    assert adk.loop(writer, reviewer, "write", max_iterations=3) == "draft 2"

    counter = iter(range(100))
    writer2 = adk.spawn_agent(
        "Writer2", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": f"v{next(counter)}"})}
    )
    picky = adk.spawn_agent(
        "Picky", {"provider": adk.ScriptedProvider(fn=lambda h, t: {"text": "APPROVED, almost"})}
    )
    assert adk.loop(writer2, picky, "write", max_iterations=2) == "v1"  # not exact: bound reached
    assert (
        reason(lambda: adk.loop(writer2, picky, "x", max_iterations=0)) == "invalid_max_iterations"
    )


def test_prompt_and_delegate_share_one_fifo():
    log = []
    gate = threading.Event()

    def model(history, tools):
        text = history[-1].text_value()
        log.append(text)
        if text == "first":
            gate.wait(5)
        return {"text": text}

    agent = adk.spawn_agent("Shared", {"provider": adk.ScriptedProvider(fn=model)})
    thread = threading.Thread(target=adk.prompt, args=(agent, "first"))
    thread.start()
    wait_until(lambda: log == ["first"])
    adk.delegate(agent, "second")
    time.sleep(0.05)
    assert log == ["first"]  # queued behind the prompt
    gate.set()
    thread.join()
    wait_until(lambda: log == ["first", "second"])


def test_tree_depth_and_size_limits():
    adk.spawn_agent("Chain0", {"provider": adk.ScriptedProvider(["x"])})
    for depth in range(1, 65):  # Chain64's tree is exactly 64 deep: allowed
        adk.spawn_agent(
            f"Chain{depth}",
            {"provider": adk.ScriptedProvider(["x"]), "sub_agents": {f"Chain{depth - 1}": {}}},
        )
    assert reason(
        lambda: adk.spawn_agent(
            "Chain65", {"provider": "scripted", "script": ["x"], "sub_agents": {"Chain64": {}}}
        )
    ) == (
        "tree_limit_exceeded",
        "max_depth",
    )
    for n in range(256):
        adk.spawn_agent(f"Wide{n}", {"provider": adk.ScriptedProvider(["x"])})
    wide = {f"Wide{n}": {} for n in range(256)}
    assert reason(
        lambda: adk.spawn_agent(
            "WideRoot", {"provider": "scripted", "script": ["x"], "sub_agents": wide}
        )
    ) == (
        "tree_limit_exceeded",
        "max_nodes",
    )


def test_delegation_depth_is_refused_before_the_target_runs():
    target = adk.ScriptedProvider(["never"])
    adk.spawn_agent("Deep", {"provider": target})
    tool = adk.AgentTool("Deep")
    ancestry = tuple(f"A{n}" for n in range(64))
    assert (
        reason(lambda: tool.execute({"prompt": "x"}, adk.ToolContext(ancestry=ancestry)))
        == "delegation_depth_exceeded"
    )
    assert target.calls == 0
