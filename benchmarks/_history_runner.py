"""Per-turn CPU of a Runner turn by session history size (issue 20 §4).

A session of 10, 100, 1,000 and 5,000 prior events (user questions, tool calls with
their responses, answers) is branched (`rewind`) before each turn, so every turn
sees that history; a first, untimed turn on the branch plays the conversation's
previous turn (what a process that serves a conversation has done before), then the
next `Runner.run` turn (one model call, offline `ScriptedProvider`) is timed with
`time.process_time`: the whole process's CPU, all threads (after a `gc.collect`, so
the branching's garbage is not collected on the turn's time), until shortly after
its answer (its server's tail included). Sizes run interleaved round by round
(`_bench.interleaved`); each figure is the median of the rounds' median turns.
Goal: CPU per turn at 1,000 messages at most 2x that at 10 (the median of the
per-round ratios). In memory and in LMDB.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import tempfile
import time
from typing import Any

from _bench import interleaved, load_average, median_ratio

import adk_actors as adk
from adk_actors.events import Event
from providers import content

SIZES = (10, 100, 1000, 5000)
GOAL = 2.0
APP, USER = "bench", "u"
_branches = itertools.count()
_SETTLE = 0.005


def _event(n: int) -> Event:
    """The n-th prior event: a question, a tool call, its response, an answer."""
    invocation = f"inv-{n // 4}"
    kind = n % 4
    if kind == 0:
        return Event.new("user", invocation, content.from_text(f"question {n}: weather in {n}?"))
    if kind == 1:
        call = content.function_call("get_weather", {"city": f"City {n}"}, id=f"c{n}")
        return Event.new("Agent", invocation, content.new([call], role="model"))
    if kind == 2:
        answer = {"sky": "sunny", "temperature": n % 35, "wind": {"speed": 3}}
        response = content.function_response("get_weather", answer, id=f"c{n - 1}")
        return Event.new("Agent", invocation, content.new([response], role="tool"))
    text = content.new([f"Sunny in City {n}."], role="model")
    return Event.new("Agent", invocation, text, is_final=True)


def _template(sessions: Any, size: int) -> str:
    session_id = f"template-{size}"
    sessions.create_session(APP, USER, session_id)
    for n in range(size):
        sessions.add_event(APP, USER, session_id, _event(n))
    return session_id


def _turns(runner: Any, sessions: Any, template: str, size: int, turns: int) -> float:
    """CPU ms of a turn (the median of `turns`), each on a fresh branch of `template`.
    A turn's tail (its server ending after the answer) runs on after `run` returns:
    each turn is timed from a quiet process until `_SETTLE` after its answer."""
    samples = []
    for _ in range(turns):
        branch = f"b{next(_branches)}"
        sessions.rewind(APP, USER, template, size, branch)
        assert runner.run(USER, branch, "what about today?") == "ok"  # the previous turn
        gc.collect()  # not the setup's garbage: what the turn itself costs
        time.sleep(_SETTLE)
        started = time.process_time()
        assert runner.run(USER, branch, "and tomorrow?") == "ok"
        time.sleep(_SETTLE)
        samples.append(time.process_time() - started)
        sessions.delete_session(APP, USER, branch)
    return statistics.median(samples) * 1e3


def measure(sessions: Any, turns: int, rounds: int) -> dict[int, list[float]]:
    """Per size, CPU ms per turn of each round."""
    agent = adk.spawn_agent(
        f"Agent{next(_branches)}",
        {"provider": adk.ScriptedProvider(fn=lambda history, tools: {"text": "ok"}, inline=True)},
    )
    runner = adk.Runner(agent, APP, sessions)
    templates = {size: _template(sessions, size) for size in SIZES}
    for size in SIZES:  # warm-up
        _turns(runner, sessions, templates[size], size, 1)
    sides = {
        str(size): (lambda size=size: _turns(runner, sessions, templates[size], size, turns))
        for size in SIZES
    }
    runs = interleaved(sides, rounds)
    adk.stop_agent(agent)
    return {size: runs[str(size)] for size in SIZES}


def main(quick: bool = False) -> None:
    """Print the per-turn table for both backends."""
    turns, rounds = (5, 3) if quick else (15, 5)
    adk.start()
    print(f"\nRunner turn CPU by history size (ms per turn, all threads; load {load_average()})")
    header = "".join(f"{size:>10,}" for size in SIZES)
    print(f"{'backend':<10}{header}  {'1,000/10':>9}  goal <= {GOAL:.0f}x")
    with tempfile.TemporaryDirectory(prefix="adk-history-") as directory:
        for name, sessions in (
            ("memory", adk.sessions.InMemorySessionService()),
            ("lmdb", adk.sessions.LmdbSessionService(directory)),
        ):
            runs = measure(sessions, turns, rounds)
            ratio = median_ratio(runs[1000], runs[10])
            cells = "".join(f"{statistics.median(runs[size]):>10.3f}" for size in SIZES)
            verdict = "met" if ratio <= GOAL else "not met"
            print(f"{name:<10}{cells}  {ratio:>8.2f}x  {verdict}")
            sessions.close()
    print(f"(median turn of {turns} per round, {rounds} rounds interleaved; medians)")
    adk.stop()
