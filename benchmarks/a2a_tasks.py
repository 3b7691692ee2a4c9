"""A2A tasks per second: our server (`adk.a2a.serve`) against the official a2a-sdk's.

The same agent on both servers, a scripted model answering ``echo: <prompt>``
(`ScriptedProvider(fn=..., inline=True)`), each server in a process of its own: ours
`adk.a2a.serve(agent, allow_unauthenticated_loopback=True)`, the SDK's built from its
server classes (`DefaultRequestHandler`, `InMemoryTaskStore`, `create_jsonrpc_routes`,
an `AgentExecutor` running each task as a stable run of the agent:
`benchmarks/_a2a_peer.py`). Neither side authenticates. One client for both, in this
process: raw JSON-RPC 2.0 over one `httpx.AsyncClient` with ``A2A-Version: 1.0``.

Two calls, each `count` tasks, sequential and `WIDTH`-way concurrent (coroutines):
``SendMessage`` (blocking: the answer is the completed task) and
``SendStreamingMessage`` read to its end (the task snapshot, status and artifact
updates, the terminal status). Both servers run throughout and each round measures
them in turn, the first side alternating, so a drift of the machine's load reaches
both; the best round of each counts. What the servers log (warnings and errors) is
counted and printed under the table. Ours pays for the spec's rules on every task (strict
parsing that refuses unknown fields, the version header, bounds on bytes, history and
artifacts, a supervised task store with principal scoping, SSE event ids for resuming).

Needs a2a-sdk (installed in `.venv-bench` and `.venv`).
Usage: ``python benchmarks/a2a_tasks.py [--quick]``
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable
from typing import IO, Any

import httpx
import structlog
from _a2a_peer import SdkPeer
from _bench import print_header, url_process
from weather_workload import quiet_options

import adk_actors as adk

WIDTH = 16
"""Concurrent tasks in flight."""
WARM = 20
"""Tasks sent before the clock starts."""
RPC_PATH = "/a2a/v1"
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
_ids = itertools.count()

# -- the servers (each in a process of its own: `a2a_tasks.py --serve ours|sdk`) -------------


def echo_model(history: Any, tools: Any) -> dict[str, Any]:
    """The scripted model both servers run: the prompt back."""
    return {"text": "echo: " + history[-1].text_value()}


def serve(side: str) -> None:
    """Serve the echo agent (`side` "ours" | "sdk"), print its base URL, wait for stdin to close."""
    structlog.configure(  # warnings only, on stderr (stdout carries the URL)
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    adk.start()
    agent = adk.spawn_agent("Echo", {"provider": adk.ScriptedProvider(fn=echo_model, inline=True)})
    stop: Callable[[], None]
    if side == "ours":
        server = adk.a2a.serve(agent, allow_unauthenticated_loopback=True)
        url, stop = server.url, server.stop
    else:
        peer = SdkPeer(agent, name="Echo")
        url, stop = peer.url, peer.stop
    print(url, flush=True)
    sys.stdin.read()
    stop()
    adk.stop()


def server_process(side: str, log: IO[str]) -> contextlib.AbstractContextManager[str]:
    """A server process of `side`, its warnings written to `log`; yields its base URL."""
    return url_process([sys.executable, __file__, "--serve", side], side, stderr=log)


# -- the client ----------------------------------------------------------------------------------


def request(method: str, text: str) -> dict[str, Any]:
    n = next(_ids)
    message = {"messageId": f"bench-{n}", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": n, "method": method, "params": {"message": message}}


async def send_one(http: httpx.AsyncClient, url: str, n: int) -> None:
    """One SendMessage; the answer is the completed task."""
    response = await http.post(url, json=request("SendMessage", f"task {n}"), headers=HEADERS)
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"][0]["text"] == f"echo: task {n}", task


async def stream_one(http: httpx.AsyncClient, url: str, n: int) -> None:
    """One SendStreamingMessage, read to its end; the last event is the terminal status."""
    body = request("SendStreamingMessage", f"task {n}")
    last: dict[str, Any] = {}
    events = 0
    async with http.stream("POST", url, json=body, headers=HEADERS) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                last = json.loads(line[5:])["result"]
                events += 1
    state = last.get("statusUpdate", {}).get("status", {}).get("state")
    assert events >= 2 and state == "TASK_STATE_COMPLETED", (events, last)


async def rate(url: str, one: Any, count: int, width: int) -> float:
    """Tasks per second of `count` tasks, `width` in flight at a time."""
    limits = httpx.Limits(max_connections=width, max_keepalive_connections=width)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as http:
        for n in range(WARM):
            await one(http, url, n)
        per_worker = max(1, count // width)

        async def worker(offset: int) -> None:
            for n in range(per_worker):
                await one(http, url, offset * per_worker + n)

        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(width)))
        return per_worker * width / (time.perf_counter() - started)


# -- the table -----------------------------------------------------------------------------------

CALLS = {"SendMessage (blocking)": send_one, "SendStreamingMessage": stream_one}
SIDES = ("ours", "sdk")


def interleaved(urls: dict[str, str], count: int, rounds: int) -> dict[tuple[str, str, int], float]:
    """The best rate of each (side, call, width) over `rounds`, the sides measured in
    turn within each round (the first side alternating) so that a drift of the
    machine's load reaches both."""
    rates: dict[tuple[str, str, int], float] = {}
    for round_number in range(rounds):
        sides = SIDES if round_number % 2 == 0 else SIDES[::-1]
        for label, one in CALLS.items():
            for width in (1, WIDTH):
                for side in sides:
                    measured = asyncio.run(rate(urls[side] + RPC_PATH, one, count, width))
                    key = side, label, width
                    rates[key] = max(rates.get(key, 0.0), measured)
    return rates


_LOGGED = re.compile(r"\[(warning|error|critical)\s*\]\s+(\S+)")


def logged_events(log: IO[str]) -> collections.Counter[str]:
    """What a server process logged on stderr: its warning and error events by name (any
    other line, a traceback say, counted as "other output")."""
    log.seek(0)
    counts: collections.Counter[str] = collections.Counter()
    for line in log:
        if line.strip():
            found = _LOGGED.search(line)
            counts[found.group(2) if found else "other output"] += 1
    return counts


def main() -> None:
    options = quiet_options(__doc__.splitlines()[0])
    count, rounds = (200, 1) if options.quick else (2_000, 3)
    print_header("a2a", "a2a-sdk")
    print(f"\nA2A tasks per second, scripted echo agent, {count:,} tasks, best of {rounds}")
    print(
        "  (the same raw JSON-RPC client; ours = adk.a2a.serve, sdk = the a2a-sdk server classes;"
        " rounds interleaved)"
    )
    print("                                         ours      sdk   ratio")
    with contextlib.ExitStack() as files:
        logs = {side: files.enter_context(tempfile.TemporaryFile("w+")) for side in SIDES}
        with contextlib.ExitStack() as servers:  # both up: the rounds alternate between them
            urls = {side: servers.enter_context(server_process(side, logs[side])) for side in SIDES}
            rates = interleaved(urls, count, rounds)
        logged = {side: logged_events(logs[side]) for side in SIDES}  # the processes have ended
    for label in CALLS:
        for width in (1, WIDTH):
            ours, sdk = rates["ours", label, width], rates["sdk", label, width]
            shape = "sequential" if width == 1 else f"{width}-way"
            print(f"  {label + ', ' + shape:36s} {ours:8,.0f} {sdk:8,.0f} {ours / sdk:6.2f}x")
    for side in SIDES:
        for event, times in sorted(logged[side].items()):
            print(f"note: the {side} server logged {event!r} {times} time(s)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        main()
