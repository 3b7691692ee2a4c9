"""Human approval and long-running operations through the Runner (behaviours §5)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import adk_actors as adk
from adk_actors import events as event_codec
from adk_actors.outcomes import Paused
from adk_actors.tools.suspension import long_running, request_human_approval
from tests.helpers import wait_until

SECRET_ARG = "prod-7f3a-secret-target"


class Publish(adk.Tool):
    """Needs approval unless it is a dry run; counts its executions."""

    name = "publish"
    description = "Publish a release."
    parameters = {
        "type": "object",
        "properties": {"dry_run": {"type": "boolean"}, "target": {"type": "string"}},
        "required": ["dry_run"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.ran: list[dict] = []

    def require_confirmation(self, args, ctx):
        return {"required": not args["dry_run"], "hint": "Publish production"}

    def execute(self, args, ctx):
        self.ran.append(args)
        return {"published": not args["dry_run"]}


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def responses_seen(model, call_index):
    """The function responses in the history of model call `call_index`."""
    return [p.response for p in model.histories[call_index][-1].parts]


def publish_agent(name="Releaser", tool=None, after=None, tool_mode=None):
    tool = tool or Publish()
    model = adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "publish", "args": {"dry_run": False, "target": SECRET_ARG}}]},
            {"text": "released"},
        ],
        record_histories=10,
    )
    config = {"provider": model}
    if after is not None:
        config["callbacks"] = {"after_tool": after}
    agent = adk.spawn_agent(name, config, tools=[tool])
    return agent, model, tool


def test_confirmation_pauses_then_approval_runs_the_tool_once(sessions):
    agent, model, tool = publish_agent()
    runner = adk.Runner(agent, "app", sessions)
    paused = runner.run("u", "s", "Publish it")
    assert isinstance(paused, Paused)
    pause = paused.event.actions.pause
    assert paused.event.author == "runner"
    assert pause.reason == "tool_confirmation" and pause.hint == "Publish production"
    assert pause.details["type"] == "tool_confirmation"
    assert pause.continuation_id == paused.event.invocation_id
    assert SECRET_ARG not in pause.details["action_id"] and tool.ran == []
    assert SECRET_ARG not in str(pause)
    assert event_codec.from_dict(event_codec.to_dict(paused.event)) == paused.event

    assert runner.resume("u", "s", {"confirmed": True}) == "released"
    assert tool.ran == [{"dry_run": False, "target": SECRET_ARG}]
    assert responses_seen(model, 1) == [{"published": True}]
    events = sessions.get_session("app", "u", "s").events
    assert [e.invocation_id for e in events] == [paused.event.invocation_id] * len(events)
    assert sum(e.is_final for e in events) == 1


def test_rejection_runs_nothing_and_tells_the_model(sessions):
    after_calls = []
    agent, model, tool = publish_agent(after=lambda ctx, payload: after_calls.append(payload))
    runner = adk.Runner(agent, "app", sessions)
    action_id = runner.run("u", "s", "Publish").event.actions.pause.details["action_id"]
    assert runner.resume("u", "s", {"confirmed": False}) == "released"
    assert tool.ran == [] and after_calls == []
    assert responses_seen(model, 1) == [
        {"success": False, "error": {"kind": "tool_confirmation_rejected", "action_id": action_id}}
    ]


@pytest.mark.parametrize(
    "response", [{"confirmed": "yes"}, {"confirmed": True, "extra": 1}, {}, "yes", None]
)
def test_an_invalid_confirmation_response_consumes_nothing(sessions, response):
    agent, _model, tool = publish_agent()
    runner = adk.Runner(agent, "app", sessions)
    runner.run("u", "s", "Publish")
    with pytest.raises(adk.AdkError) as failure:
        runner.resume("u", "s", response)
    assert failure.value.reason == "invalid_tool_confirmation_response"
    assert runner.resume("u", "s", {"confirmed": True}) == "released"
    assert len(tool.ran) == 1


def test_continuations_are_single_use_also_under_concurrent_resumes(sessions):
    agent, _model, tool = publish_agent()
    runner = adk.Runner(agent, "app", sessions)
    runner.run("u", "s", "Publish")
    results: list = []
    barrier = threading.Barrier(8)

    def resume() -> None:
        barrier.wait()
        try:
            results.append(runner.resume("u", "s", {"confirmed": True}))
        except adk.AdkError as error:
            results.append(error.reason)

    threads = [threading.Thread(target=resume) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results, key=str) == ["no_paused_invocation"] * 7 + ["released"]
    assert len(tool.ran) == 1
    events = sessions.get_session("app", "u", "s").events
    tool_events = [e for e in events if e.content is not None and e.content.role == "tool"]
    assert len(tool_events) == 1 and sum(e.is_final for e in events) == 1
    with pytest.raises(adk.AdkError, match="no_paused_invocation"):
        runner.resume("u", "s", {"confirmed": True})


def test_no_pause_and_no_session(sessions):
    agent, _model, _tool = publish_agent()
    runner = adk.Runner(agent, "app", sessions)
    with pytest.raises(adk.AdkError) as failure:
        runner.resume("u", "never", {"confirmed": True})
    assert failure.value.reason == "no_paused_invocation"
    with pytest.raises(adk.AdkError, match="not_found"):
        sessions.get_session("app", "u", "never")  # resume never creates a session


def test_two_paused_invocations_need_an_id(sessions):
    model = adk.ScriptedProvider(
        fn=lambda history, tools: (
            {"text": "ok"}
            if history[-1].role == "tool"
            else {"tool_calls": [{"name": "publish", "args": {"dry_run": False}}]}
        )
    )
    agent = adk.spawn_agent("Twice", {"provider": model}, tools=[Publish()])
    runner = adk.Runner(agent, "app", sessions)
    first = runner.run("u", "s", "one").event.invocation_id
    second = runner.run("u", "s", "two").event.invocation_id
    with pytest.raises(adk.AdkError) as failure:
        runner.resume("u", "s", {"confirmed": True})
    assert failure.value.reason == ("ambiguous_paused_invocation", sorted([first, second]))
    assert runner.resume("u", "s", {"confirmed": True}, invocation_id=second) == "ok"
    assert runner.paused_invocations("u", "s") == [first]
    assert runner.resume("u", "s", {"confirmed": True}) == "ok"
    assert runner.paused_invocations("u", "s") == []


def test_model_requested_human_approval(sessions):
    model = adk.ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"name": "request_human_approval", "args": {"summary": "Delete old deploy"}}
                ]
            },
            {"text": "deleted"},
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Approver", {"provider": model}, tools=[request_human_approval])
    runner = adk.Runner(agent, "app", sessions)
    paused = runner.run("u", "s", "Delete the obsolete deployment.")
    event = paused.event
    assert event.author == "runner" and event.text() == "Delete old deploy"
    pause = event.actions.pause
    assert (pause.tool_name, pause.reason, pause.continuation_id) == (
        "request_human_approval",
        "human_in_the_loop",
        event.invocation_id,
    )
    assert pause.call_id is not None
    assert event_codec.from_dict(event_codec.to_dict(event)) == event
    answer = {"approved": True, "approver": "operator@example.com"}
    assert runner.resume("u", "s", answer, invocation_id=event.invocation_id) == "deleted"
    (seen,) = model.histories[1][-1].parts
    assert seen.response == answer and seen.id == pause.call_id
    texts = [c.text_value() for c in model.histories[1]]
    assert "Delete old deploy" not in texts  # the pause event is not conversation


class Export(adk.Tool):
    """Starts an external export and suspends on it."""

    name = "export"
    description = "Export data."
    parameters = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.ran = 0

    def execute(self, args, ctx):
        self.ran += 1
        return long_running("export-42", "The export is running.")


def export_runner(sessions, after=None, confirm=False):
    tool = Export()
    if confirm:
        tool.require_confirmation = True
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "export", "args": {}}]}, "exported"], record_histories=10
    )
    config = {"provider": model}
    if after is not None:
        config["callbacks"] = {"after_tool": after}
    agent = adk.spawn_agent("Exporter", config, tools=[tool])
    return adk.Runner(agent, "app", sessions), model, tool


def test_long_running_progress_and_completion(sessions):
    after_calls = []
    runner, model, tool = export_runner(
        sessions, after=lambda ctx, payload: after_calls.append(payload)
    )
    sessions.create_session("app", "u", "s", {"temp:ticket": "T-1"})
    paused = runner.run("u", "s", "Export")
    invocation = paused.event.invocation_id
    assert paused.event.actions.pause.details == {
        "type": "long_running",
        "operation_id": "export-42",
    }
    assert sessions.get_session("app", "u", "s").state["temp:ticket"] == "T-1"  # kept
    update = {"operation_id": "export-42", "status": "running", "progress": 50}
    progress = runner.update_long_running("u", "s", invocation, "export-42", update)
    assert progress.actions.long_running_operation == update and not progress.is_final
    with pytest.raises(adk.AdkError, match="long_running_operation_mismatch"):
        runner.update_long_running("u", "s", invocation, "export-7", update)
    for bad in (
        {"operation_id": "export-42", "status": "done"},
        {"operation_id": "export-42", "status": "running", "progress": 101},
        {"operation_id": "export-42", "status": "running", "colour": "red"},
        {"status": "running"},
    ):
        with pytest.raises(adk.AdkError) as failure:
            runner.update_long_running("u", "s", invocation, "export-42", bad)
        assert failure.value.reason == "invalid_long_running_progress", bad
    for bad in (
        {"operation_id": "export-42", "status": "running"},
        {"operation_id": "export-7", "status": "completed"},
        {"operation_id": "export-42", "status": "completed", "extra": 1},
    ):
        with pytest.raises(adk.AdkError) as failure:
            runner.resume("u", "s", bad)
        assert failure.value.reason == "invalid_long_running_completion", bad
    completion = {"operation_id": "export-42", "status": "completed", "result": {"id": "x.zip"}}
    assert runner.resume("u", "s", completion) == "exported"
    assert responses_seen(model, 1) == [completion] and after_calls == [completion]
    assert tool.ran == 1
    assert "temp:ticket" not in sessions.get_session("app", "u", "s").state  # cleared at final
    with pytest.raises(adk.AdkError, match="no_paused_invocation"):
        runner.update_long_running("u", "s", invocation, "export-42", update)


def test_an_approved_tool_may_then_run_long(sessions):
    after_calls = []
    runner, _model, tool = export_runner(
        sessions, after=lambda ctx, payload: after_calls.append(payload), confirm=True
    )
    first = runner.run("u", "s", "Export")
    assert first.event.actions.pause.reason == "tool_confirmation" and tool.ran == 0
    second = runner.resume("u", "s", {"confirmed": True})
    assert isinstance(second, Paused) and second.event.actions.pause.reason == "long_running"
    assert tool.ran == 1 and after_calls == []  # after-callbacks wait for the completion
    done = {"operation_id": "export-42", "status": "failed", "error": {"code": 7}}
    assert runner.resume("u", "s", done) == "exported"
    assert tool.ran == 1 and after_calls == [done]


def test_a_failing_check_or_bad_arguments_never_pause(sessions):
    class Broken(Publish):
        def require_confirmation(self, args, ctx):
            raise RuntimeError("boom")

    broken = Broken()
    model = adk.ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"name": "publish", "args": {"dry_run": False}},
                    {"name": "publish", "args": {"dry_run": "no"}},
                ]
            },
            "fine",
        ],
        record_histories=10,
    )
    agent = adk.spawn_agent("Broken", {"provider": model}, tools=[broken])
    assert adk.Runner(agent, "app", sessions).run("u", "s", "go") == "fine"
    first, second = responses_seen(model, 1)
    assert first["error"]["kind"] == "tool_confirmation_evaluation_failed"
    assert second["error"]["type"] == "invalid_tool_arguments"
    assert broken.ran == []


def test_approval_rereads_the_catalog_and_a_vanished_tool_fails_closed(sessions):
    agent, _model, tool = publish_agent(name="Shifty")
    runner = adk.Runner(agent, "app", sessions)
    runner.run("u", "s", "Publish")
    adk.stop_agent(agent)
    model = adk.ScriptedProvider(["gone"], record_histories=10)
    adk.spawn_agent("Shifty", {"provider": model})  # same name, no publish tool
    assert runner.resume("u", "s", {"confirmed": True}) == "gone"
    assert tool.ran == []
    (response,) = responses_seen(model, 0)
    assert response["success"] is False and response["error"]["kind"] == "not_found"


def test_confirmation_is_a_barrier_between_parallel_calls(sessions):
    order = []

    class Safe(adk.Tool):
        name = "safe"
        parallel_safe = True
        parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}

        def execute(self, args, ctx):
            order.append(args["n"])
            return {"n": args["n"]}

    class Gate(Safe):
        name = "gate"
        require_confirmation = True

    calls = [
        {"name": "safe", "args": {"n": 1}},
        {"name": "gate", "args": {"n": 2}},
        {"name": "safe", "args": {"n": 3}},
    ]
    model = adk.ScriptedProvider([{"tool_calls": calls}, "done"], record_histories=10)
    agent = adk.spawn_agent(
        "Barrier",
        {"provider": model, "tool_execution": {"mode": "parallel", "max_concurrency": 4}},
        tools=[Safe(), Gate()],
    )
    runner = adk.Runner(agent, "app", sessions)
    assert isinstance(runner.run("u", "s", "go"), Paused)
    assert order == [1]  # the call after the gate waits for the human
    assert runner.resume("u", "s", {"confirmed": True}) == "done"
    assert order == [1, 2, 3]
    assert [r["n"] for r in responses_seen(model, 1)] == [1, 2, 3]


def test_prompt_without_a_runner_fails_closed(sessions):
    agent, model, tool = publish_agent(name="NoRunner")
    assert adk.prompt(agent, "Publish") == "released"  # the model answers after the refusal
    assert tool.ran == []
    assert responses_seen(model, 1) == [
        {
            "success": False,
            "error": {"kind": "tool_confirmation_requires_runner", "hint": "Publish production"},
        }
    ]


def test_an_lmdb_pause_survives_a_process_restart(tmp_path):
    path = tmp_path / "sessions"
    script = textwrap.dedent(
        f"""
        import adk_actors as adk
        from adk_actors.outcomes import Paused
        from tests.adk_actors.test_approval import publish_agent
        adk.start()
        agent, _model, _tool = publish_agent(name="Durable")
        runner = adk.Runner(agent, "app", adk.sessions.LmdbSessionService({str(path)!r}))
        assert isinstance(runner.run("u", "s", "Publish"), Paused)
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), timeout=60)
    assert completed.returncode == 0
    sessions = adk.sessions.LmdbSessionService(path)
    model = adk.ScriptedProvider(["published after restart"])
    tool = Publish()
    agent = adk.spawn_agent("Durable", {"provider": model}, tools=[tool])
    runner = adk.Runner(agent, "app", sessions)
    assert runner.resume("u", "s", {"confirmed": True}) == "published after restart"
    assert len(tool.ran) == 1
    with pytest.raises(adk.AdkError, match="no_paused_invocation"):
        runner.resume("u", "s", {"confirmed": True})


