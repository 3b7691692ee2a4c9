"""How the CLI answers: human output (rich) on stdout, or JSON with ``--json``; errors
on stderr; exit codes.

Exit codes: `EXIT_OK` (0) success, also for a run that paused or was cancelled;
`EXIT_ERROR` (1) something that ran failed (a failed run, an unreachable or refusing
developer API, an agent that would not start); `EXIT_REFUSED` (2) nothing ran because
the input was refused: a command line click could not parse, a refused config file, a
missing API key or developer token, a refused URL or JSON argument (as ``adk serve``
exits 2 when it refuses to start); `EXIT_INTERRUPTED` (130) after Ctrl-C.

An error is one JSON line on stderr, ``{"status": "error", "reason": CODE, "message":
TEXT}`` plus ``"details": [...]`` when the reason has parts (``adk serve`` writes the
same line), or one readable line in human mode.

Everything printed goes through `Output`, which makes it safe in one place
(`adk_actors.cli.sanitize`): a command's result, every JSON line and every error are
redacted (`redacted`) before they are printed, in both modes, and text for people has
its terminal control sequences removed and its rich markup escaped. The one exception
is ``adk doctor``'s own report (``emit(..., redact=False)``): its keys name secrets
(``gemini_api_key_configured``) but its values only say whether one is set.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

import msgspec
from rich.console import Console
from rich.table import Table

from adk_actors.cli.sanitize import (
    escape_json_controls,
    markup,
    printable,
    redacted,
    terminal_text,
)
from providers.errors import AdkError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130
SHOWN_EVENTS = 20
"""A session view for people lists its latest this many (non-partial) events."""

Render = Callable[[Console, Any], None]
"""Draws a result for people from its (redacted) JSON payload."""


class CliError(Exception):
    """A refusal the CLI reports: a stable `reason`, a message for people, and the
    reason's further parts as `details` (JSON values)."""

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        details: Sequence[Any] = (),
        exit_code: int = EXIT_ERROR,
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.details = [jsonable(item) for item in details]
        self.exit_code = exit_code

    def payload(self) -> dict[str, Any]:
        line: dict[str, Any] = {"status": "error", "reason": self.reason}
        if self.details:
            line["details"] = self.details
        line["message"] = self.message
        return line

    @classmethod
    def from_adk(cls, error: AdkError, exit_code: int = EXIT_ERROR) -> CliError:
        """The CLI form of an `AdkError`: a composite reason's first part is the
        reason, the rest its details."""
        reason = error.reason
        if isinstance(reason, tuple | list) and reason and isinstance(reason[0], str):
            return cls(
                reason[0], error.detail or reason[0], details=reason[1:], exit_code=exit_code
            )
        shown = reason if isinstance(reason, str) else json_text(reason)
        return cls(shown, error.detail or shown, exit_code=exit_code)


def jsonable(value: Any) -> Any:
    """`value` as JSON builtins (tuples become lists, unknown objects their type name)."""
    return msgspec.to_builtins(value, enc_hook=lambda item: type(item).__name__)


def json_text(value: Any) -> str:
    """`value` as one line of JSON, inert on a terminal (`escape_json_controls`)."""
    return escape_json_controls(
        json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))
    )


def shown(value: Any) -> Any:
    """`value` as the CLI shows it: JSON builtins, redacted."""
    return redacted(jsonable(value))


