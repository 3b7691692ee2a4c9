"""Tools named by import path in the browser tests' agent config files: one that needs
a human's approval (``"tests.browser.console_tools:publish_release"``) and one that
suspends on a long-running operation (``...:start_export``)."""

from __future__ import annotations

from typing import Any

import adk_actors as adk
from adk_actors.tools.suspension import long_running


class PublishRelease(adk.Tool):
    """Publishes a release once someone approves the call."""

    name = "publish_release"
    description = "Publish a release (asks a human first)."
    parameters = {
        "type": "object",
        "properties": {"version": {"type": "string"}},
        "required": ["version"],
    }

    def require_confirmation(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"required": True, "hint": f"Publish {args['version']} to production"}

    def execute(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"published": args["version"]}


publish_release = PublishRelease()


class StartExport(adk.Tool):
    """Starts an external export and suspends on it: a pause the console cannot answer."""

    name = "start_export"
    description = "Start an export that finishes later."
    parameters = {"type": "object", "properties": {}}

    def execute(self, args: dict[str, Any], ctx: Any) -> Any:
        return long_running("export-42", "The export is running.")


start_export = StartExport()
