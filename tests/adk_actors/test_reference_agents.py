"""Agents, tools and callbacks against the reference's own tests (Erlang ADK 0.7.0).

Each test names the reference test (hsalap7/erlang_adk, ``test/`` at 0.7.0) or the
spec section (``/work/shared/seeds``) it follows.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

import adk_actors as adk
from adk_actors.outcomes import Paused
from providers.fake_gemini import FakeGemini


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def responses_seen(model, call_index):
    """The function responses in the last content of model call `call_index`."""
    return [part.response for part in model.histories[call_index][-1].parts]


def recorder(hooks, log):
    """Callbacks for `hooks` that log ``(hook, tool or value)`` and continue."""

    def make(hook):
        def callback(ctx, value):
            name = getattr(value, "name", None)
            log.append((hook, name) if name is not None else hook)

        return callback

    return {hook: make(hook) for hook in hooks}


TOOL_HOOKS = ("on_tool_start", "before_tool", "after_tool", "on_tool_end")


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def tool_events(sessions, session="s"):
    """The call ids of each stored tool event, in order."""
    events = sessions.get_session("app", "u", session).events
    return [
        [part.id for part in event.content.parts]
        for event in events
        if event.content is not None and event.content.role == "tool"
    ]


# -- 1. AgentTool and sub-agents take a required `prompt` ------------------------------


def test_agent_tool_declares_a_required_prompt_string():
    """Follows erlang_adk test/integrations/legacy/adk_phase3_test.erl: agent_tool_test
    (and the spec, "Sub-agents and agent-as-tool": execute(Pid, #{"prompt" => ...}))."""
    adk.spawn_agent("Specialist", {"provider": adk.ScriptedProvider(["rest_for_one restarts"])})
    tool = adk.AgentTool("Specialist", "Researches OTP topics")
    parameters = tool.schema()["parameters"]
    assert parameters["required"] == ["prompt"]
    assert parameters["properties"]["prompt"]["type"] == "string"
    assert "request" not in parameters["properties"]
    missing = reason(lambda: tool.execute({}, adk.ToolContext()))
    assert missing[0] == "invalid_tool_arguments" and missing[1]["path"] == ["prompt"]
    assert missing[1]["kind"] == "required_property"
    assert tool.execute({"prompt": "Explain rest_for_one."}, adk.ToolContext()) == {
        "result": "rest_for_one restarts"
    }


def test_a_sub_agent_call_without_prompt_is_a_structural_tool_error():
    """Follows erlang_adk test/agents/adk_sub_agents_test.erl: test_sub_agent_delegation
    (sub-agents are function declarations taking ``prompt``; behaviours §2: arguments are
    validated before anything runs)."""
    worker = adk.ScriptedProvider(["never"])
    adk.spawn_agent("SubWorker", {"provider": worker})
    master_model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "SubWorker", "args": {"request": "old name"}}]},
            {"tool_calls": [{"name": "SubWorker", "args": {}}]},
            "gave up",
        ],
        record_histories=10,
    )
    master = adk.spawn_agent(
        "MasterAgent",
        {"provider": master_model, "sub_agents": {"SubWorker": {"description": "Works."}}},
    )
    assert adk.prompt(master, "delegate this") == "gave up"
    (extra,) = responses_seen(master_model, 1)
    (missing,) = responses_seen(master_model, 2)
    assert extra["error"]["type"] == "invalid_tool_arguments"
    assert missing["success"] is False and missing["error"]["validation"] == {
        "kind": "required_property",
        "path": ["prompt"],
        "constraint": "required",
    }
    assert worker.calls == 0  # the sub-agent never ran