class Output:
    """Where a command writes: `json_mode` picks JSON lines over rich rendering."""

    def __init__(
        self, json_mode: bool, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.json_mode = json_mode
        self._stdout = stdout
        self._stderr = stderr
        self.console = Console(file=stdout, highlight=False, soft_wrap=True)
        self.errors = Console(file=stderr, stderr=True, highlight=False, soft_wrap=True)

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    def json(self, payload: Any, *, redact: bool = True) -> None:
        """One JSON line on stdout, redacted unless `redact` is False."""
        self.stdout.write(json_text(shown(payload) if redact else payload) + "\n")
        self.stdout.flush()

    def text(self, text: str) -> None:
        """Text for people on stdout, as it arrives (a model's answer streaming):
        no wrapping, no markup, no terminal control sequences."""
        self.stdout.write(terminal_text(text))
        self.stdout.flush()

    def note(self, text: str, style: str = "dim") -> None:
        """A secondary human line on stderr (activity, hints), redacted; nothing in
        JSON mode."""
        if not self.json_mode:
            self.errors.print(markup(shown(text)), style=style)

    def emit(self, payload: Mapping[str, Any], render: Render, *, redact: bool = True) -> None:
        """A command's result, redacted unless `redact` is False: as JSON, or drawn
        for people by `render` from that same payload."""
        document = shown(payload) if redact else payload
        if self.json_mode:
            self.json(document, redact=False)
        else:
            render(self.console, document)

    def error(self, error: CliError) -> None:
        payload = shown(error.payload())
        if self.json_mode:
            self.stderr.write(json_text(payload) + "\n")
            self.stderr.flush()
            return
        self.errors.print(
            f"[bold red]error[/] [red]{markup(payload['reason'])}[/]: {markup(payload['message'])}"
        )
        if "details" in payload:
            self.errors.print(f"  details: {markup(json_text(payload['details']))}", style="dim")

    def fail(self, error: CliError) -> NoReturn:
        """Report `error` and exit with its code."""
        self.error(error)
        raise SystemExit(error.exit_code)


def render_document(console: Console, document: Any, title: str | None = None) -> None:
    """A JSON answer for people: scalars as ``key: value`` lines, a list of objects as
    a table, anything nested as indented JSON."""
    document = printable(jsonable(document))
    if title:
        console.print(f"[bold]{markup(title)}[/]")
    if not isinstance(document, dict):
        console.print_json(data=document)
        return
    for key, value in document.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            console.print(f"[bold]{markup(str(key))}[/] ({len(value)})")
            console.print(table_of(value))
        elif isinstance(value, dict | list):
            console.print(f"[bold]{markup(str(key))}:[/]")
            console.print_json(data=value, indent=2)
        else:
            console.print(f"[bold]{markup(str(key))}:[/] {markup(_scalar(value))}")


def table_of(rows: list[dict[str, Any]]) -> Table:
    """A table whose columns are the rows' keys (scalars; nested values as JSON)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    table = Table(show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(markup(column))
    for row in rows:
        table.add_row(*(markup(_scalar(row.get(column))) for column in columns))
    return table


def render_session(console: Console, session: Any) -> None:
    """A session as JSON (the console's ``/inspect``, the daemon's answer) for people:
    its fields, then its latest events as author and text."""
    if not isinstance(session, dict) or not isinstance(session.get("events", []), list):
        render_document(console, session)
        return
    events = session.get("events", [])
    render_document(console, {k: v for k, v in session.items() if k != "events"})
    console.print(f"[bold]events[/] ({len(events)})")
    table = Table(show_edge=False, header_style="bold")
    table.add_column("author")
    table.add_column("text")
    for event in events[-SHOWN_EVENTS:]:
        if isinstance(event, dict) and not event.get("partial"):
            table.add_row(markup(str(event.get("author", ""))), markup(event_text(event)))
    console.print(table)


def event_text(event: dict[str, Any]) -> str:
    """The visible text of an event as JSON: its ``text`` (the daemon's summary), else
    its text parts, or what its calls are."""
    if isinstance(event.get("text"), str):
        return str(event["text"])[:200]
    content = event.get("content")
    parts = content.get("parts", []) if isinstance(content, dict) else []
    shown_parts: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            shown_parts.append(part["text"])
        elif isinstance(part.get("name"), str):
            shown_parts.append(f"<{part.get('type', 'call')} {part['name']}>")
    return " ".join(shown_parts)[:200]


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
