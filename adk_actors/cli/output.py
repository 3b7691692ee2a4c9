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
same line), or one readable line in human mode. What the CLI prints is secret-free at
its source: `AdkError` reasons and messages, events and a daemon's error bodies are
redacted before they get here (`providers.redact`), and reports such as ``adk
doctor`` say whether a secret is set, never what it is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from providers.errors import AdkError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130


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
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))


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

    def json(self, payload: Any) -> None:
        """One JSON line on stdout."""
        self.stdout.write(json_text(payload) + "\n")
        self.stdout.flush()

    def text(self, text: str) -> None:
        """Raw text on stdout, as it arrives (no wrapping, no markup)."""
        self.stdout.write(text)
        self.stdout.flush()

    def note(self, text: str, style: str = "dim") -> None:
        """A secondary human line on stderr (activity, hints); nothing in JSON mode."""
        if not self.json_mode:
            self.errors.print(escape(text), style=style)

    def emit(self, payload: Mapping[str, Any], render: Callable[[Console], None]) -> None:
        """A command's result: `payload` as JSON, or `render` for people."""
        if self.json_mode:
            self.json(payload)
        else:
            render(self.console)

    def error(self, error: CliError) -> None:
        if self.json_mode:
            self.stderr.write(json_text(error.payload()) + "\n")
            self.stderr.flush()
            return
        self.errors.print(
            f"[bold red]error[/] [red]{escape(error.reason)}[/]: {escape(error.message)}"
        )
        if error.details:
            self.errors.print(f"  details: {escape(json_text(error.details))}", style="dim")

    def fail(self, error: CliError) -> NoReturn:
        """Report `error` and exit with its code."""
        self.error(error)
        raise SystemExit(error.exit_code)


def render_document(console: Console, document: Any, title: str | None = None) -> None:
    """A JSON answer for people: scalars as ``key: value`` lines, a list of objects as
    a table, anything nested as indented JSON."""
    document = jsonable(document)
    if title:
        console.print(f"[bold]{escape(title)}[/]")
    if not isinstance(document, dict):
        console.print_json(data=document)
        return
    for key, value in document.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            console.print(f"[bold]{escape(str(key))}[/] ({len(value)})")
            console.print(table_of(value))
        elif isinstance(value, dict | list):
            console.print(f"[bold]{escape(str(key))}:[/]")
            console.print_json(data=value, indent=2)
        else:
            console.print(f"[bold]{escape(str(key))}:[/] {escape(_scalar(value))}")


def table_of(rows: list[dict[str, Any]]) -> Table:
    """A table whose columns are the rows' keys (scalars; nested values as JSON)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    table = Table(show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(escape(column))
    for row in rows:
        table.add_row(*(escape(_scalar(row.get(column))) for column in columns))
    return table


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