def test_a_resume_refused_by_admission_stays_resumable(sessions):
    from adk_actors import admission

    controller = admission.start_link({"global_limit": 1})
    agent, _model, tool = publish_agent(name="Admitted")
    runner = adk.Runner(agent, "app", sessions, admission_control={"server": controller})
    sessions.create_session("app", "u", "s", {"temp:ticket": "T-9"})
    assert isinstance(runner.run("u", "s", "Publish"), Paused)
    blocker = admission.acquire("Admitted", server=controller)  # the only permit
    with pytest.raises(adk.AdkError) as failure:
        runner.resume("u", "s", {"confirmed": True})
    assert failure.value.reason == ("admission_failed", "concurrency_limit_reached")
    assert runner.paused_invocations("u", "s") != [] and tool.ran == []
    assert sessions.get_session("app", "u", "s").state["temp:ticket"] == "T-9"
    blocker.release()
    assert runner.resume("u", "s", {"confirmed": True}) == "released"
    assert len(tool.ran) == 1


def test_only_the_agent_that_paused_may_resume(sessions):
    agent, _model, tool = publish_agent(name="Owner")
    other = adk.spawn_agent(
        "Stranger", {"provider": adk.ScriptedProvider(["x"])}, tools=[Publish()]
    )
    adk.Runner(agent, "app", sessions).run("u", "s", "Publish")
    with pytest.raises(adk.AdkError) as failure:
        adk.Runner(other, "app", sessions).resume("u", "s", {"confirmed": True})
    assert failure.value.reason == "paused_by_another_agent" and tool.ran == []


