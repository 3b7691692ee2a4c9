"""``adk serve``: the daemon, in the foreground until SIGINT or SIGTERM.

A thin wrapper: the daemon itself (`adk_actors.daemon.serve.main`) checks
``ADK_DEV_TOKEN`` and the bind address, prints one JSON line with ``"status":
"listening"`` and its ``"url"``, and returns the exit code once it has drained.
"""

from __future__ import annotations

import os
import sys

import click

from adk_actors.daemon.serve import main as serve_main


@click.command("serve")
@click.option("--config", "config_path", default=None, help="The agent config file to serve.")
@click.option(
    "--host", "--ip", "host", default="127.0.0.1", show_default=True, help="127.0.0.1 or ::1."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65_535),
    default=8080,
    show_default=True,
    help="0 picks a free port.",
)
@click.option(
    "--data",
    "data_dir",
    default="./.adk-data",
    show_default=True,
    help="Where sessions are kept (LMDB).",
)
@click.option(
    "--a2a",
    "a2a",
    is_flag=True,
    default=False,
    help="Also serve the agent over A2A 1.0 (card at /.well-known/agent-card.json, "
    "JSON-RPC at /a2a/v1, bearer: ADK_DEV_TOKEN).",
)
def serve_command(config_path: str | None, host: str, port: int, data_dir: str, a2a: bool) -> None:
    """Run the daemon: the /dev/v1 API and the browser console at /dev."""
    raise SystemExit(serve_main(config_path, host, port, data_dir, os.environ, sys.stdout, a2a=a2a))