def test_agent_tool_invocations_have_fresh_history():
    """Follows erlang_adk test/agents/adk_sub_agents_test.erl:
    test_agent_tool_invocations_have_fresh_history."""
    model = adk.ScriptedProvider(
        fn=lambda history, tools: {"text": "specialist result"}, record_histories=10
    )
    adk.spawn_agent("AgentToolIsolation", {"provider": model})
    tool = adk.AgentTool("AgentToolIsolation")
    assert tool.execute({"prompt": "first invocation secret"}, adk.ToolContext()) == {
        "result": "specialist result"
    }
    assert tool.execute({"prompt": "second invocation"}, adk.ToolContext())["result"]
    second = [content.text_value() for content in model.histories[1]]
    assert "second invocation" in second and "first invocation secret" not in second


# -- 2. A required confirmation outside a Runner fails closed, model-visibly -----------


class Destructive(adk.Tool):
    """Needs approval when ``confirm`` is true; records every check and execution."""

    name = "direct_confirmation_probe"
    description = "A side effect."
    parameters = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "confirm": {"type": "boolean"}},
        "required": ["id", "confirm"],
        "additionalProperties": False,
    }

    def __init__(self):
        self.checked = []
        self.ran = []

    def require_confirmation(self, args, ctx):
        self.checked.append((args["id"], ctx.ancestry))
        return {"required": args["confirm"], "hint": "Approve the side effect"}

    def execute(self, args, ctx):
        self.ran.append(args["id"])
        return {"done": args["id"]}


def destructive_agent(name, confirm=True, callbacks=True):
    tool = Destructive()
    call = {"name": tool.name, "args": {"id": f"{name}-call", "confirm": confirm}, "id": "c1"}
    model = adk.ScriptedProvider([{"tool_calls": [call]}, "tool complete"], record_histories=10)
    log = []
    config = {"provider": model}
    if callbacks:
        config["callbacks"] = recorder(TOOL_HOOKS, log)
    return adk.spawn_agent(name, config, tools=[tool]), model, tool, log


REFUSAL = {
    "success": False,
    "error": {"kind": "tool_confirmation_requires_runner", "hint": "Approve the side effect"},
}


def test_required_confirmation_fails_closed_without_callbacks():
    """Follows erlang_adk test/tools/core/adk_direct_confirmation_test.erl:
    required_confirmation_fails_closed_without_callbacks."""
    agent, model, tool, log = destructive_agent("DirectConfirmedAgent")
    assert adk.prompt(agent, "perform side effect") == "tool complete"
    assert responses_seen(model, 1) == [REFUSAL]
    assert model.histories[1][-1].parts[0].id == "c1"
    assert tool.checked == [("DirectConfirmedAgent-call", ("DirectConfirmedAgent",))]
    assert tool.ran == [] and log == []  # never executed, no callback of any kind
    assert adk.agent_info(agent)["completed"] == 1  # alive and serving


def test_required_confirmation_fails_closed_for_fresh_invoke_and_delegate():
    """Follows erlang_adk test/tools/core/adk_direct_confirmation_test.erl:
    required_confirmation_fails_closed_for_fresh_invoke (and delegation, spec
    "Human approval")."""
    agent, model, tool, log = destructive_agent("FreshConfirmedAgent")
    scope = ("confirmation-app", "confirmation-user", "confirmation-session")
    assert adk.invoke(agent, "perform fresh side effect", scope=scope) == "tool complete"
    assert responses_seen(model, 1) == [REFUSAL]
    delegated, model2, tool2, log2 = destructive_agent("DelegatedConfirmedAgent")
    box = queue.Queue()
    adk.delegate(delegated, "perform it", reply_to=box)
    assert box.get(timeout=5).value == "tool complete"
    assert responses_seen(model2, 1) == [REFUSAL]
    assert tool.ran == tool2.ran == [] and log == log2 == []


