"""Helpers shared by the tests of runs and their credit streams (`test_runs.py`,
`test_s29_lazy_run_stream.py`, `test_s29_stream_review.py`): agents, a scripted tool
round, where a run's stream and server are registered, and a server held busy."""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.runner.request import run_name, stream_name


@adk.tool
def lookup(city: str) -> dict:
    """Look a city up."""
    return {"city": city}


def echo(history, tools):
    return {"text": f"echo: {history[-1].text_value()}"}


def assert_replay_gap(run_id, oldest, latest, terminal):
    """A subscribe from the start is refused ``replay_gap``, with the window it names."""
    with pytest.raises(adk.runs.RunError) as gap:
        adk.runs.subscribe(run_id, after=0)
    assert gap.value.reason == "replay_gap"
    assert gap.value.gap == {
        "after_sequence": 0,
        "oldest_available_sequence": oldest,
        "latest_sequence": latest,
        "terminal": terminal,
    }


def runner_for(sessions, name, provider=None, tools=()):
    agent = adk.spawn_agent(
        name, {"provider": provider or adk.ScriptedProvider(fn=echo)}, tools=list(tools)
    )
    return adk.Runner(agent, "app", sessions)


def one_tool_round(final_delay=0.0):
    """Four events (user, tool call, tool response, final answer), then the terminal."""
    return adk.ScriptedProvider(
        [
            {"tool_calls": [{"name": "lookup", "args": {"city": "Paris"}}]},
            {"text": "done", "delay": final_delay},
        ]
    )


def run_stream(run_id):
    """The run's credit stream, if one is started (registered under its name)."""
    return sv.whereis(stream_name(run_id))


def server_of(run_id):
    """The run's invocation server (registered under its name)."""
    return sv.whereis(run_name(run_id))


class Busy:
    """Holds a server busy (a `replace_state` whose function waits) until released;
    a server killed meanwhile just ends the hold."""

    def __init__(self, server):
        self.inside, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._replace, args=(server,))

    def _replace(self, server):
        try:
            sv.replace_state(server, self._hold, timeout=None)
        except sv.ProcessExit:
            pass

    def _hold(self, state):
        self.inside.set()
        self.released.wait(10)
        return state

    def __enter__(self):
        self.thread.start()
        assert self.inside.wait(5)
        return self

    def __exit__(self, *exc_info):
        self.released.set()
        self.thread.join(5)
