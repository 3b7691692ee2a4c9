"""``adk config validate FILE``: check an agent config file without running it.

Everything `load_agent_file` checks (strict keys, types, no secrets, the provider's
own config rules, tool import paths) is checked; the model is not called and no API
key is needed.
"""

from __future__ import annotations

import click
from rich.console import Console
from rich.markup import escape

from adk_actors.cli.local import load
from adk_actors.cli.output import CliError, Output
from adk_actors.config_file import AgentFile


@click.group("config")
def config_group() -> None:
    """Agent config files."""


@config_group.command("validate")
@click.argument("path")
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
def validate_command(path: str, json_mode: bool) -> None:
    """Check an agent config file (exit 0 when valid, 2 with the reason when not)."""
    output = Output(json_mode)
    try:
        agent_file = load(path)
    except CliError as error:
        output.fail(error)
    payload = {
        "command": "config_validate",
        "status": "valid",
        "path": path,
        "name": agent_file.name,
        "provider": agent_file.provider,
        "model": agent_file.model,
        "tool_count": len(agent_file.tool_objects),
        "tools": agent_file.tool_names,
        "runner_options": agent_file.runner_options,
    }
    output.emit(payload, lambda console: _render(console, path, agent_file))


def _render(console: Console, path: str, agent_file: AgentFile) -> None:
    model = f", {agent_file.model}" if agent_file.model else ""
    tools = ", ".join(agent_file.tool_names) or "no tools"
    console.print(
        f"[green]valid[/]: {escape(path)}: {escape(agent_file.name)} "
        f"({agent_file.provider}{escape(model)}), {escape(tools)}"
    )
