"""Every caller enters the agent's lanes: Runner calls, `adk.runs` and `invoke` alike.

The spec ("Sub-agents and agent-as-tool"): the same (app, user, session) lane stays
FIFO for `invoke`, AgentTool and Runner; different lanes overlap up to
`max_concurrent_invocations`. Follows the reference's lane tests (FIFO per session,
fairness across lanes, a dead waiter leaving at once).
"""

from __future__ import annotations

import threading
import time

import pytest

import adk_actors as adk
from supervision import Task
from tests.helpers import wait_until


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    service = (
        adk.sessions.InMemorySessionService()
        if request.param == "memory"
        else adk.sessions.LmdbSessionService(tmp_path / "sessions")
    )
    yield service
    service.close()


class _Recorder:
    """A scripted model that records each call's message and how many ran at once."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.running = 0
        self.peak = 0

    def __call__(self, history, tools):
        message = history[-1].text_value()
        with self.lock:
            self.calls.append(message)
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(self.delay)
        with self.lock:
            self.running -= 1
        return {"text": f"re:{message}"}


def _contiguous(events) -> bool:
    """Each invocation's events form one block: no interleaving."""
    seen: list[str] = []
    for event in events:
        if not seen or seen[-1] != event.invocation_id:
            if event.invocation_id in seen:
                return False
            seen.append(event.invocation_id)
    return True


def test_two_runner_calls_on_one_session_run_one_after_the_other(sessions):
    model = _Recorder(delay=0.2)
    agent = adk.spawn_agent("Serial", {"provider": adk.ScriptedProvider(fn=model)})
    runner = adk.Runner(agent, "app", sessions)
    sessions.create_session("app", "u", "s")
    answers: dict[str, str] = {}

    def call(message: str) -> None:
        answers[message] = runner.run("u", "s", message)

    first = threading.Thread(target=call, args=("one",))
    first.start()
    wait_until(lambda: model.calls == ["one"])
    second = threading.Thread(target=call, args=("two",))
    second.start()
    first.join(10)
    second.join(10)
    assert answers == {"one": "re:one", "two": "re:two"}
    assert model.peak == 1  # never both at once
    events = sessions.get_session("app", "u", "s").events
    assert [e.text() for e in events] == ["one", "re:one", "two", "re:two"]
    assert _contiguous(events)
    # the second call's model saw the first exchange: it opened after it ended
    assert model.calls == ["one", "two"]


def test_a_runner_call_and_an_invoke_on_one_lane_keep_submission_order(sessions):
    model = _Recorder(delay=0.2)
    agent = adk.spawn_agent("Mixed", {"provider": adk.ScriptedProvider(fn=model)})
    runner = adk.Runner(agent, "app", sessions)
    run_id = adk.runs.start(runner, "u", "s", "from the runner")
    wait_until(lambda: model.calls == ["from the runner"])
    invoked = Task.start(adk.invoke, agent, "from invoke", ("app", "u", "s"))
    wait_until(lambda: adk.agent_info(agent)["queued"] == 1)
    third = adk.runs.start(runner, "u", "s", "runner again")
    assert invoked.wait(10) == "re:from invoke"
    assert adk.runs.wait(run_id, timeout=10) == adk.Completed("re:from the runner")
    assert adk.runs.wait(third, timeout=10) == adk.Completed("re:runner again")
    assert model.calls == ["from the runner", "from invoke", "runner again"]
    assert model.peak == 1


def test_max_concurrent_invocations_bounds_runner_calls(sessions):
    model = _Recorder(delay=0.1)
    agent = adk.spawn_agent(
        "Bounded", {"provider": adk.ScriptedProvider(fn=model), "max_concurrent_invocations": 2}
    )
    runner = adk.Runner(agent, "app", sessions)
    run_ids = [adk.runs.start(runner, "u", f"s{n}", f"m{n}") for n in range(8)]
    outcomes = [adk.runs.wait(run_id, timeout=20) for run_id in run_ids]
    assert outcomes == [adk.Completed(f"re:m{n}") for n in range(8)]
    assert model.peak == 2  # different sessions overlap, never past the limit
    assert adk.agent_info(agent)["active"] == 0


def test_the_lane_wait_counts_against_the_deadline(sessions):
    model = _Recorder(delay=1.0)
    agent = adk.spawn_agent("Deadline", {"provider": adk.ScriptedProvider(fn=model)})
    patient = adk.Runner(agent, "app", sessions)
    hurried = adk.Runner(agent, "app", sessions, run_timeout=0.3)
    sessions.create_session("app", "u", "s")
    first = adk.runs.start(patient, "u", "s", "slow")
    wait_until(lambda: model.calls == ["slow"])
    late = adk.runs.start(hurried, "u", "s", "late")
    assert adk.runs.wait(late, timeout=5) == adk.Failed("timeout")
    assert adk.runs.wait(first, timeout=5) == adk.Completed("re:slow")
    texts = [e.text() for e in sessions.get_session("app", "u", "s").events]
    assert texts == ["slow", "re:slow"]  # the late one never opened
    assert model.calls == ["slow"]


def test_a_dead_waiter_leaves_the_lane_at_once(sessions):
    model = _Recorder(delay=0.5)
    agent = adk.spawn_agent("Leaving", {"provider": adk.ScriptedProvider(fn=model)})
    runner = adk.Runner(agent, "app", sessions)
    sessions.create_session("app", "u", "s")
    first = adk.runs.start(runner, "u", "s", "first")
    wait_until(lambda: model.calls == ["first"])
    waiter = Task.start(runner.run, "u", "s", "never")  # queues behind the first
    wait_until(lambda: adk.agent_info(agent)["queued"] == 1)
    waiter.kill()  # its caller is gone: it leaves the lane without running
    wait_until(lambda: adk.agent_info(agent)["queued"] == 0)
    assert adk.runs.wait(first, timeout=5) == adk.Completed("re:first")
    after = adk.runs.start(runner, "u", "s", "after")
    assert adk.runs.wait(after, timeout=5) == adk.Completed("re:after")
    assert model.calls == ["first", "after"]
    texts = [e.text() for e in sessions.get_session("app", "u", "s").events]
    assert texts == ["first", "re:first", "after", "re:after"]
