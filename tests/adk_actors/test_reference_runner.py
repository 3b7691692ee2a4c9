"""Runner, runs, admission and context behaviours checked against the reference's tests.

Each test's docstring names the erlang_adk 0.7.0 test (or spec section) it follows.
Real components only: the model double is the scripted provider.
"""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import admission
from adk_actors.events import Event
from adk_actors.runner.context import EVERYTHING, ContextPolicy
from adk_actors.runner.request import run_name
from providers import content
from providers.content import Content, FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError
from supervision.tasks import Task
from tests.helpers import wait_until


@pytest.fixture
def sessions():
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def reason_of(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with pytest.raises(AdkError) as info:
        fn(*args, **kwargs)
    return info.value.reason


def echo(history, tools):
    return {"text": f"echo: {history[-1].text_value()}"}


class Publish(adk.Tool):
    name = "publish"
    description = "Publish the release."
    parameters = {"type": "object", "properties": {}}
    require_confirmation = True

    def execute(self, args, ctx):
        return {"published": True}


class Gate:
    """A model that blocks until released (its turn is what a cancel must stop)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, history, tools):
        self.entered.set()
        self.release.wait(10)
        return {"text": "late"}


# -- 1. status knows the terminal no later than a subscriber ---------------------------------


def _runners(sessions):
    echo_agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo)})
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    pausing = adk.spawn_agent(
        "Releaser", {"provider": adk.ScriptedProvider(script * 200)}, tools=[Publish()]
    )
    return adk.Runner(echo_agent, "app", sessions), adk.Runner(pausing, "app", sessions)


def _terminal_of(run_id: str) -> adk.runs.RunTerminal:
    for item in adk.runs.subscribe(run_id):
        if isinstance(item, adk.runs.RunTerminal):
            return item
    raise AssertionError("no terminal")


def test_status_is_terminal_as_soon_as_a_subscriber_sees_the_terminal(sessions):
    """Follows erlang_adk test/runtime/invocations/adk_run_test.erl:
    terminal_is_emitted_exactly_once_case (status right after the terminal item),
    repeated for completed, cancelled and paused runs."""
    echoing, pausing = _runners(sessions)
    for n in range(60):
        runner = pausing if n % 3 == 2 else echoing
        run_id = adk.runs.start(runner, "u", f"s{n}", "hello")
        if n % 3 == 1:
            try:
                adk.runs.cancel(run_id, "stop")
            except adk.runs.RunError as error:
                assert error.reason == "already_terminal"
        terminal = _terminal_of(run_id)
        status = adk.runs.status(run_id)  # at once: nothing in between
        assert status["state"] == msgspec.to_builtins(terminal.outcome)["type"]
        assert status["outcome"] == msgspec.to_builtins(terminal.outcome)
        assert status["terminal_sequence"] == terminal.seq


def test_status_keeps_the_terminal_when_the_run_server_dies_right_after_it(sessions):
    """Follows erlang_adk test/runtime/invocations/adk_run_test.erl:
    terminal_is_emitted_exactly_once_case: whoever saw the terminal, status and wait
    give the same outcome, even when the run's process is killed at that moment (the
    registry heard of the terminal before any subscriber did)."""
    echoing, pausing = _runners(sessions)
    for n in range(30):
        run_id = adk.runs.start(pausing if n % 2 else echoing, "u", f"k{n}", "hello")
        terminal = _terminal_of(run_id)
        server = sv.whereis(run_name(run_id))
        assert server is not None
        sv.exit(server, "kill")
        status = adk.runs.status(run_id)
        assert status["state"] == msgspec.to_builtins(terminal.outcome)["type"]
        assert status["outcome"] == msgspec.to_builtins(terminal.outcome)
        assert adk.runs.wait(run_id, timeout=5) == terminal.outcome


# -- 2. cancelling a granted request releases its permit once ------------------------------


def _counts(ctl: sv.Pid) -> tuple[int, int]:
    status = admission.status(ctl)
    return status["active"], status["queued"]


def test_cancel_handles_queued_and_granted_requests_exactly_once():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    cancellation_handles_queued_and_active_requests_test."""
    ctl = admission.start_link(
        {"global_limit": 1, "default_agent_limit": 1, "overflow": "queue", "max_queue": 2}
    )
    active = admission.submit("agent", server=ctl)
    permit = admission.await_permit(active, timeout=5)
    queued = admission.submit("agent", server=ctl)
    wait_until(lambda: _counts(ctl) == (1, 1))
    assert admission.cancel(queued) is True
    assert reason_of(admission.await_permit, queued, 5) == "cancelled"
    assert admission.cancel(active) is True  # granted: its permit is released
    assert _counts(ctl) == (0, 0)
    assert admission.release(permit) is False
    assert admission.cancel(active) is False
    assert _counts(ctl) == (0, 0)


