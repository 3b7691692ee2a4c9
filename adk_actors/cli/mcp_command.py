"""``adk mcp serve-stdio --config agent.json``: a config file's agent as an MCP server
over stdio.

Loads the file as ``adk run --config`` does (a missing model key is refused before
anything starts), starts the runtime, spawns the agent and serves it as a tool taking
one ``request`` string, plus the file's own tools, with the MCP SDK's stdio transport
(`adk_actors.mcp.stdio_server`). stdout carries only MCP messages: errors and logs
(``adk -v``) go to stderr. Exits 0 when the client closes stdin.

Also runnable as ``python -m adk_actors.cli.mcp_command serve-stdio --config F``.
"""

from __future__ import annotations

import logging
import sys

import click

import adk_actors as adk
from adk_actors.cli.local import load_for_run
from adk_actors.cli.output import CliError, Output
from adk_actors.config_file import spawn_from_file
from adk_actors.mcp.stdio_server import DEFAULT_REQUEST_TIMEOUT, serve_stdio
from providers.errors import AdkError

_TIMEOUT = click.FloatRange(min=0.001, max=3600.0)


@click.group("mcp")
def mcp_group() -> None:
    """Serve agents over MCP (the Model Context Protocol)."""


@mcp_group.command("serve-stdio")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The agent config file (JSON).",
)
@click.option(
    "--timeout",
    type=_TIMEOUT,
    default=DEFAULT_REQUEST_TIMEOUT,
    show_default=True,
    help="Seconds one tool call (an agent's answer included) may take.",
)
def serve_stdio_command(config_path: str, timeout: float) -> None:
    """Serve the config file's agent (a tool taking a request) and its tools over stdio."""
    output = Output(True, stdout=sys.stderr)  # stdout is the protocol's alone
    try:
        agent_file = load_for_run(config_path)
        adk.start()
        try:
            agent = spawn_from_file(agent_file)
        except AdkError as error:
            raise CliError.from_adk(error) from None
        try:
            serve_stdio(
                [agent, *agent_file.tool_objects],
                request_timeout=timeout,
                name=f"adk-{agent_file.name}",
            )
        except AdkError as error:
            raise CliError.from_adk(error) from None
        finally:
            try:
                adk.stop_agent(agent)
            except AdkError:
                pass
    except CliError as error:
        adk.stop()
        output.fail(error)
    adk.stop()


if __name__ == "__main__":
    logging.getLogger().addHandler(logging.NullHandler())
    mcp_group(prog_name="adk mcp")
