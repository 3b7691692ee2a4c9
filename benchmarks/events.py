"""Event encode+decode: our msgspec `Event` against google-adk's pydantic `Event`.

The same payloads on both sides, in one process run: a one-line user message, a
model turn with a function call and a state delta, and a 20-part model turn with
grounding-sized metadata. Each round encodes an event to JSON and decodes it back
(our `events.encode`/`events.decode` vs `model_dump_json`/`model_validate_json`).

Needs google-adk (`make bench` installs it in `.venv-bench`, apart from the test venv).
Usage: ``python benchmarks/events.py [--quick]``
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.metadata
import platform
import time
from collections.abc import Callable
from typing import Any

from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions as AdkEventActions
from google.genai import types

from adk_actors import events
from adk_actors.events import Event, EventActions
from providers import content


def payloads() -> dict[str, tuple[Event, Any]]:
    """name -> (our event, google-adk's event) carrying the same data."""
    small_ours = Event.new("user", "inv-1", content.from_text("What is the weather in Tokyo?"))
    small_peer = AdkEvent(
        author="user",
        invocation_id="inv-1",
        content=types.Content(
            role="user", parts=[types.Part(text="What is the weather in Tokyo?")]
        ),
    )
    call_args = {"city": "Tokyo", "units": "metric", "days": 3}
    state = {"user:last_city": "Tokyo", "temp:turn": 4, "app:version": "1.2.3"}
    call_ours = Event.new(
        "WeatherAgent",
        "inv-1",
        content.new([content.function_call("get_weather", call_args, id="call_1")], role="model"),
        actions=EventActions(state_delta=state),
    )
    call_peer = AdkEvent(
        author="WeatherAgent",
        invocation_id="inv-1",
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id="call_1", name="get_weather", args=call_args
                    )
                )
            ],
        ),
        actions=AdkEventActions(state_delta=state),
    )
    texts = [
        f"Paragraph {i}: supervisors isolate failures and restart what broke. " * 4
        for i in range(20)
    ]
    metadata = {
        "webSearchQueries": [f"query {i}" for i in range(10)],
        "groundingChunks": [
            {"web": {"uri": f"https://example.com/{i}", "title": f"t{i}"}} for i in range(20)
        ],
    }
    big_ours = Event.new(
        "WeatherAgent",
        "inv-1",
        content.new(texts, role="model"),
        is_final=True,
        provider_metadata={
            "schema_version": 1,
            "provider": "gemini",
            "type": "google_search_grounding",
            "metadata": metadata,
        },
    )
    big_peer = AdkEvent(
        author="WeatherAgent",
        invocation_id="inv-1",
        content=types.Content(role="model", parts=[types.Part(text=t) for t in texts]),
        custom_metadata={"provider_metadata": metadata},
    )
    return {
        "user message": (small_ours, small_peer),
        "tool call + state": (call_ours, call_peer),
        "20 parts + grounding": (big_ours, big_peer),
    }


def per_second(run: Callable[[], None], count: int, rounds: int) -> float:
    best = 0.0
    for _ in range(rounds):
        gc.collect()
        started = time.perf_counter()
        for _ in range(count):
            run()
        best = max(best, count / (time.perf_counter() - started))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    count, rounds = (2_000, 1) if options.quick else (20_000, 5)
    print(f"# events benchmark  {datetime.date.today()}  python {platform.python_version()}")
    print(
        f"# msgspec {importlib.metadata.version('msgspec')}  google-adk {importlib.metadata.version('google-adk')}  pydantic {importlib.metadata.version('pydantic')}"
    )
    print(f"\nencode + decode, best of {rounds} x {count:,}: ours / google-adk / ratio")
    for name, (ours, peer) in payloads().items():
        assert events.decode(events.encode(ours)) == ours
        assert (
            AdkEvent.model_validate_json(peer.model_dump_json(exclude_none=True)).author
            == peer.author
        )
        our_rate = per_second(lambda ours=ours: events.decode(events.encode(ours)), count, rounds)
        peer_rate = per_second(
            lambda peer=peer: AdkEvent.model_validate_json(peer.model_dump_json(exclude_none=True)),
            count,
            rounds,
        )
        print(f"  {name:22s} {our_rate:12,.0f}/s {peer_rate:12,.0f}/s {our_rate / peer_rate:7.1f}x")


if __name__ == "__main__":
    main()
