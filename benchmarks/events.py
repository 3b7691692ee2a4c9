"""Event encode+decode: our msgspec `Event` against google-adk's pydantic `Event`.

The same payloads on both sides, in one process run: a one-line user message, a
model turn with a function call and a state delta, and a 20-part model turn with
grounding-sized metadata. Each round encodes an event to JSON and decodes it back
(our `events.encode`/`events.decode` vs `model_dump_json`/`model_validate_json`).

The two sides run in turn, round by round (the first side alternating); each round
gives one ratio (ours / google-adk, both measured in that round) and the headline is
the median of those per-round ratios, printed with their min-max. The machine facts and
the load average come first.

Needs google-adk (`make bench` installs it in `.venv-bench`, apart from the test venv).
Usage: ``python benchmarks/events.py [--quick] [--rounds N]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from _bench import (
    Compared,
    OtherCpu,
    fmt_list,
    fmt_share,
    interleaved,
    load_average,
    print_facts,
    print_table,
)
from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions as AdkEventActions
from google.genai import types

from adk_actors import events
from adk_actors.events import Event, EventActions
from providers import content

ROUNDS = 9
# Encode+decode pairs per round and side: the 20-part peer does about 2,300 a second.
COUNTS = {"user message": 10_000, "tool call + state": 10_000, "20 parts + grounding": 5_000}


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


def per_second(run: Callable[[], None], count: int) -> Callable[[], float]:
    """A side for `interleaved`: `count` runs of `run`, as runs per second."""

    def side() -> float:
        started = time.perf_counter()
        for _ in range(count):
            run()
        return count / (time.perf_counter() - started)

    return side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--rounds", type=int, help=f"measured rounds (default {ROUNDS})")
    options = parser.parse_args()
    scale, rounds = (10, 3) if options.quick else (1, ROUNDS)
    rounds = options.rounds or rounds
    print_facts(
        "events benchmark: encode + decode, ours (msgspec) vs google-adk (pydantic)"
        + (" (quick)" if options.quick else ""),
        "msgspec",
        "google-adk",
        "pydantic",
    )
    rows = []
    meter = OtherCpu()
    for name, (ours, peer) in payloads().items():
        assert events.decode(events.encode(ours)) == ours
        assert (
            AdkEvent.model_validate_json(peer.model_dump_json(exclude_none=True)).author
            == peer.author
        )
        count = COUNTS[name] // scale
        sides = {
            "ours": per_second(lambda ours=ours: events.decode(events.encode(ours)), count),
            "google-adk": per_second(
                lambda peer=peer: AdkEvent.model_validate_json(
                    peer.model_dump_json(exclude_none=True)
                ),
                count,
            ),
        }
        interleaved(sides, 1)  # warm-up
        others: list[float | None] = []
        runs = interleaved(sides, rounds, others)
        rows.append(
            Compared(
                name=name,
                unit="events/s",
                ours_runs=runs["ours"],
                peer_runs=runs["google-adk"],
                others=others,
                detail=(
                    f"{count:,} a round; runs {fmt_list(runs['ours'])} vs google-adk "
                    f"{fmt_list(runs['google-adk'])}"
                ),
            )
        )
    print_table(rows, ours="ours", peer="google-adk")
    print(
        f"\n{rounds} rounds per payload after a warm-up, the two sides in turn (first side "
        "alternating); ours/google-adk columns: each side's median round; ratio = ours / "
        "google-adk per round, headline = median of the per-round ratios; other processes "
        f"used {fmt_share(meter.share())} of the CPUs during the run; load avg at the end "
        f"{load_average()}"
    )


if __name__ == "__main__":
    main()