def test_a_streamed_final_the_policy_denies_is_never_stored(sessions):
    model = adk.ScriptedProvider([{"stream": ["a long ", "secret answer " * 10]}])
    agent = adk.spawn_agent("Streamer", {"provider": model})
    policy = {
        "id": "p",
        "agents": {"allow": "all"},
        "tools": {"allow": "all"},
        "max_content_bytes": 64,
    }
    runner = adk.Runner(agent, "app", sessions, streaming_mode="text", runtime_policy=policy)
    with pytest.raises(adk.AdkError) as failure:
        runner.run("u", "s", "hi")
    assert failure.value.reason[0] == "runtime_policy_denied"
    assert "secret answer" not in str(sessions.get_session("app", "u", "s").events)


def test_an_abandon_closes_only_its_own_opening(sessions):
    import threading

    gate = threading.Event()

    class SlowPublish(Publish):
        def execute(self, args, ctx):
            gate.wait(10)
            return super().execute(args, ctx)

    agent, _model, tool = publish_agent(name="Careful", tool=SlowPublish())
    runner = adk.Runner(agent, "app", sessions)
    invocation = runner.run("u", "s", "Publish").event.invocation_id
    from supervision.tasks import Task

    resuming = Task.start(runner.resume, "u", "s", {"confirmed": True})
    wait_until(lambda: any(k.startswith("_adk:open:") for k in state_of(sessions)))
    assert runner.abandon("u", "s", invocation, "not_mine", token="another-run") is None
    gate.set()
    assert resuming.wait(10) == "released" and len(tool.ran) == 1
    events = sessions.get_session("app", "u", "s").events
    assert events[-1].is_final and not any(e.error for e in events)