def test_required_confirmation_fails_closed_through_agent_tool():
    """Follows erlang_adk test/tools/core/adk_direct_confirmation_test.erl:
    required_confirmation_fails_closed_through_agent_tool."""
    _child, child_model, tool, log = destructive_agent("ConfirmedChild")
    parent_model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "ConfirmedChild", "args": {"prompt": "do it"}}]},
            "delegation complete",
        ],
        record_histories=10,
    )
    parent = adk.spawn_agent(
        "ConfirmedParent", {"provider": parent_model, "sub_agents": {"ConfirmedChild": {}}}
    )
    assert adk.prompt(parent, "delegate the destructive action") == "delegation complete"
    assert tool.checked == [("ConfirmedChild-call", ("ConfirmedParent", "ConfirmedChild"))]
    assert tool.ran == [] and log == []
    assert responses_seen(child_model, 1) == [REFUSAL]
    assert responses_seen(parent_model, 1) == [{"result": "tool complete"}]


def test_resolved_module_cannot_weaken_confirmation():
    """Follows erlang_adk test/tools/core/adk_direct_confirmation_test.erl:
    resolved_module_cannot_weaken_confirmation (a toolset snapshot keeps the rule)."""
    tool = Destructive()

    class Backend(adk.Toolset):
        name = "aliases"

        def fetch(self):
            return [tool]

    call = {"name": tool.name, "args": {"id": "alias", "confirm": True}}
    model = adk.ScriptedProvider([{"tool_calls": [call]}, "tool complete"], record_histories=10)
    agent = adk.spawn_agent("ResolvedConfirmedAgent", {"provider": model}, tools=[Backend()])
    assert adk.prompt(agent, "perform alias side effect") == "tool complete"
    assert responses_seen(model, 1) == [REFUSAL] and tool.ran == []


def test_conditional_false_executes_directly():
    """Follows erlang_adk test/tools/core/adk_direct_confirmation_test.erl:
    conditional_false_executes_directly."""
    agent, model, tool, log = destructive_agent("DirectConditionalAgent", confirm=False)
    assert adk.prompt(agent, "read only") == "tool complete"
    assert responses_seen(model, 1) == [{"done": "DirectConditionalAgent-call"}]
    assert tool.ran == ["DirectConditionalAgent-call"]
    name = "direct_confirmation_probe"  # after_tool gets the payload, on_tool_end the response
    assert log == [
        ("on_tool_start", name),
        ("before_tool", name),
        "after_tool",
        ("on_tool_end", name),
    ]
    assert len(tool.checked) == 1  # the rule is asked once per call


def test_structural_tool_errors_name_their_reason_with_kind():
    """Follows erlang_adk src/agents/adk_agent.erl direct_confirmation_required and
    adk_runner.erl confirmation_error (``#{<<"kind">> => ...}``); invalid arguments keep
    the shape erlang_adk test/tools/core/adk_toolset_test.erl asserts (``type``)."""

    class Failing(Destructive):
        name = "failing_check"

        def require_confirmation(self, args, ctx):
            raise RuntimeError("boom with secret")

    @adk.tool
    def opaque() -> str:
        """Returns what JSON cannot hold."""
        return object()  # type: ignore[return-value]

    calls = [
        {"name": "no_such_tool", "args": {}},
        {"name": "failing_check", "args": {"id": "x", "confirm": True}},
        {"name": "opaque", "args": {}},
        {"name": "opaque", "args": {"extra": 1}},
    ]
    model = adk.ScriptedProvider([{"tool_calls": calls}, "fine"], record_histories=10)
    agent = adk.spawn_agent("Structural", {"provider": model}, tools=[Failing(), opaque])
    assert adk.prompt(agent, "go") == "fine"
    missing, failing, opaque_result, bad_args = responses_seen(model, 1)
    assert missing == {"success": False, "error": {"kind": "not_found", "name": "no_such_tool"}}
    assert failing["error"] == {
        "kind": "tool_confirmation_evaluation_failed",
        "operation": "failing_check",
    }
    assert opaque_result["error"]["kind"] == "invalid_tool_result"
    assert bad_args["error"]["type"] == "invalid_tool_arguments"
    assert "secret" not in str(responses_seen(model, 1))


# -- 3. Parallel tools: call order for callbacks and stored responses -------------------


