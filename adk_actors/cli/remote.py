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
from rich.markup import escape
from rich.table import Table

from adk_actors.cli.devapi import (
    DEFAULT_URL,
    DevApiClient,
    check_base_url,
    developer_token,
    segment,
)
from adk_actors.cli.output import EXIT_REFUSED, CliError, Output, render_document, table_of

URL_VARIABLE = "ADK_DEV_URL"

Render = Callable[[Console, Any], None]


def _remote_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--url",
        default=DEFAULT_URL,
        envvar=URL_VARIABLE,
        show_default=True,
        help=f"The daemon's base URL (or ${URL_VARIABLE}); http only to loopback.",
    )(command)
    return click.option("--json", "json_mode", is_flag=True, help="Print the JSON answer.")(command)


def _call(
    json_mode: bool,
    url: str,
    method: str,
    path: str,
    body: Any = None,
    render: Render | None = None,
) -> None:
    output = Output(json_mode)
    try:
        base_url = check_base_url(url)
        client = DevApiClient(base_url, developer_token())
        answer = client.request(method, path, body)
    except CliError as error:
        output.fail(error)
    output.emit(answer, lambda console: (render or _render_document)(console, answer))


def _render_document(console: Console, answer: Any) -> None:
    render_document(console, answer)


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
    _call(json_mode, url, "GET", "/dev/v1/agents", render=_render_list("agents"))


@inspect_group.command("run")
@click.argument("run_id")
@_remote_options
def inspect_run(run_id: str, url: str, json_mode: bool) -> None:
    """Show a run's state, outcome and parent/resume links."""
    _call(json_mode, url, "GET", f"/dev/v1/runs/{segment(run_id)}")


@inspect_group.command("sessions")
@click.argument("app")
@click.argument("user")
@_remote_options
def inspect_sessions(app: str, user: str, url: str, json_mode: bool) -> None:
    """List a user's sessions in an app, newest first."""
    path = f"/dev/v1/sessions/{segment(app)}/{segment(user)}"
    _call(json_mode, url, "GET", path, render=_render_list("sessions"))


@inspect_group.command("session")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@_remote_options
def inspect_session(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Show one session: its state and events."""
    path = f"/dev/v1/sessions/{segment(app)}/{segment(user)}/{segment(session)}"
    _call(json_mode, url, "GET", path, render=_render_session)


@inspect_group.command("diagnostics")
@_remote_options
def inspect_diagnostics(url: str, json_mode: bool) -> None:
    """Show the daemon's context capabilities and configured sources (no content)."""
    _call(json_mode, url, "GET", "/dev/v1/diagnostics")


@inspect_group.command("context")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@_remote_options
def inspect_context(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Explain one session's context: counts and fingerprint (no events or state)."""
    path = f"/dev/v1/context/{segment(app)}/{segment(user)}/{segment(session)}"
    _call(json_mode, url, "GET", path)


# -- adk session ----------------------------------------------------------------------


@click.group("session")
def session_group() -> None:
    """Create, change or delete a session on a running daemon."""


@session_group.command("create")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@_remote_options
def session_create(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Create a session with this id."""
    path = f"/dev/v1/sessions/{segment(app)}/{segment(user)}"
    _call(json_mode, url, "POST", path, {"session_id": session}, render=_render_session)


@session_group.command("state")
@click.argument("app")
@click.argument("user")
@click.argument("session")
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
    path = f"/dev/v1/sessions/{segment(app)}/{segment(user)}/{segment(session)}/state"
    _call(json_mode, url, "POST", path, {"state_delta": delta}, render=_render_session)


@session_group.command("delete")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@_remote_options
def session_delete(app: str, user: str, session: str, url: str, json_mode: bool) -> None:
    """Delete one session."""
    path = f"/dev/v1/sessions/{segment(app)}/{segment(user)}/{segment(session)}"
    _call(json_mode, url, "DELETE", path)


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
    path = f"/dev/v1/runs/{segment(run_id)}/resume"
    _call(json_mode, url, "POST", path, {"tool_response": response})


@click.command("cancel")
@click.argument("run_id")
@_remote_options
def cancel_command(run_id: str, url: str, json_mode: bool) -> None:
    """Ask a running daemon to cancel a run."""
    _call(json_mode, url, "DELETE", f"/dev/v1/runs/{segment(run_id)}")


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


def _render_session(console: Console, answer: Any) -> None:
    if not isinstance(answer, dict) or not isinstance(answer.get("events", []), list):
        render_document(console, answer)
        return
    events = answer.get("events", [])
    render_document(console, {k: v for k, v in answer.items() if k != "events"})
    console.print(f"[bold]events[/] ({len(events)})")
    table = Table(show_edge=False, header_style="bold")
    table.add_column("author")
    table.add_column("text")
    for event in events[-20:]:
        if isinstance(event, dict) and not event.get("partial"):
            table.add_row(escape(str(event.get("author", ""))), escape(_event_text(event)))
    console.print(table)


def _event_text(event: dict[str, Any]) -> str:
    """The visible text of an event as JSON: its ``text`` (the daemon's summary), else
    its text parts, or what its calls are."""
    if isinstance(event.get("text"), str):
        return str(event["text"])[:200]
    content = event.get("content")
    parts = content.get("parts", []) if isinstance(content, dict) else []
    shown: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            shown.append(part["text"])
        elif isinstance(part.get("name"), str):
            shown.append(f"<{part.get('type', 'call')} {part['name']}>")
    return " ".join(shown)[:200]
