"""``adk run`` and ``adk console``: a config file's agent, run in this process.

Sessions are in memory: they last as long as the command. A run that pauses (a tool
asking for confirmation) can be resumed in the console with ``/resume``; a one-shot
``adk run`` reports the pause and exits (use ``adk serve`` and ``adk resume`` for
runs that outlive a command).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

import adk_actors as adk
from adk_actors.cli.console import ConsoleLoop, read_terminal_line
from adk_actors.cli.local import (
    DEFAULT_APP,
    DEFAULT_USER,
    LocalAgent,
    TurnPrinter,
    follow_run,
    load_for_run,
    new_session_id,
    outcome_payload,
    pause_help,
)
from adk_actors.cli.output import EXIT_ERROR, EXIT_INTERRUPTED, CliError, Output
from adk_actors.outcomes import Paused
from providers.errors import AdkError

_TIMEOUT = click.FloatRange(min=0, min_open=True, max=86_400)


def _agent_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option("--config", "config_path", required=True, help="The agent config file."),
            click.option(
                "--app", "app_name", default=DEFAULT_APP, show_default=True, help="App name."
            ),
            click.option(
                "--user", "user_id", default=DEFAULT_USER, show_default=True, help="User id."
            ),
            click.option("--session", "session_id", default=None, help="Default: a new id."),
            click.option(
                "--timeout",
                type=_TIMEOUT,
                default=None,
                help="Seconds a run may take (default: the file's run_timeout, else 120).",
            ),
            click.option("--json", "json_mode", is_flag=True, help="Print JSON lines."),
        ]
    ):
        command = option(command)
    return command


@click.command("run")
@click.option("--message", "-m", required=True, help="The message to send.")
@_agent_options
def run_command(
    message: str,
    config_path: str,
    app_name: str,
    user_id: str,
    session_id: str | None,
    timeout: float | None,
    json_mode: bool,
) -> None:
    """Send one message to the config file's agent; stream its answer."""
    output = Output(json_mode)
    session_id = session_id or new_session_id()
    try:
        agent_file = load_for_run(config_path)
        with LocalAgent(agent_file, app_name, timeout) as local:
            run_id = local.start_run(user_id, session_id, message)
            printer = TurnPrinter(output, run_id)
            try:
                outcome = follow_run(run_id, printer)
            except KeyboardInterrupt:
                _cancel(run_id)
                output.note("interrupted: the run was cancelled", "yellow")
                raise SystemExit(EXIT_INTERRUPTED) from None
    except CliError as error:
        output.fail(error)
    payload = {
        "type": "outcome",
        "command": "run",
        "run_id": run_id,
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        **outcome_payload(outcome),
    }
    failed = payload["outcome"] == "failed"
    if json_mode:
        output.json(payload)
    elif payload["outcome"] == "completed":
        if not printer.printed_answer and payload.get("text"):
            output.text(payload["text"] + "\n")
        output.note(f"run {run_id} completed (session {session_id})")
    elif isinstance(outcome, Paused):
        what, _ = pause_help(outcome)
        output.note(f"paused: {what} (run {run_id})", "yellow")
        output.note(
            "a one-shot `adk run` cannot resume after it exits: use `adk console` "
            "(then /resume) or `adk serve` with `adk resume RUN_ID`"
        )
    elif payload["outcome"] == "cancelled":
        output.note(f"cancelled: {payload['reason']}", "yellow")
    if failed:
        if json_mode:
            raise SystemExit(EXIT_ERROR)
        output.fail(
            CliError(
                "run_failed",
                f"the run failed: {payload['reason']}",
                details=[payload["reason"]],
            )
        )


@click.command("console")
@_agent_options
def console_command(
    config_path: str,
    app_name: str,
    user_id: str,
    session_id: str | None,
    timeout: float | None,
    json_mode: bool,
) -> None:
    """Talk to the config file's agent, one line at a time (/help lists commands)."""
    output = Output(json_mode)
    try:
        agent_file = load_for_run(config_path)
        with LocalAgent(agent_file, app_name, timeout) as local:
            loop = ConsoleLoop(
                local, output, user_id, session_id or new_session_id(), read_terminal_line
            )
            try:
                summary = loop.run()
            except KeyboardInterrupt:
                if loop.paused_run_id is None:
                    output.note("interrupted")
                raise SystemExit(EXIT_INTERRUPTED) from None
    except CliError as error:
        output.fail(error)
    if json_mode:
        output.json(summary)
    else:
        output.note(
            f"console closed ({summary['outcome']}): {summary['turns']} turns, "
            f"last session {summary['session_id']}"
        )


def _cancel(run_id: str) -> None:
    try:
        adk.runs.cancel(run_id, "cli_interrupted")
    except AdkError:
        pass
