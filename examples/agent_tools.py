"""Tools for the example agent config files, named there by import path.

`examples/agent.scripted.json` lists ``"examples.agent_tools:get_weather"`` and
``"examples.agent_tools:publish_release"``; run the CLI or `adk serve` from the
repository root so ``examples`` is importable.
"""

from __future__ import annotations

from typing import Any

import adk_actors as adk


@adk.tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the weather for a city.

    Args:
        city: the city to look up
    """
    return {"city": city, "forecast": "sunny", "temperature_c": 21}


class PublishRelease(adk.Tool):
    """Publishes a release; a person must approve every call first."""

    name = "publish_release"
    description = "Publish a release of the project."
    parameters = {
        "type": "object",
        "properties": {"version": {"type": "string", "description": "the version to publish"}},
        "required": ["version"],
        "additionalProperties": False,
    }
    require_confirmation = True

    def execute(self, args: dict[str, Any], ctx: adk.ToolContext) -> dict[str, Any]:
        return {"published": True, "version": args["version"]}


publish_release = PublishRelease()