def parallel_tool(name, delay, counts, confirm=False, ended=None):
    class Parallel(adk.Tool):
        parallel_safe = True
        parameters = {"type": "object", "properties": {}, "additionalProperties": False}
        require_confirmation = confirm

        def execute(self, args, ctx):
            time.sleep(delay)
            counts[name] = counts.get(name, 0) + 1
            if ended is not None:
                ended.append(name)
            return {"name": name}

    Parallel.name = name
    return Parallel()


def test_parallel_callbacks_are_exactly_once_and_ordered():
    """Follows erlang_adk test/runtime/runner/adk_runner_tools_test.erl:
    test_parallel_callbacks_are_exactly_once_and_ordered (and behaviours §2)."""
    counts, ended = {}, []
    delays = (("one", 0.3), ("two", 0.1), ("three", 0))
    tools = [parallel_tool(name, delay, counts, ended=ended) for name, delay in delays]
    log = []
    callbacks = recorder(("on_tool_start", "before_tool", "on_tool_end"), log)
    callbacks["after_tool"] = lambda ctx, payload: log.append(("after_tool", payload["name"]))
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": t.name, "args": {}} for t in tools]}, "batch complete"],
        record_histories=10,
    )
    agent = adk.spawn_agent(
        "ParallelCallbacks",
        {
            "provider": model,
            "callbacks": callbacks,
            "tool_execution": {"mode": "parallel", "max_concurrency": 3, "tool_timeout": 5},
        },
        tools=tools,
    )
    assert adk.prompt(agent, "go") == "batch complete"
    assert ended == ["three", "two", "one"]  # they overlapped and completed in reverse
    names = ["one", "two", "three"]
    assert log == [
        *[(hook, n) for n in names for hook in ("on_tool_start", "before_tool")],
        *[(hook, n) for n in names for hook in ("after_tool", "on_tool_end")],
    ]
    assert [r["name"] for r in responses_seen(model, 1)] == names


def test_parallel_runner_is_bounded_and_commits_in_order(sessions):
    """Follows erlang_adk test/runtime/runner/adk_runner_tools_test.erl:
    test_parallel_runner_is_bounded_and_commits_in_order."""
    counts = {}
    delays = (("one", 0.2), ("two", 0.02), ("three", 0.05), ("four", 0))
    tools = [parallel_tool(name, delay, counts) for name, delay in delays]
    calls = [{"name": t.name, "args": {}, "id": f"call-{t.name}"} for t in tools]
    model = adk.ScriptedProvider([{"tool_calls": calls}, "batch complete"])
    agent = adk.spawn_agent(
        "ParallelCommits",
        {"provider": model, "tool_execution": {"mode": "parallel", "max_concurrency": 2}},
        tools=tools,
    )
    assert adk.Runner(agent, "app", sessions).run("u", "s", "go") == "batch complete"
    assert tool_events(sessions) == [[call["id"] for call in calls]]


def test_confirmation_is_a_parallel_barrier_and_completed_siblings_are_stored_at_the_pause(
    sessions,
):
    """Follows erlang_adk test/tools/core/adk_tool_confirmation_test.erl:
    confirmation_is_parallel_barrier_case (responses committed in call order, the calls
    before the barrier never run again on resume)."""
    counts = {}
    tools = [
        parallel_tool("before_slow", 0.2, counts),
        parallel_tool("before_fast", 0, counts),
        parallel_tool("middle", 0, counts, confirm=True),
        parallel_tool("after", 0, counts),
    ]
    calls = [{"name": t.name, "args": {}, "id": f"call-{t.name}"} for t in tools]
    ids = [call["id"] for call in calls]
    model = adk.ScriptedProvider([{"tool_calls": calls}, "done"], record_histories=10)
    after_tool = []
    agent = adk.spawn_agent(
        "ParallelBarrier",
        {
            "provider": model,
            "tool_execution": {"mode": "parallel", "max_concurrency": 4},
            "callbacks": {"after_tool": lambda ctx, payload: after_tool.append(payload["name"])},
        },
        tools=tools,
    )
    runner = adk.Runner(agent, "app", sessions)
    paused = runner.run("u", "s", "go")
    assert isinstance(paused, Paused)
    assert counts == {"before_slow": 1, "before_fast": 1}  # "after" waits for the human
    assert tool_events(sessions) == [ids[:2]]  # stored at the pause, in call order
    events = sessions.get_session("app", "u", "s").events
    assert events[-1].actions.pause is not None  # the responses come before the pause
    assert runner.resume("u", "s", {"confirmed": True}) == "done"
    assert counts == {"before_slow": 1, "before_fast": 1, "middle": 1, "after": 1}
    assert after_tool == ["before_slow", "before_fast", "middle", "after"]  # once each
    assert tool_events(sessions) == [ids[:2], ids[2:]]
    assert [part.id for part in model.histories[1][-1].parts] == ids  # one tool turn


