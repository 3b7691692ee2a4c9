"""The quickstart: a weather agent with one tool.

Runs on Gemini when GEMINI_API_KEY is set, otherwise on the offline scripted model
(same code path: the agent, its tool round and the supervision tree are real).
Run it with `make run`.
"""

from __future__ import annotations

import logging
import os

import adk_actors as adk
from supervision.logs import configure_console


@adk.tool
def get_weather(city: str) -> dict:
    """Get the weather for a city.

    Args:
        city: the city to look up
    """
    return {"city": city, "forecast": "sunny", "temperature_c": 21}


def config() -> dict:
    if os.environ.get("GEMINI_API_KEY"):
        return {
            "provider": "gemini",
            "model": os.environ.get("ADK_GEMINI_MODEL", "gemini-3.1-flash-lite"),
            "instructions": "You are a concise weather assistant.",
        }
    return {
        "provider": "scripted",  # offline: answers like a model that calls the tool once
        "script": [
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
            {"text": "It is sunny in Tokyo, about 21 °C."},
        ],
        "instructions": "You are a concise weather assistant.",
    }


def main() -> None:
    configure_console(logging.WARNING)  # the library's warnings, readable, on stderr
    chosen = config()
    print(f"provider: {chosen['provider']}")
    adk.start()
    agent = adk.spawn_agent("WeatherAgent", chosen, tools=[get_weather])
    print(f"spawned {agent} as {agent.pid}")
    question = "What is the weather in Tokyo?"
    print(f"user: {question}")
    answer = adk.prompt(agent, question)
    print(f"WeatherAgent: {answer}")
    print(f"agent status: {adk.agent_info(agent)}")
    adk.stop_agent(agent)
    adk.stop()


if __name__ == "__main__":
    main()