def state_of(sessions):
    """The stored state, the runtime's own ``_adk:`` keys included."""
    return sessions.get_session("app", "u", "s", include_internal=True).state


def test_a_run_cancelled_in_its_lane_never_opens(sessions):
    """The invocation server is the only writer: cancelled while it waits for its lane
    (another invocation holds the session), it ends Cancelled with nothing stored, and
    the turn it never started never runs."""
    model = adk.ScriptedProvider([{"text": "first", "delay": 0.5}, "never"])
    agent = adk.spawn_agent("Opener", {"provider": model})
    runner = adk.Runner(agent, "app", sessions)
    sessions.create_session("app", "u", "lane")
    first = adk.runs.start(runner, "u", "lane", "one")
    wait_until(lambda: sessions.get_session("app", "u", "lane").events != ())
    second = adk.runs.start(runner, "u", "lane", "two")
    wait_until(lambda: adk.runs.status(second)["phase"] == "queued_in_lane")
    adk.runs.cancel(second, "user_cancel")
    assert adk.runs.wait(second, timeout=5) == adk.Cancelled("user_cancel")
    assert adk.runs.wait(first, timeout=5) == adk.Completed("first")
    session = sessions.get_session("app", "u", "lane", include_internal=True)
    assert [e.text() for e in session.events] == ["one", "first"]
    assert model.calls == 1 and not any(k.startswith("_adk:") for k in session.state)