# -- 4. before_model's short-circuit still goes through after_model ---------------------


def test_before_model_short_circuit_still_runs_after_model():
    """Follows the spec, "Callbacks and telemetry" (before-hooks skip the operation,
    after-hooks may replace its value) as erlang_adk src/agents/adk_agent.erl
    generate_with_callbacks does: a before_model replacement reaches after_model."""
    seen = []
    model = adk.ScriptedProvider(["from the provider"])

    def after_model(ctx, output):
        seen.append(output)
        return {"replace": output.upper()}

    agent = adk.spawn_agent(
        "ShortCircuit",
        {
            "provider": model,
            "callbacks": {
                "before_model": lambda ctx, contents: {"replace": "cached answer"},
                "after_model": after_model,
            },
        },
    )
    assert adk.prompt(agent, "hi") == "CACHED ANSWER"
    assert seen == ["cached answer"] and model.calls == 0


# -- 5. invoke refuses a too-deep or cyclic ancestry before the provider runs -----------


def test_runtime_delegation_depth_is_bounded():
    """Follows erlang_adk test/agents/adk_sub_agents_test.erl:
    test_runtime_delegation_depth_is_bounded."""
    model = adk.ScriptedProvider(["must not run"])
    agent = adk.spawn_agent("RuntimeDepthAgent", {"provider": model})
    path = tuple(f"Ancestor{n}" for n in range(1, 65))
    assert reason(lambda: adk.invoke(agent, "too deep", ancestry=path)) == (
        "delegation_depth_exceeded"
    )
    assert adk.invoke(agent, "fine", ancestry=path[:63]) == "must not run"  # 63 is allowed
    assert model.calls == 1


def test_runtime_delegation_cycle_fails_before_provider():
    """Follows erlang_adk test/agents/adk_sub_agents_test.erl:
    test_runtime_delegation_cycle_fails_before_provider."""
    child_model = adk.ScriptedProvider(["must not run"])
    adk.spawn_agent("RuntimeCycleChild", {"provider": child_model})
    parent_model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "RuntimeCycleChild", "args": {"prompt": "again"}}]},
            "delegation complete",
        ],
        record_histories=10,
    )
    parent = adk.spawn_agent(
        "RuntimeCycleParent",
        {"provider": parent_model, "sub_agents": {"RuntimeCycleChild": {}}},
    )
    # this invocation has already crossed the child: its call back into it is refused
    assert adk.invoke(parent, "delegate", ancestry=("RuntimeCycleChild",)) == (
        "delegation complete"
    )
    (refusal,) = responses_seen(parent_model, 1)
    assert refusal["success"] is False and refusal["error"]["reason"] == "delegation_cycle"
    child = adk.AgentRef("RuntimeCycleChild")
    assert reason(lambda: adk.invoke(child, "x", ancestry=("RuntimeCycleChild",))) == (
        "delegation_cycle"
    )
    assert reason(lambda: adk.invoke(child, "x", ancestry=("A", "A"))) == (
        "invalid_delegation_path"
    )
    assert child_model.calls == 0


