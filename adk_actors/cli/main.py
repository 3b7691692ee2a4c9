"""The ``adk`` console script: every command, and how the process ends.

Logs go to stderr only when asked (``-v``: INFO, ``-vv``: DEBUG, through
`supervision.configure_console`); otherwise the CLI prints nothing but its own
output. Exit codes are in `adk_actors.cli.output`.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from adk_actors.cli.config_commands import config_group
from adk_actors.cli.doctor import doctor_command
from adk_actors.cli.local_commands import console_command, run_command
from adk_actors.cli.output import EXIT_INTERRUPTED
from adk_actors.cli.remote import REMOTE_COMMANDS
from supervision import configure_console


class _Commands(click.Group):
    """The commands, some of them loaded when they run (or a help page lists them):
    the daemon, evaluation, the stress harness and MCP bring heavy libraries (uvicorn
    and starlette, the MCP SDK, matplotlib), which ``adk run`` and the daemon's clients
    never need, so every other command starts without them."""

    _ON_FIRST_USE = {
        "eval": ("adk_actors.cli.eval_command", "eval_group"),
        "mcp": ("adk_actors.cli.mcp_command", "mcp_group"),
        "serve": ("adk_actors.cli.serve", "serve_command"),
        "stress": ("adk_actors.cli.stress_command", "stress_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self._ON_FIRST_USE])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = self._ON_FIRST_USE.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        command: click.Command = getattr(importlib.import_module(where[0]), where[1])
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="Logs on stderr (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """adk: run agents, serve the developer API and console, inspect a daemon.

    Model keys stay in the environment (GEMINI_API_KEY); the developer API's bearer
    token is ADK_DEV_TOKEN. Exit codes: 0 ok, 1 error, 2 usage.
    """
    if verbose:
        configure_console(logging.DEBUG if verbose > 1 else logging.INFO)
    else:
        logging.getLogger().addHandler(logging.NullHandler())


for _command in (
    doctor_command,
    config_group,
    run_command,
    console_command,
    *REMOTE_COMMANDS,
):
    cli.add_command(_command)


def main() -> None:
    """The console script's entry point."""
    try:
        cli.main(prog_name="adk")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