def test_a_cancelled_permit_never_frees_anothers_capacity():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    cancellation_handles_queued_and_active_requests_test and
    active_owner_death_releases_exactly_once_test: cancel, cancel again, release and
    the owner's exit free one permit between them, never a second one."""
    ctl = admission.start_link({"global_limit": 2, "default_agent_limit": 2})
    owner = sv.Inbox(label="owner")
    other = admission.acquire("agent", server=ctl)
    cancelled = admission.submit("agent", owner=owner.pid, server=ctl)
    permit = cancelled.wait(5)
    assert _counts(ctl) == (2, 0)
    assert admission.cancel(cancelled.request_id, server=ctl) is True
    assert admission.cancel(cancelled.request_id, server=ctl) is False
    assert permit.release() is False
    owner.close()  # its monitor must not release anything any more
    assert _counts(ctl) == (1, 0)
    assert admission.status(ctl)["agents"]["agent"]["active"] == 1
    assert other.release() is True
    assert _counts(ctl) == (0, 0)


# -- 3. submit / await with an explicit owner ---------------------------------------------


def test_submit_and_await_fifo_with_await_timeout():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    bounded_queue_and_fifo_release_test."""
    ctl = admission.start_link(
        {"global_limit": 1, "default_agent_limit": 1, "overflow": "queue", "max_queue": 2}
    )
    seed = admission.acquire("agent", server=ctl)
    first = admission.submit("agent", server=ctl)
    second = admission.submit("agent", server=ctl)
    wait_until(lambda: _counts(ctl) == (1, 2))
    third = admission.submit("agent", server=ctl)
    assert reason_of(admission.await_permit, third, 5) == "admission_queue_full"
    seed.release()
    permit1 = admission.await_permit(first, 5)
    assert reason_of(admission.await_permit, second, 0) == "await_timeout"
    permit1.release()
    permit2 = admission.await_permit(second, 5)  # still there after a timed-out await
    assert permit2.agent == "agent" and permit2.request_id == second.request_id
    permit2.release()
    assert _counts(ctl) == (0, 0)


def test_queued_owner_death_notifies_the_requester():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    queued_owner_death_notifies_requester_test."""
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1, "overflow": "queue"})
    active = admission.acquire("agent", server=ctl)
    owner = sv.Inbox(label="owner")
    request = admission.submit("agent", owner=owner.pid, server=ctl)
    wait_until(lambda: _counts(ctl) == (1, 1))
    owner.close()
    assert reason_of(admission.await_permit, request, 5) == "owner_down"
    assert admission.cancel(request) is False
    assert _counts(ctl) == (1, 0)
    active.release()
    assert _counts(ctl) == (0, 0)


def test_active_owner_death_releases_exactly_once():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    active_owner_death_releases_exactly_once_test (``acquire(..., #{owner => Owner})``
    is ``submit(..., owner=owner)`` here)."""
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1})
    owner = sv.Inbox(label="owner")
    permit = admission.submit("agent", owner=owner.pid, server=ctl).wait(5)
    assert _counts(ctl) == (1, 0)
    owner.close()
    wait_until(lambda: _counts(ctl) == (0, 0))
    assert admission.release(permit) is False
    admission.acquire("agent", server=ctl).release()
    assert _counts(ctl) == (0, 0)


def test_queued_requester_death_removes_the_request():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    queued_requester_death_removes_request_test: a requester that dies while its
    request (for another owner) is queued leaves nothing behind, not even a permit for
    the owner."""
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1, "overflow": "queue"})
    active = admission.acquire("agent", server=ctl)
    owner = sv.Inbox(label="owner")
    hold = threading.Event()

    def requester() -> None:
        admission.submit("agent", owner=owner.pid, server=ctl)
        hold.wait(10)

    task = Task.start(requester)
    wait_until(lambda: _counts(ctl) == (1, 1))
    task.kill()
    wait_until(lambda: _counts(ctl) == (1, 0))
    active.release()
    assert _counts(ctl) == (0, 0)
    hold.set()
    owner.close()