# -- 6. A JSON value where text is expected becomes canonical JSON text -----------------


class DictProvider:
    """A custom provider whose model answers with a JSON object."""

    name = "dict_provider"

    def generate(self, config, history, tools):
        return {"status": "ok", "items": [2, 1], "nested": {"b": True, "a": None}}

    def stream(self, config, history, tools, on_delta):
        return self.generate(config, history, tools)


CANONICAL = '{"items":[2,1],"nested":{"a":null,"b":true},"status":"ok"}'


def test_non_text_callback_result_is_not_dropped(sessions):
    """Follows erlang_adk test/runtime/runner/adk_runner_test.erl:
    test_non_text_callback_result_is_not_dropped (formatted, stored as the final event)."""
    model = adk.ScriptedProvider(["never"])
    agent = adk.spawn_agent(
        "RunnerMapCallbackAgent",
        {
            "provider": model,
            "callbacks": {"before_agent": lambda ctx, message: {"replace": {"status": "ok"}}},
        },
    )
    assert adk.Runner(agent, "app", sessions).run("u", "s", "map response") == '{"status":"ok"}'
    finals = [e for e in sessions.get_session("app", "u", "s").events if e.is_final]
    assert [e.text() for e in finals] == ['{"status":"ok"}'] and model.calls == 0


def test_a_provider_or_after_model_json_object_is_formatted_as_text():
    """Follows behaviours §3 ("A non-text callback result becomes a formatted text final
    output") for a provider's and an after_model's JSON object."""
    agent = adk.spawn_agent("DictModel", {"provider": DictProvider()})
    assert adk.prompt(agent, "hi") == CANONICAL
    replaced = adk.spawn_agent(
        "DictAfterModel",
        {
            "provider": adk.ScriptedProvider(["text"]),
            "callbacks": {"after_model": lambda ctx, output: {"replace": {"z": 1, "a": [1.5]}}},
        },
    )
    assert adk.prompt(replaced, "hi") == '{"a":[1.5],"z":1}'


# -- 7. tool_execution options --------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        "parallel",
        {"mode": "parallel", "max_concurrency": 0},
        {"mode": "parallel", "tool_timeout": "invalid"},
        {"mode": "parallel", "tool_timeout": -1},
        {"mode": "sideways"},
        {"mode": "parallel", "retries": 2},
    ],
)
def test_tool_execution_options_are_validated(options):
    """Follows erlang_adk test/runtime/runner/adk_runner_tools_test.erl:
    test_tool_execution_options_are_validated (``{invalid_tool_execution, Value}``)."""
    config = {"provider": "scripted", "script": ["x"], "tool_execution": options}
    assert reason(lambda: adk.spawn_agent("BadExecution", config)) == (
        "invalid_tool_execution",
        options,
    )


# -- 8. before_agent / after_agent and the tool observers ------------------------------


def test_before_and_after_callbacks_fire_with_tool_observers():
    """Follows erlang_adk test/callbacks/adk_callback_lifecycle_test.erl:
    test_before_and_after_model_fired."""

    @adk.tool
    def dummy_tool() -> str:
        """Runs."""
        return "Tool executed"

    log = []
    hooks = ("before_agent", "after_agent", "before_model", "after_model", *TOOL_HOOKS)
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "dummy_tool", "args": {}}]}, "Tool executed"]
    )
    agent = adk.spawn_agent(
        "CallbackAgent", {"provider": model, "callbacks": recorder(hooks, log)}, tools=[dummy_tool]
    )
    assert adk.prompt(agent, "Trigger tool") == "Tool executed"
    plain = [entry if isinstance(entry, str) else entry[0] for entry in log]
    assert {hook: plain.count(hook) for hook in hooks} == {
        "before_agent": 1,
        "after_agent": 1,
        "before_model": 2,
        "after_model": 2,
        "on_tool_start": 1,
        "before_tool": 1,
        "after_tool": 1,
        "on_tool_end": 1,
    }
    assert plain[0] == "before_agent" and plain[-1] == "after_agent"
    assert plain.index("on_tool_start") < plain.index("before_tool")
    assert plain.index("after_tool") < plain.index("on_tool_end")


