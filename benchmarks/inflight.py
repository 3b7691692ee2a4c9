"""Waiting costs no thread: thousands of stable runs in flight against a slow model.

Both runtimes call the same loopback fake Gemini server (``python -m
providers.fake_gemini``, its own process, answering every call after ``--delay``
seconds with the user's text), through google-genai's async client on httpx with the
same connection limit. Ours: `adk.runs.start` for every run at once, each its own
session, waited for with `adk.runs.wait_async`. The peer: google-adk's `Runner`
(in-memory sessions) with its `Gemini` model, every run an asyncio task. Reported
per runtime: wall time from the first start to the last outcome, peak threads and
peak RSS of this process (sampled every 20 ms), and every outcome checked.

    python benchmarks/inflight.py [--runs 10000] [--delay 1.0] [--quick] [--skip-peer]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
import structlog

import adk_actors as adk

AGENTS = 10
"""Runs are spread over this many agents (an agent admits at most 4,096 lanes)."""
GOALS = {"wall_s": 3.0, "threads": 100, "rss_gib": 4.0}


class _Peak:
    """Samples this process's thread count and RSS until stopped."""

    def __init__(self) -> None:
        self.threads = threading.active_count()
        self.rss = psutil.Process().memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        process = psutil.Process()
        while not self._stop.wait(0.02):
            self.threads = max(self.threads, process.num_threads())
            self.rss = max(self.rss, process.memory_info().rss)


def _fake_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    """Start the fake Gemini server in its own process; (process, base url)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as script:
        json.dump({"echo": True}, script)
    command = [sys.executable, "-m", "providers.fake_gemini", "--port", "0"]
    command += ["--script", script.name, "--delay", str(delay)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = json.loads(server.stdout.readline())
    return server, line["url"]


def _ours(url: str, runs: int, connections: int) -> dict[str, Any]:
    adk.start()
    config = {
        "provider": "gemini",
        "model": "fake",
        "api_key": "bench-key",
        "base_url": url,
        "max_connections": connections,
        "max_concurrent_invocations": 4096,
    }
    agents = [adk.spawn_agent(f"Inflight{n}", dict(config)) for n in range(AGENTS)]
    sessions = adk.sessions.InMemorySessionService()
    runners = [adk.Runner(agent, "bench", sessions, run_timeout=120.0) for agent in agents]
    warm = adk.runs.start(runners[0], "warm", "warm", "warm")  # clients and pools exist
    assert adk.runs.wait(warm, timeout=30) == adk.Completed("warm")

    async def one(n: int) -> Any:
        # waited for from its start: at most 100 ended runs are retained, and a run that
        # ended and was evicted before anyone waited would be not_found
        run_id = adk.runs.start(runners[n % AGENTS], f"u{n}", f"s{n}", f"m{n}")
        return await adk.runs.wait_async(run_id, timeout=120)

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(one(n) for n in range(runs))))

    with _Peak() as peak:
        started = time.perf_counter()
        outcomes = asyncio.run(main())
        wall = time.perf_counter() - started
    correct = sum(outcome == adk.Completed(f"m{n}") for n, outcome in enumerate(outcomes))
    adk.stop()
    return {"wall_s": wall, "threads": peak.threads, "rss": peak.rss, "correct": correct}


def _peer(url: str, runs: int, connections: int) -> dict[str, Any]:
    import httpx
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import Client, types

    os.environ["GOOGLE_API_KEY"] = "bench-key"

    class LoopbackGemini(Gemini):
        """google-adk's Gemini model with the same base url and connection limit."""

        @property
        def api_client(self) -> Client:
            client = self.__dict__.get("_bench_client")
            if client is None:
                limits = httpx.Limits(
                    max_connections=connections, max_keepalive_connections=connections
                )
                options = types.HttpOptions(
                    base_url=url,
                    httpx_async_client=httpx.AsyncClient(limits=limits, timeout=120.0),
                )
                client = Client(api_key="bench-key", http_options=options)
                self.__dict__["_bench_client"] = client
            return client

    agent = LlmAgent(name="inflight", model=LoopbackGemini(model="fake"))
    runner = InMemoryRunner(agent=agent, app_name="bench")

    async def one(n: int) -> str:
        session = await runner.session_service.create_session(app_name="bench", user_id=f"u{n}")
        message = types.Content(role="user", parts=[types.Part(text=f"m{n}")])
        final = ""
        async for event in runner.run_async(
            user_id=f"u{n}", session_id=session.id, new_message=message
        ):
            if event.content and event.content.parts and event.content.parts[0].text:
                final = event.content.parts[0].text
        return final

    async def main() -> list[str]:
        await one(-1)  # warm: the client exists
        return list(await asyncio.gather(*(one(n) for n in range(runs))))

    with _Peak() as peak:
        started = time.perf_counter()
        answers = asyncio.run(main())
        wall = time.perf_counter() - started
    correct = sum(answer == f"m{n}" for n, answer in enumerate(answers))
    return {"wall_s": wall, "threads": peak.threads, "rss": peak.rss, "correct": correct}


def _row(name: str, result: dict[str, Any], runs: int) -> str:
    return (
        f"| {name} | {runs} | {result['correct']} | {result['wall_s']:.2f} | "
        f"{result['threads']} | {result['rss'] / 2**30:.2f} |"
    )


def _measure(label: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    print(f"measuring {label} ...", file=sys.stderr, flush=True)
    return measure()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="1,000 runs")
    parser.add_argument("--skip-peer", action="store_true")
    options = parser.parse_args()
    runs = 1_000 if options.quick else options.runs
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    connections = min(runs + 16, 65_536)
    server, url = _fake_server(options.delay)
    try:
        ours = _measure("adk_actors", lambda: _ours(url, runs, connections))
        peer = (
            None
            if options.skip_peer
            else _measure("google-adk", lambda: _peer(url, runs, connections))
        )
    finally:
        server.terminate()
        server.wait(10)
    print(f"\n{runs} concurrent runs, model answers after {options.delay} s\n")
    print("| runtime | runs | correct | wall s | peak threads | peak RSS GiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(_row("adk_actors (runs.start)", ours, runs))
    if peer is not None:
        print(_row("google-adk (Runner)", peer, runs))
        print(f"\nwall ratio (google-adk / ours): {peer['wall_s'] / ours['wall_s']:.2f}x")
    goals = (
        ours["wall_s"] < GOALS["wall_s"],
        ours["threads"] < GOALS["threads"],
        ours["rss"] / 2**30 < GOALS["rss_gib"],
    )
    print(f"goals (wall < 3 s, threads < 100, RSS < 4 GiB): {goals}")


if __name__ == "__main__":
    main()