def test_submit_with_an_absolute_deadline_expires():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    absolute_deadline_expires_queue_entry_test."""
    import time

    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1, "overflow": "queue"})
    active = admission.acquire("agent", server=ctl)
    request = admission.submit("agent", deadline=time.monotonic() + 0.03, server=ctl)
    assert reason_of(admission.await_permit, request, 5) == "queue_deadline_exceeded"
    assert admission.cancel(request) is False
    assert _counts(ctl) == (1, 0)
    active.release()


def test_submit_and_await_refuse_bad_arguments_at_once():
    """Follows erlang_adk test/runtime/admission/adk_admission_control_test.erl:
    malformed_options_do_not_crash_controller_test (and ``await``'s
    ``invalid_await``)."""
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1})
    assert reason_of(admission.submit, "agent", timeout="broken", server=ctl) == (
        "invalid_admission_request"
    )
    assert reason_of(admission.submit, "agent", owner="me", server=ctl) == (
        "invalid_admission_request"
    )
    request = admission.submit("agent", server=ctl)
    assert reason_of(admission.await_permit, request, -1) == "invalid_await"
    assert reason_of(admission.await_permit, "not-a-request", 1) == "invalid_await"
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.update(reason=reason_of(admission.await_permit, request, 0))
    )
    thread.start()
    thread.join(10)
    assert box["reason"] == "invalid_await"  # only the submitter can await it
    permit = admission.await_permit(request, 5)
    assert permit.release() is True
    assert _counts(ctl) == (0, 0)


# -- 4. Runner.cancel ------------------------------------------------------------------------


def _iterate(stream: Any) -> dict[str, Any]:
    """Iterate `stream` in a thread; the box gets its events and its error."""
    box: dict[str, Any] = {"events": []}

    def run() -> None:
        try:
            for event in stream:
                box["events"].append(event)
        except AdkError as error:
            box["error"] = error

    box["thread"] = threading.Thread(target=run)
    box["thread"].start()
    return box


def test_async_run_can_be_cancelled(sessions):
    """Follows erlang_adk test/runtime/runner/adk_runner_test.erl:
    test_async_run_can_be_cancelled."""
    gate = Gate()
    agent = adk.spawn_agent("Blocker", {"provider": adk.ScriptedProvider(fn=gate)})
    sessions.create_session("app", "u", "s", {"temp:scratch": 1})
    runner = adk.Runner(agent, "app", sessions, run_timeout=20)
    stream = runner.run_async("u", "s", "Block")
    box = _iterate(stream)
    assert gate.entered.wait(5)
    adk.Runner.cancel(stream, "test_cancel")
    box["thread"].join(10)
    assert box["error"].reason == ("cancelled", "test_cancel")
    opening, cancel = box["events"]  # the stream shows what the session stored
    assert opening.author == "user" and cancel.error.reason == "test_cancel"
    session = sessions.get_session("app", "u", "s")
    assert [e.error.reason for e in session.events if e.error] == ["test_cancel"]
    assert not any(e.is_final for e in session.events)
    assert "temp:scratch" not in session.state
    runner.cancel(stream, "again")  # ended: nothing happens
    gate.release.set()
    assert [e.error.reason for e in sessions.get_session("app", "u", "s").events if e.error] == [
        "test_cancel"
    ]


def test_cancel_queued_and_active_runs_releases_admission(sessions):
    """Follows erlang_adk test/runtime/runner/adk_runner_safety_test.erl:
    admission_reject_queue_cancel_and_release_case."""
    ctl = admission.start_link(
        {"global_limit": 1, "default_agent_limit": 1, "overflow": "queue", "max_queue": 4}
    )
    gate = Gate()
    agent = adk.spawn_agent("Holder", {"provider": adk.ScriptedProvider(fn=gate)})
    queue_runner = adk.Runner(
        agent,
        "app",
        sessions,
        run_timeout=20,
        admission_control={"server": ctl, "overflow": "queue", "queue_timeout": 15},
    )
    reject_runner = adk.Runner(
        agent, "app", sessions, admission_control={"server": ctl, "overflow": "reject"}
    )
    first_stream = queue_runner.run_async("u", "first", "hold")
    first = _iterate(first_stream)
    assert gate.entered.wait(5)
    queued_stream = queue_runner.run_async("u", "queued", "queue")
    queued = _iterate(queued_stream)
    wait_until(lambda: _counts(ctl) == (1, 1))
    assert reason_of(reject_runner.run, "u", "rejected", "reject") == (
        "admission_failed",
        "concurrency_limit_reached",
    )
    queue_runner.cancel(queued_stream, "queued_cancel")
    queued["thread"].join(10)
    assert queued["error"].reason == ("cancelled", "queued_cancel")
    assert queued["events"] == []  # it never opened
    wait_until(lambda: _counts(ctl) == (1, 0))
    queue_runner.cancel(first_stream, "active_cancel")
    first["thread"].join(10)
    assert first["error"].reason == ("cancelled", "active_cancel")
    wait_until(lambda: _counts(ctl) == (0, 0))
    gate.release.set()


def test_runner_cancel_checks_its_arguments_and_may_come_first(sessions):
    """Follows erlang_adk src/runtime/runner/adk_runner.erl cancel/1,2 (default
    reason ``user_cancelled``) and the stable runs' ``invalid_cancel_reason``
    (behaviors §4): a bad reason or a non-stream is refused; a stream cancelled before
    it is iterated ends with that cancel as soon as it starts."""
    agent = adk.spawn_agent("Early", {"provider": adk.ScriptedProvider(fn=echo)})
    runner = adk.Runner(agent, "app", sessions)
    stream = runner.run_async("u", "s", "hi")
    assert reason_of(runner.cancel, stream, object()) == "invalid_cancel_reason"
    assert reason_of(runner.cancel, stream, "x" * 2000) == "invalid_cancel_reason"
    assert reason_of(runner.cancel, "run-1", "why") == "invalid_stream"
    runner.cancel(stream)
    with pytest.raises(AdkError) as info:
        list(stream)
    assert info.value.reason == ("cancelled", "user_cancelled")
    try:  # it may have opened before the cancel came: never further than that
        events = sessions.get_session("app", "u", "s").events
    except AdkError:
        events = []
    assert not any(event.is_final for event in events)


# -- 5. exclude_content_types and "all" ------------------------------------------------------


def _event(author: str, text: str, invocation: str = "i1", final: bool = False) -> Event:
    role = "user" if author == "user" else "model"
    return Event.new(author, invocation, content.from_text(text, role=role), is_final=final)


def _exchange(invocation: str = "i1") -> list[Event]:
    call = Content("model", (FunctionCallPart("lookup", {"q": "x"}, "c1"),))
    reply = Content("tool", (FunctionResponsePart("lookup", {"answer": 1}, "c1"),))
    return [Event.new("Agent", invocation, call), Event.new("Agent", invocation, reply)]


def test_include_exclude_filters_and_all():
    """Follows erlang_adk test/context/adk_context_policy_test.erl:
    include_exclude_filters_are_deterministic (``include_authors`` is ``authors``
    here; content types are part kinds)."""
    question = _event("user", "question")
    answer = _event("Agent", "answer", final=True)
    call, reply = _exchange()
    current = _event("user", "now", "i2")
    past = [question, answer, call, reply]
    policy = ContextPolicy.compile(
        {"authors": ["Agent"], "exclude_content_types": ["function_response"]}
    )
    assert policy.select(past, current, "Agent") == [answer, current]  # the call went too
    everything = ContextPolicy.compile({"exclude_authors": "all"})
    assert everything.exclude_authors is EVERYTHING
    assert everything.select(past, current, "Agent") == [current]  # the input always stays
    for key in ("exclude_invocations", "exclude_content_types"):
        assert ContextPolicy.compile({key: "all"}).select(past, current, "Agent") == [current]
    for key in ("authors", "invocations", "content_types"):
        included = ContextPolicy.compile({key: "all"})
        assert included == ContextPolicy()  # include all: no filter
        assert included.select(past, current, "Agent") == [*past, current]


def test_excluding_a_content_type_drops_the_whole_exchange():
    """Follows erlang_adk test/context/adk_context_policy_test.erl:
    complete_tool_exchanges_are_atomic: a filter never splits a call from its
    responses, whichever half it names."""
    call, reply = _exchange()
    text = _event("Agent", "text", final=True)
    current = _event("user", "now", "i2")
    for kind in ("function_call", "function_response"):
        policy = ContextPolicy.compile({"exclude_content_types": [kind]})
        assert policy.select([call, reply, text], current, "Agent") == [text, current]
    kept = ContextPolicy.compile({"exclude_content_types": ["thought", "inline_data"]})
    assert kept.select([call, reply, text], current, "Agent") == [call, reply, text, current]


@pytest.mark.parametrize(
    ("policy", "key"),
    [
        ({"exclude_content_types": ["video"]}, "exclude_content_types"),
        ({"exclude_content_types": "text"}, "exclude_content_types"),
        ({"content_types": "ALL"}, "content_types"),
        ({"authors": "user"}, "authors"),
        ({"exclude_invocations": "everything"}, "exclude_invocations"),
        ({"exclude_authors": ["all", ""]}, "exclude_authors"),
    ],
)
def test_unknown_filter_values_are_typed_errors(policy: dict[str, Any], key: str):
    """Follows erlang_adk test/context/adk_context_policy_test.erl:
    unknown_options_and_compressors_are_rejected_eagerly (``{invalid_filter, Key}``)."""
    assert reason_of(ContextPolicy.compile, policy) == ("invalid_context_policy", key)


def test_exclude_content_types_in_a_runner(sessions):
    """Follows spec §Event Runner ("content type ... filters are supported; the current
    invocation's user event may not be filtered out"): through a Runner, the excluded
    exchange never reaches the model."""
    sessions.create_session("app", "u", "s")
    for event in [_event("user", "early"), *_exchange(), _event("Agent", "one", final=True)]:
        sessions.add_event("app", "u", "s", event)
    model = adk.ScriptedProvider(["ok"], record_histories=10)
    agent = adk.spawn_agent("Agent", {"provider": model})
    runner = adk.Runner(
        agent, "app", sessions, context_policy={"exclude_content_types": ["function_call"]}
    )
    assert runner.run("u", "s", "now") == "ok"
    assert [c.text_value() for c in model.histories[0]] == ["early", "one", "now"]


# -- 6. a resume stores nothing user-authored ------------------------------------------------


def test_a_resume_stores_no_user_event(sessions):
    """Follows erlang_adk test/runtime/runner/adk_hitl_test.erl:
    test_pause_and_resume_same_invocation (and spec §Human approval pause/resume:
    "resume records a matching function response with the original invocation ID"):
    the resumed invocation's only user event is the original message; the claim is
    the runner's, and the answer reaches the model as one correlated tool response."""
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    model = adk.ScriptedProvider(script, record_histories=10)
    agent = adk.spawn_agent("Releaser", {"provider": model}, tools=[Publish()])
    runner = adk.Runner(agent, "app", sessions)
    paused = runner.run("u", "s", "Publish it.")
    assert isinstance(paused, adk.Paused)
    invocation = paused.event.invocation_id
    assert runner.resume("u", "s", {"confirmed": True}) == "published"
    events = [
        e for e in sessions.get_session("app", "u", "s").events if e.invocation_id == invocation
    ]
    users = [e for e in events if e.author == "user"]
    assert [e.text() for e in users] == ["Publish it."]
    (claim,) = [e for e in events if e.actions.resume is not None]
    assert claim.author == "runner" and claim.content is None
    assert claim.actions.resume == {
        "continuation_id": invocation,
        "type": "tool_confirmation",
        "outcome": "approved",
    }
    responses = [
        part
        for e in events
        if e.content is not None
        for part in e.content.parts
        if isinstance(part, FunctionResponsePart)
    ]
    assert len(responses) == 1 and responses[0].response == {"published": True}
    assert [c.role for c in model.histories[1]] == ["user", "model", "tool"]


def test_a_resumed_run_stores_no_user_event(sessions):
    """Follows erlang_adk test/runtime/invocations/adk_run_test.erl:
    paused_run_resumes_as_new_supervised_run_case: the resumed run's stream starts
    with the runner's claim, not an empty user event."""
    script = [{"tool_calls": [{"name": "publish", "args": {}}]}, {"text": "published"}]
    agent = adk.spawn_agent(
        "Releaser", {"provider": adk.ScriptedProvider(script)}, tools=[Publish()]
    )
    runner = adk.Runner(agent, "app", sessions)
    paused_id = adk.runs.start(runner, "u", "s", "Publish it.")
    assert isinstance(adk.runs.wait(paused_id, timeout=10), adk.Paused)
    resumed_id = adk.runs.resume(paused_id, {"confirmed": True})
    assert adk.runs.wait(resumed_id, timeout=10) == adk.Completed("published")
    items = list(adk.runs.subscribe(resumed_id))
    first = items[0].event
    assert first.author == "runner" and first.actions.resume is not None
    assert not any(item.event.author == "user" for item in items[:-1])


# -- 7. structural tool errors use `kind` ----------------------------------------------------


def test_runner_policy_tool_errors_use_kind(sessions):
    """Follows erlang_adk test/runtime/runner/adk_runner_safety_test.erl:
    assert_policy_tool_error (``#{<<"error">> := #{<<"kind">> :=
    <<"runtime_policy_denied">>}}``), for a denied call and a denied result."""

    @adk.tool
    def fetch() -> str:
        """Fetch a big document."""
        return "x" * 500

    @adk.tool
    def wipe() -> str:
        """Wipe everything."""
        return "wiped"

    calls = {"tool_calls": [{"name": "wipe", "args": {}}, {"name": "fetch", "args": {}}]}
    model = adk.ScriptedProvider([calls, "told"], record_histories=10)
    agent = adk.spawn_agent("Guarded", {"provider": model}, tools=[fetch, wipe])
    policy = {
        "id": "p",
        "agents": {"allow": "all"},
        "tools": {"allow": "all", "deny": ["wipe"]},
        "max_content_bytes": 100,
    }
    runner = adk.Runner(agent, "app", sessions, runtime_policy=policy)
    assert runner.run("u", "s", "go") == "told"
    parts = [p for c in model.histories[1] for p in c.parts if isinstance(p, FunctionResponsePart)]
    errors = {part.name: part.response["error"] for part in parts}
    assert set(errors) == {"wipe", "fetch"}
    for error in errors.values():
        assert error["kind"] == "runtime_policy_denied" and "type" not in error
    assert errors["wipe"]["reason"] == "explicitly_denied"
    assert errors["fetch"]["reason"] == "content_budget_exceeded"


def test_a_submitter_that_cancels_leaves_no_answer_behind():
    """Review finding: each submit, timed-out await and cancel left its answer in the
    thread's mailbox for good, and awaiting a cancelled granted request returned a
    permit that was already released."""
    ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1, "overflow": "queue"})
    held = admission.acquire("a", server=ctl)
    for _ in range(50):
        request = admission.submit("a", timeout=30.0, server=ctl)
        assert reason_of(admission.await_permit, request, 0) == "await_timeout"
        assert admission.cancel(request) is True
    held.release()
    granted = admission.submit("a", server=ctl)
    wait_until(lambda: admission.status(ctl)["active"] == 1)
    assert admission.cancel(granted) is True  # its permit released
    assert reason_of(admission.await_permit, granted, 1) == "cancelled"
    assert admission.status(ctl)["active"] == 0
    with pytest.raises(TimeoutError):  # no answer left behind, none arriving late
        sv.receive(0.2, match=lambda m: isinstance(m, sv.Response))
    sv.stop(ctl)
