"""The developer-API commands: ``adk inspect ...``, ``adk session ...``, ``adk resume``
and ``adk cancel``, each one request to a running ``adk serve`` (`devapi`).

Each prints the daemon's JSON answer as it is with ``--json``, or a readable view.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from adk_actors.cli.devapi import (
    DEFAULT_URL,
    DevApiClient,
    api_path,
    check_base_url,
    check_id,
    developer_token,
)
from adk_actors.cli.output import (
    EXIT_REFUSED,
    CliError,
    Output,
    Render,
    render_document,
    render_session,
    table_of,
)

URL_VARIABLE = "ADK_DEV_URL"


def _remote_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--url",
        default=DEFAULT_URL,
        envvar=URL_VARIABLE,
        show_default=True,
        help=f"The daemon's base URL (or ${URL_VARIABLE}); http only to loopback.",
    )(command)
    return click.option("--json", "json_mode", is_flag=True, help="Print the JSON answer.")(command)


def _session_arguments(command: Callable[..., Any]) -> Callable[..., Any]:
    """APP USER SESSION, the arguments that name one session."""
    for name in ("session", "user", "app"):
        command = click.argument(name)(command)
    return command


def _call(
    json_mode: bool,
    url: str,
    method: str,
    segments: tuple[str, ...],
    body: Any = None,
    render: Render = render_document,
) -> None:
    """One request to ``/dev/v1/SEGMENTS...`` (each segment checked and encoded before
    anything is sent) and its answer, printed."""
    output = Output(json_mode)
    try:
        path = api_path(*segments)
        client = DevApiClient(check_base_url(url), developer_token())
        answer = client.request(method, path, body)
    except CliError as error:
        output.fail(error)
    output.emit(answer, render)


def _json_argument(text: str, code: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise CliError(code, "the value is not valid JSON", exit_code=EXIT_REFUSED) from None


# -- adk inspect ----------------------------------------------------------------------


@click.group("inspect")
def inspect_group() -> None:
    """Inspect a running daemon (agents, runs, sessions, diagnostics)."""


@inspect_group.command("agents")
@_remote_options
def inspect_agents(url: str, json_mode: bool) -> None:
    """List the daemon's registered agents."""
    _call(json_mode, url, "GET", ("agents",), render=_render_list("agents"))


@inspect_group.command("run")
@click.argument("run_id")
@_remote_options
def inspect_run(run_id: str, url: str, json_mode: bool) -> None:
    """Show a run's state, outcome and parent/resume links."""
    _call(json_mode, url, "GET", ("runs", run_id))


@inspect_group.command("sessions")
@click.argument("app")
@click.argument("user")
@_remote_options
def inspect_sessions(app: str, user: str, url: str, json_mode: bool) -> None:
    """List a user's sessions in an app, newest first."""
    _call(json_mode, url, "GET", ("sessions", app, user), render=_render_list("sessions"))


@inspect_group.command("session")
@_session_arguments
@_remote_options
def inspect_session(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Show one session: its state and events."""
    _call(json_mode, url, "GET", ("sessions", app, user, session), render=render_session)


@inspect_group.command("diagnostics")
@_remote_options
def inspect_diagnostics(url: str, json_mode: bool) -> None:
    """Show the daemon's context capabilities and configured sources (no content)."""
    _call(json_mode, url, "GET", ("diagnostics",))


@inspect_group.command("context")
@_session_arguments
@_remote_options
def inspect_context(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Explain one session's context: counts and fingerprint (no events or state)."""
    _call(json_mode, url, "GET", ("context", app, user, session))


# -- adk session ----------------------------------------------------------------------


@click.group("session")
def session_group() -> None:
    """Create, change or delete a session on a running daemon."""


@session_group.command("create")
@_session_arguments
@_remote_options
def session_create(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Create a session with this id."""
    try:
        check_id(session)  # sent in the body: the same rule as an id in the path
    except CliError as error:
        Output(json_mode).fail(error)
    segments = ("sessions", app, user)
    _call(json_mode, url, "POST", segments, {"session_id": session}, render=render_session)


@session_group.command("state")
@_session_arguments
@click.option("--delta-json", required=True, help='The state delta, e.g. \'{"mode": "trace"}\'.')
@_remote_options
def session_state(
    app: str, user: str, session: str, delta_json: str, url: str, json_mode: bool
) -> None:
    """Apply a (non-secret) state delta to a session."""
    output = Output(json_mode)
    try:
        delta = _json_argument(delta_json, "invalid_delta_json")
    except CliError as error:
        output.fail(error)
    if not isinstance(delta, dict) or not delta:
        output.fail(
            CliError(
                "state_delta_must_be_nonempty_object",
                "--delta-json is a non-empty object",
                exit_code=EXIT_REFUSED,
            )
        )
    segments = ("sessions", app, user, session, "state")
    _call(json_mode, url, "POST", segments, {"state_delta": delta}, render=render_session)


@session_group.command("delete")
@_session_arguments
@_remote_options
def session_delete(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Delete one session."""
    _call(json_mode, url, "DELETE", ("sessions", app, user, session))


# -- adk resume / adk cancel ----------------------------------------------------------


@click.command("resume")
@click.argument("run_id")
@click.option(
    "--response-json",
    required=True,
    help="The paused run's answer; for a tool confirmation '{\"confirmed\": true}'.",
)
@_remote_options
def resume_command(run_id: str, response_json: str, url: str, json_mode: bool) -> None:
    """Resume a paused run on a running daemon; prints the new run's id."""
    output = Output(json_mode)
    try:
        response = _json_argument(response_json, "invalid_response_json")
    except CliError as error:
        output.fail(error)
    _call(json_mode, url, "POST", ("runs", run_id, "resume"), {"tool_response": response})


@click.command("cancel")
@click.argument("run_id")
@_remote_options
def cancel_command(run_id: str, url: str, json_mode: bool) -> None:
    """Ask a running daemon to cancel a run."""
    _call(json_mode, url, "DELETE", ("runs", run_id))


REMOTE_COMMANDS = (inspect_group, session_group, resume_command, cancel_command)


# -- human views ----------------------------------------------------------------------


def _render_list(key: str) -> Render:
    def render(console: Console, answer: Any) -> None:
        rows = answer.get(key) if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            render_document(console, answer)
            return
        if not rows:
            console.print(f"no {key}", style="dim")
        elif all(isinstance(row, dict) for row in rows):
            console.print(table_of(rows))
        rest = {k: v for k, v in answer.items() if k != key}
        if rest:
            render_document(console, rest)

    return render
