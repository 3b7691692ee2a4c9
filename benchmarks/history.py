"""History benchmark: what one Gemini turn costs as the history grows.

One `agenerate` turn against a local FakeGemini (in a child process, so the figures
are only the caller's CPU) with 10, 100 and 1,000 history messages (user text, model
function calls with thought signatures, tool responses, model text with thoughts):

* ``google-genai``: the old way, measured directly through google-genai's async
  client: every message built as `types.Content`/`types.Part` each turn and handed
  to ``client.aio.models.generate_content`` (which validates and converts them);
* ``ours``: `providers.protocol.agenerate` (prebuilt wire JSON, conversion cache warm,
  as it is from the second turn of a conversation on);
* ``ours, cold``: the same with the conversion cache emptied before every turn.

Each side runs its turns back to back on one event loop, several rounds; the best
round is kept. CPU is `time.process_time`, wall is `time.perf_counter`, both per turn.

Then a whole Runner turn (session read, context, model call, session writes) by
session history size, in memory and in LMDB, with the 1,000/10 ratio against its 2x
goal (`_history_runner.py`; ``--runner`` runs only that part, ``--no-runner`` skips it).

Usage: ``python benchmarks/history.py [--quick] [--repeats N] [--runner | --no-runner]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import _history_runner
import httpx
from google import genai
from google.genai import types

from providers import content, protocol
from providers.content import (
    Content,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
)
from providers.fake_gemini import FakeGemini, FakeResponse, candidate
from providers.gemini import requests, wire
from providers.gemini.config import check

SIZES = (10, 100, 1000)
KEY = "benchmark-key"
TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@dataclass(frozen=True)
class Config:
    turns: dict[int, int]
    """Turns per round, by history size."""
    repeats: int


FULL = Config(turns={10: 200, 100: 40, 1000: 6}, repeats=3)
QUICK = Config(turns={10: 20, 100: 5, 1000: 2}, repeats=1)


# -- the fake, in a child process ------------------------------------------------------------


def serve(connection: Connection) -> None:
    """Child process: answer every model call at once with a short text."""
    fake = FakeGemini()
    fake.handler = lambda request: FakeResponse(body=candidate([{"text": "ok"}]))
    fake.start()
    connection.send(fake.base_url)
    connection.recv()  # until the parent is done
    fake.stop()


# -- histories ---------------------------------------------------------------------------------


def history(size: int) -> list[Content]:
    """`size` messages cycling user text, a signed function call, its tool response and
    a model answer with a thought; then the new user question."""
    messages = []
    for n in range(size):
        kind = n % 4
        if kind == 0:
            messages.append(content.from_text(f"question {n}: what is the weather in city {n}?"))
        elif kind == 1:
            call = content.function_call(
                "get_weather",
                {"city": f"City {n}", "units": "metric"},
                id=f"call_{n}",
                thought_signature=base64.b64encode(os.urandom(48)).decode(),
            )
            messages.append(content.new([call], role="model"))
        elif kind == 2:
            response = content.function_response(
                "get_weather",
                {"sky": "sunny", "temperature": n % 35, "wind": {"speed": 3, "dir": "N"}},
                id=f"call_{n - 1}",
            )
            messages.append(content.new([response], role="tool"))
        else:
            messages.append(
                content.new(
                    [content.text("checking the forecast", thought=True), f"Sunny in City {n}."],
                    role="model",
                )
            )
    return [*messages, content.from_text("and tomorrow?")]


def old_part(part: Part) -> types.Part:
    """A part as google-genai types, built the way the provider used to build them."""

    def signature(value: str | None) -> bytes | None:
        return base64.b64decode(value) if value else None

    if isinstance(part, TextPart):
        return types.Part(
            text=part.text,
            thought=part.thought or None,
            thought_signature=signature(part.thought_signature),
        )
    if isinstance(part, InlineDataPart):
        return types.Part(
            inline_data=types.Blob(mime_type=part.mime_type, data=base64.b64decode(part.data))
        )
    if isinstance(part, FileDataPart):
        return types.Part(
            file_data=types.FileData(file_uri=part.file_uri, mime_type=part.mime_type)
        )
    if isinstance(part, FunctionCallPart):
        return types.Part(
            function_call=types.FunctionCall(id=part.id, name=part.name, args=part.args),
            thought_signature=signature(part.thought_signature),
        )
    assert isinstance(part, FunctionResponsePart)
    return types.Part(
        function_response=types.FunctionResponse(id=part.id, name=part.name, response=part.response)
    )


def old_contents(messages: list[Content]) -> list[types.Content]:
    return [
        types.Content(
            role="model" if m.role == "model" else "user", parts=[old_part(p) for p in m.parts]
        )
        for m in messages
    ]


# -- sides -------------------------------------------------------------------------------------

Turn = Callable[[], Awaitable[Any]]


def old_turn(provider_config: dict[str, Any], messages: list[Content]) -> Turn:
    """A turn through plain google-genai (async, on httpx like ours)."""
    settings = check(provider_config)
    client = genai.Client(
        api_key=KEY,
        http_options=types.HttpOptions(
            base_url=settings.base_url,
            httpx_client=httpx.Client(),
            httpx_async_client=httpx.AsyncClient(),
        ),
    )

    async def turn() -> Any:
        request = wire.generate_config(settings, [TOOL], None)
        return await client.aio.models.generate_content(
            model=settings.model, contents=old_contents(messages), config=request
        )

    return turn


def our_turn(provider_config: dict[str, Any], messages: list[Content], cold: bool) -> Turn:
    async def turn() -> Any:
        if cold:
            requests.DEFAULT_CACHE.clear()
        return await protocol.agenerate(provider_config, messages, [TOOL])

    return turn


SIDES: dict[str, Callable[[dict[str, Any], list[Content]], Turn]] = {
    "google-genai": old_turn,
    "ours": lambda config, messages: our_turn(config, messages, cold=False),
    "ours, cold": lambda config, messages: our_turn(config, messages, cold=True),
}


def measure(
    make: Callable[[dict[str, Any], list[Content]], Turn],
    provider_config: dict[str, Any],
    messages: list[Content],
    turns: int,
) -> tuple[float, float]:
    """(CPU ms, wall ms) per turn, after one warm-up turn, on a fresh event loop."""

    async def rounds() -> tuple[float, float]:
        turn = make(provider_config, messages)
        await turn()  # warm-up: client, connection, cache
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(turns):
            await turn()
        return (
            (time.process_time() - cpu) / turns * 1e3,
            (time.perf_counter() - wall) / turns * 1e3,
        )

    return asyncio.run(rounds())


@dataclass
class Row:
    size: int
    cpu: dict[str, float]
    wall: dict[str, float]


def bench(base_url: str, config: Config) -> list[Row]:
    provider_config = {"provider": "gemini", "model": "m", "api_key": KEY, "base_url": base_url}
    rows = []
    for size in SIZES:
        messages = history(size)
        cpu: dict[str, float] = {}
        wall: dict[str, float] = {}
        for _ in range(config.repeats):
            for side, make in SIDES.items():
                side_cpu, side_wall = measure(make, provider_config, messages, config.turns[size])
                cpu[side] = min(cpu.get(side, float("inf")), side_cpu)
                wall[side] = min(wall.get(side, float("inf")), side_wall)
        rows.append(Row(size, cpu, wall))
        print(f"  {size} messages done", file=sys.stderr, flush=True)
    return rows


# -- output ------------------------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    header = ["messages"]
    for side in SIDES:
        header += [f"{side} cpu", f"{side} wall"]
    header.append("cpu ratio")
    lines = [
        [f"{row.size:,}"]
        + [f"{value[side]:.2f}" for side in SIDES for value in (row.cpu, row.wall)]
        + [f"{row.cpu['google-genai'] / row.cpu['ours']:.0f}x"]
        for row in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    for cells in [header, ["-" * w for w in widths], *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
    print("\n(ms per turn; cpu ratio = google-genai cpu / ours cpu)")
    first, last = rows[0], rows[-1]
    extra = last.size - first.size
    for side in SIDES:
        per_message = (last.cpu[side] - first.cpu[side]) / extra * 1e3
        print(f"{side}: {per_message:.1f} µs of CPU per extra history message")


def machine_facts() -> list[str]:
    facts = [
        f"date     {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"cpus     {os.cpu_count()}",
        f"python   {platform.python_implementation()} {platform.python_version()}",
        f"genai    {genai.__version__}",
    ]
    if hasattr(os, "getloadavg"):
        facts.append("load     " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Gemini turn cost by history size")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--repeats", type=int, help="rounds per side (the best is kept)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--runner", action="store_true", help="only the Runner turn table")
    only.add_argument("--no-runner", action="store_true", help="skip the Runner turn table")
    args = parser.parse_args(argv)
    if args.runner:
        for fact in machine_facts():
            print("  " + fact)
        _history_runner.main(args.quick)
        return 0
    config = QUICK if args.quick else FULL
    if args.repeats:
        config = Config(config.turns, args.repeats)
    print("one Gemini agenerate turn by history size" + (" (quick)" if args.quick else ""))
    for fact in machine_facts():
        print("  " + fact)
    print(flush=True)
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=serve, args=(child,), daemon=True)
    server.start()
    try:
        rows = bench(parent.recv(), config)
    finally:
        parent.send("done")
        server.join(10)
    print_table(rows)
    print(
        f"\ntotal {time.perf_counter() - started:.1f} s; best of {config.repeats} rounds per side"
    )
    if not args.no_runner:
        _history_runner.main(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