def test_callback_result_is_persisted_in_history(sessions):
    """Follows erlang_adk test/agents/adk_agent_behavior_test.erl:
    callback_result_is_persisted_in_history (after_agent's replacement is the answer,
    in the conversation and as the Runner's final event)."""
    model = adk.ScriptedProvider(
        fn=lambda history, tools: {"text": "original response"}, record_histories=10
    )
    seen = []

    def after_agent(ctx, output):
        seen.append((ctx["agent_name"], output))
        return {"replace": "replacement response"}

    agent = adk.spawn_agent(
        "CallbackHistoryReplaceAgent",
        {"provider": model, "callbacks": {"after_agent": after_agent}},
    )
    assert adk.prompt(agent, "first turn") == "replacement response"
    assert adk.prompt(agent, "second turn") == "replacement response"
    earlier = [c.text_value() for c in model.histories[1] if c.role == "model"]
    assert earlier == ["replacement response"]
    assert seen[0] == ("CallbackHistoryReplaceAgent", "original response")
    assert adk.Runner(agent, "app", sessions).run("u", "s", "hi") == "replacement response"
    finals = [e for e in sessions.get_session("app", "u", "s").events if e.is_final]
    assert [e.text() for e in finals] == ["replacement response"]


def test_callback_short_circuit_is_persisted_in_history():
    """Follows erlang_adk test/agents/adk_agent_behavior_test.erl:
    callback_short_circuit_is_persisted_in_history (before_agent replaces the turn)."""
    model = adk.ScriptedProvider(
        fn=lambda history, tools: {"text": "provider response"}, record_histories=10
    )

    def before_agent(ctx, message):
        if message.text_value() == "skip model":
            return {"replace": "short-circuited response"}
        if message.text_value() == "stop":
            return {"halt": "policy"}
        return None

    agent = adk.spawn_agent(
        "CallbackHistoryHaltAgent",
        {"provider": model, "callbacks": {"before_agent": before_agent}},
    )
    assert adk.prompt(agent, "skip model") == "short-circuited response"
    assert model.calls == 0
    assert reason(lambda: adk.prompt(agent, "stop")) == (
        "callback_halted",
        "before_agent",
        "policy",
    )
    assert model.calls == 0
    assert adk.prompt(agent, "continue") == "provider response"
    earlier = [c.text_value() for c in model.histories[0] if c.role == "model"]
    assert earlier == ["short-circuited response"]


def test_sub_agent_uses_tool_callback_lifecycle():
    """Follows erlang_adk test/agents/adk_sub_agents_test.erl:
    test_sub_agent_uses_tool_callback_lifecycle."""
    adk.spawn_agent("CallbackSubWorker", {"provider": adk.ScriptedProvider(["specialist"])})
    log = []
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "CallbackSubWorker", "args": {"prompt": "go"}}]},
            "delegation complete",
        ]
    )
    master = adk.spawn_agent(
        "CallbackSubMaster",
        {
            "provider": model,
            "callbacks": recorder(TOOL_HOOKS, log),
            "sub_agents": {"CallbackSubWorker": {}},
        },
    )
    assert adk.prompt(master, "delegate") == "delegation complete"
    plain = [entry if isinstance(entry, str) else entry[0] for entry in log]
    assert plain == list(TOOL_HOOKS)
    assert log[0] == ("on_tool_start", "CallbackSubWorker")
    assert log[-1] == ("on_tool_end", "CallbackSubWorker")


