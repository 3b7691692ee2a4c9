"""A google-adk `EvalSet` built with google-adk's own pydantic models.

`benchmarks/evaluation.py` evaluates it with google-adk's `AgentEvaluator` and, once
converted (`adk_actors.evaluation.from_google_adk`), with ours. Run as a script it
writes the set's JSON, the way google-adk saves an ``.evalset.json`` file (snake_case
field names, or camelCase aliases with ``--by-alias``), for the converter's test
fixtures: ``python benchmarks/_adk_peer_app/weather_evalset.py OUT.json [--by-alias]``.
Needs google-adk (``.venv-bench``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from google.adk.evaluation.eval_case import (
    EvalCase,
    IntermediateData,
    Invocation,
    SessionInput,
)
from google.adk.evaluation.eval_set import EvalSet
from google.genai import types

CITIES = ("Tokyo", "Paris", "Lima", "Oslo", "Cairo", "Quito", "Perth", "Seoul")


def _text(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


def weather_invocation(invocation_id: str, city: str) -> Invocation:
    """A question about `city`: one ``get_weather`` call, then the answer ``sunny``."""
    return Invocation(
        invocation_id=invocation_id,
        user_content=_text("user", f"What is the weather in {city}?"),
        final_response=_text("model", "sunny"),
        intermediate_data=IntermediateData(
            tool_uses=[types.FunctionCall(name="get_weather", args={"city": city})]
        ),
    )


def weather_eval_set(case_count: int = 2) -> EvalSet:
    """`case_count` cases; the first also greets (a turn without tools) first."""
    cases = []
    for index in range(case_count):
        city = CITIES[index % len(CITIES)]
        conversation = [weather_invocation(f"inv-{index}-weather", city)]
        if index == 0:
            greeting = Invocation(
                invocation_id=f"inv-{index}-hello",
                user_content=_text("user", "Hello"),
                final_response=_text("model", "Hello! Ask me about the weather."),
                intermediate_data=IntermediateData(tool_uses=[]),
            )
            conversation = [greeting, *conversation]
        cases.append(
            EvalCase(
                eval_id=f"weather-{city.lower()}-{index}",
                conversation=conversation,
                session_input=SessionInput(
                    app_name="weather", user_id="eval-user", state={"units": "metric"}
                ),
            )
        )
    return EvalSet(
        eval_set_id="weather",
        name="Weather questions",
        description="Each case asks for one city's weather.",
        eval_cases=cases,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--by-alias", action="store_true")
    parser.add_argument("--cases", type=int, default=2)
    options = parser.parse_args()
    eval_set = weather_eval_set(options.cases)
    Path(options.output).write_text(
        eval_set.model_dump_json(indent=2, by_alias=options.by_alias) + "\n"
    )


if __name__ == "__main__":
    main()
