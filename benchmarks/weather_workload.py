"""The workload `runner.py` and `runs.py` share: one tool, one tool round, offline models.

Ours is a `ScriptedProvider(fn=model, inline=True)` (a pure function, run on the
event loop like the peer's); google-adk's is `FakeLlm`, a `BaseLlm` that asks for the
tool once and answers after the tool responded. Needs google-adk.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncGenerator
from typing import Any

import structlog
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types


def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def model(history: Any, tools: Any) -> dict[str, Any]:
    """Our offline model: the tool call first, the answer after the tool responded."""
    if history[-1].role == "tool":
        return {"text": "sunny"}
    return {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}


class FakeLlm(BaseLlm):
    """google-adk's offline model: the same two steps."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        if any(part.function_response for part in last.parts or []):
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="sunny")]))
        else:
            call = types.FunctionCall(name="get_weather", args={"city": "Tokyo"})
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )


def peer_runner() -> InMemoryRunner:
    agent = LlmAgent(name="weather", model=FakeLlm(model="fake"), tools=[get_weather])
    return InMemoryRunner(agent=agent, app_name="bench")


async def peer_one(runner: InMemoryRunner, user: str) -> str:
    """One google-adk run on a fresh session; its final text."""
    session = await runner.session_service.create_session(app_name="bench", user_id=user)
    message = types.Content(role="user", parts=[types.Part(text="weather?")])
    final = ""
    async for event in runner.run_async(user_id=user, session_id=session.id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            final = event.content.parts[0].text
    return final


def quiet_options(description: str) -> argparse.Namespace:
    """Parse ``--quick``; keep both runtimes' logs to warnings so they cost nothing."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    return parser.parse_args()
