"""Helpers shared by the tests of a run's lazily started credit stream
(`test_s29_lazy_run_stream.py`, `test_s29_stream_review.py`): agents, a scripted tool
round, and where a run's stream and server are registered."""

from __future__ import annotations

import adk_actors as adk
import supervision as sv
from adk_actors.runner.request import run_name, stream_name


@adk.tool
def lookup(city: str) -> dict:
    """Look a city up."""
    return {"city": city}


def echo(history, tools):
    return {"text": f"echo: {history[-1].text_value()}"}


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