def test_an_lmdb_continuation_with_a_nan_still_resumes(tmp_path):
    @adk.tool
    def score() -> dict:
        """Score."""
        return {"score": float("nan")}

    model = adk.ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"name": "score", "args": {}},
                    {"name": "publish", "args": {"dry_run": False}},
                ]
            },
            "scored",
        ]
    )
    agent = adk.spawn_agent("Nan", {"provider": model}, tools=[score, Publish()])
    lmdb_sessions = adk.sessions.LmdbSessionService(tmp_path / "s")
    runner = adk.Runner(agent, "app", lmdb_sessions)
    assert isinstance(runner.run("u", "s", "go"), Paused)
    assert runner.resume("u", "s", {"confirmed": True}) == "scored"
    lmdb_sessions.close()


def test_a_paused_run_resumes_after_a_process_restart(tmp_path):
    """What waits for a human survives the process: a daemon lists it from the sessions
    (`runs.pending`) and resumes the run by its id."""
    path = tmp_path / "sessions"
    script = textwrap.dedent(
        f"""
        import adk_actors as adk
        from tests.adk_actors.test_approval import publish_agent
        adk.start()
        agent, _model, _tool = publish_agent(name="Daemon")
        runner = adk.Runner(agent, "app", adk.sessions.LmdbSessionService({str(path)!r}))
        run_id = adk.runs.start(runner, "u", "s", "Publish")
        assert isinstance(adk.runs.wait(run_id, timeout=30), adk.Paused)
        print("RUN_ID=" + run_id)
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=os.getcwd(), timeout=60, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    run_id = completed.stdout.rsplit("RUN_ID=", 1)[1].split()[0]
    sessions = adk.sessions.LmdbSessionService(path)
    tool = Publish()
    model = adk.ScriptedProvider(["published after restart"])
    runner = adk.Runner(
        adk.spawn_agent("Daemon", {"provider": model}, tools=[tool]), "app", sessions
    )
    (waiting,) = adk.runs.pending(runner, "u")
    assert waiting["run_id"] == run_id and waiting["type"] == "tool_confirmation"
    resumed = adk.runs.resume(run_id, {"confirmed": True}, runner=runner, user_id="u")
    assert adk.runs.wait(resumed, timeout=10) == adk.Completed("published after restart")
    assert len(tool.ran) == 1 and adk.runs.pending(runner, "u") == []
    sessions.close()


def test_user_checks_run_off_the_reactor(sessions):
    """A `require_confirmation` method and a dynamic instruction provider are user code:
    they run on pool threads, never on the reactor where turns wait."""
    import threading

    seen: list[str] = []

    class Checked(Publish):
        def require_confirmation(self, args, ctx):
            seen.append(threading.current_thread().name)
            return False

    def instructions(scope):
        seen.append(threading.current_thread().name)
        return "Be brief."

    call = {"name": "publish", "args": {"dry_run": True}}
    model = adk.ScriptedProvider([{"tool_calls": [call]}, "done"])
    agent = adk.spawn_agent(
        "Offloop", {"provider": model, "instructions": instructions}, tools=[Checked()]
    )
    assert adk.Runner(agent, "app", sessions).run("u", "s", "go") == "done"
    assert len(seen) == 2 and "supervision-reactor" not in seen


@pytest.mark.parametrize("backend", ["memory", "lmdb"])
def test_an_approved_call_runs_with_the_models_arguments_though_events_are_redacted(
    backend, tmp_path
):
    """Review finding: stored events hold redacted arguments, and a resume rebuilt the
    approved call from them, so the tool ran with ``[redacted]``. The continuation keeps
    the batch's calls as the model made them."""
    service = (
        adk.sessions.InMemorySessionService()
        if backend == "memory"
        else adk.sessions.LmdbSessionService(str(tmp_path / "db"))
    )

    class Deploy(adk.Tool):
        name = "deploy"
        description = "Deploy."
        parameters = {
            "type": "object",
            "properties": {"api_key": {"type": "string"}, "cmd": {"type": "string"}},
            "required": ["api_key", "cmd"],
        }
        require_confirmation = True

        def __init__(self) -> None:
            self.ran: list[dict] = []

        def execute(self, args, ctx):
            self.ran.append(args)
            return {"ok": True}

    args = {"api_key": "user-key-123", "cmd": "login --token=abc12345"}
    tool = Deploy()
    model = adk.ScriptedProvider([{"tool_calls": [{"name": "deploy", "args": args}]}, "done"])
    runner = adk.Runner(
        adk.spawn_agent("Deployer", {"provider": model}, tools=[tool]), "app", service
    )
    assert isinstance(runner.run("u", "s", "deploy"), adk.Paused)
    assert runner.resume("u", "s", {"confirmed": True}) == "done"
    assert tool.ran == [args]
    (call,) = [
        part
        for event in service.get_session("app", "u", "s").events
        if event.content is not None
        for part in event.content.function_calls()
    ]
    assert call.args == {"api_key": "[redacted]", "cmd": "login --token=[redacted]"}
    service.close()
