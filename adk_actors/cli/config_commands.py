"""``adk config validate FILE``: check an agent config file without calling its model.

Everything `load_agent_file` checks (strict keys, types, no secrets, the provider's
own config rules, tool import paths) is checked; the model is not called and no API
key is needed. The modules the ``"tools"`` paths name are imported, as ``adk run``
would import them, so their top-level code runs: that is how a misspelled tool, a
class given instead of an instance, a bad parameter schema or two tools with one name
are found. ``--no-import-tools`` checks the paths' syntax only and imports nothing,
for a file whose modules should not run here.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import click
from rich.console import Console

from adk_actors.cli.local import load
from adk_actors.cli.output import CliError, Output
from adk_actors.cli.sanitize import markup
from adk_actors.config_file.tool_paths import without_tool_imports


@click.group("config")
def config_group() -> None:
    """Agent config files."""


@config_group.command("validate")
@click.argument("path")
@click.option(
    "--no-import-tools",
    "syntax_only",
    is_flag=True,
    help='Do not import the modules "tools" names (their code does not run); check '
    'only the "package.module:attribute" syntax of each path.',
)
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
def validate_command(path: str, syntax_only: bool, json_mode: bool) -> None:
    """Check an agent config file without calling its model (exit 0 when valid, 2 with
    the reason when not).

    The modules named in "tools" ARE imported, as `adk run` would import them, so
    their top-level code runs; use --no-import-tools for a file you do not trust.
    """
    output = Output(json_mode)
    try:
        with without_tool_imports() if syntax_only else nullcontext():
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
        "tool_count": len(agent_file.tools),
        "tools": agent_file.tool_names,
        "tool_paths": list(agent_file.tools),
        "tools_imported": agent_file.tools_imported,
        "runner_options": agent_file.runner_options,
    }
    output.emit(payload, _render)


def _render(console: Console, result: dict[str, Any]) -> None:
    model = f", {result['model']}" if result["model"] else ""
    if result["tools_imported"]:
        tools = ", ".join(result["tools"]) or "no tools"
    else:
        tools = f"tools not imported: {', '.join(result['tool_paths'])}"
    console.print(
        f"[green]valid[/]: {markup(result['path'])}: {markup(result['name'])} "
        f"({markup(result['provider'])}{markup(model)}), {markup(tools)}"
    )