def test_tool_observers_cannot_change_anything_and_a_raising_one_is_ignored():
    """Follows erlang_adk src/callbacks/adk_callbacks.erl (on_tool_start/on_tool_end are
    ``execute``d: notified, results ignored) and the spec, "Callbacks and telemetry"
    (callback exceptions do not crash the agent)."""
    ran = []

    @adk.tool
    def lookup(key: str) -> dict:
        """Look up a key."""
        ran.append(key)
        return {"value": key.upper()}

    def start(ctx, call):
        return {"replace": {"value": "NOT USED"}}

    def end(ctx, response):
        raise RuntimeError("observer bug with api_key=AIzaSECRET")

    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "lookup", "args": {"key": "k"}}]}, "fine"], record_histories=10
    )
    agent = adk.spawn_agent(
        "Observed",
        {"provider": model, "callbacks": {"on_tool_start": start, "on_tool_end": end}},
        tools=[lookup],
    )
    assert adk.prompt(agent, "go") == "fine"
    assert ran == ["k"] and responses_seen(model, 1) == [{"value": "K"}]


def test_tool_observers_run_off_the_reactor():
    """Follows erlang_adk src/callbacks/adk_callbacks.erl invoke_isolated (a callback
    runs isolated from the agent): here, on a pool thread, never the turn's loop."""
    threads = []
    model = adk.ScriptedProvider([{"tool_calls": [{"name": "noop", "args": {}}]}, "done"])

    @adk.tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    def observe(ctx, value):
        threads.append(threading.current_thread().name)

    agent = adk.spawn_agent(
        "ObservedThreads",
        {"provider": model, "callbacks": {"on_tool_start": observe, "on_tool_end": observe}},
        tools=[noop],
    )
    assert adk.prompt(agent, "go") == "done"
    assert len(threads) == 2 and not any("reactor" in name for name in threads)


# -- 9. @adk.tool needs type hints ------------------------------------------------------


def test_a_tool_parameter_without_a_type_hint_is_refused_at_decoration():
    """Follows behaviours §2 (a tool's schema is checked when the tool is made, naming
    the tool) and the spec, "Tools" (schemas, never guessed)."""
    with pytest.raises(adk.AdkError) as info:

        @adk.tool
        def get_weather(city, days: int = 1) -> dict:
            """Weather."""
            return {}

    assert info.value.reason == ("missing_type_hint", "get_weather", "city")
    assert "city: str" in str(info.value)

    @adk.tool
    def with_context(city: str, ctx=None) -> str:  # the hidden context needs no hint
        """Weather."""
        return city

    assert list(with_context.schema()["parameters"]["properties"]) == ["city"]


# -- 10. A Gemini agent without an API key fails at spawn ------------------------------


def test_a_gemini_agent_without_an_api_key_fails_at_spawn(monkeypatch):
    """Follows the spec, "Quick start" ("A missing key returns {error, missing_api_key}")
    and behaviours §1 (the key appears in no status): refused at spawn, not first call."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    config = {"provider": "gemini", "model": "gemini-3.1-flash-lite"}
    assert reason(lambda: adk.spawn_agent("Keyless", config)) == "missing_api_key"
    assert adk.AgentRef("Keyless").pid is None
    assert reason(lambda: adk.spawn_agent("Typo", {**config, "temprature": 1})) == (
        "unknown_config_keys",
        ("temprature",),
    )  # strict keys are still checked first
    with FakeGemini() as fake:
        fake.reply_text("from the fake")
        explicit = adk.spawn_agent(
            "Keyed", {**config, "api_key": "test-key", "base_url": fake.base_url}
        )
        assert adk.prompt(explicit, "hi") == "from the fake"
        assert fake.requests[0].headers["x-goog-api-key"] == "test-key"
        monkeypatch.setenv("GEMINI_API_KEY", "env-key")
        fake.reply_text("again")
        from_env = adk.spawn_agent("EnvKeyed", {**config, "base_url": fake.base_url})
        assert adk.prompt(from_env, "hi") == "again"
        assert fake.requests[1].headers["x-goog-api-key"] == "env-key"
