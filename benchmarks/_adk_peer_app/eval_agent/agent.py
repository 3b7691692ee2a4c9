"""The peer's agent for `benchmarks/evaluation.py`: an offline `BaseLlm` that answers
the weather eval set (`weather_evalset.py`) the way our scripted model does.

It greets a "Hello"; asked for a city's weather, it calls ``get_weather`` for that
city, then answers ``sunny`` once the tool responded. No network, no delay.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

GREETING = "Hello! Ask me about the weather."

for _name in ("google_adk", "google.adk"):
    logging.getLogger(_name).setLevel(logging.ERROR)


def get_weather(city: str) -> dict[str, str]:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def reply(last_text: str | None, tool_responded: bool) -> dict[str, object]:
    """The step both sides' models take: the same function, two response types."""
    if tool_responded:
        return {"text": "sunny"}
    if last_text == "Hello":
        return {"text": GREETING}
    city = re.search(r"weather in (\w+)", last_text or "")
    return {"call": {"name": "get_weather", "args": {"city": city.group(1) if city else "?"}}}


class EvalLlm(BaseLlm):
    """google-adk's offline model for the eval set."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = llm_request.contents[-1].parts or []
        responded = any(part.function_response for part in parts)
        text = next((part.text for part in parts if part.text), None)
        step = reply(text, responded)
        if "call" in step:
            call = step["call"]
            assert isinstance(call, dict)
            part = types.Part(
                function_call=types.FunctionCall(name=call["name"], args=call["args"])
            )
        else:
            part = types.Part(text=str(step["text"]))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


root_agent = LlmAgent(name="weather", model=EvalLlm(model="offline"), tools=[get_weather])
