"""``adk console``: an interactive conversation with one agent, kept across turns.

One agent and one Runner live for the whole console; every message is a stable run
whose text streams as it arrives. Lines starting with ``/`` are console commands
(`HELP`); anything else is a message. ``/exit``, ``/quit`` or end of input (Ctrl-D,
or the end of piped input) closes it cleanly. A run paused for a tool confirmation
waits for ``/resume {"confirmed": true}`` (or ``false``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import adk_actors as adk
from adk_actors.cli.local import (
    LocalAgent,
    TurnPrinter,
    follow_run,
    new_session_id,
    outcome_payload,
    pause_help,
)
from adk_actors.cli.output import CliError, Output, json_text, render_session
from adk_actors.cli.sanitize import markup
from adk_actors.events import to_dict
from adk_actors.outcomes import Outcome, Paused
from providers.errors import AdkError

MAX_LINE_BYTES = 1 << 20
MAX_SESSION_ID_CHARS = 128

HELP = """\
/help                 show these commands
/inspect              show the current session (state and latest events)
/new                  switch to a new, generated session
/session SESSION_ID   switch to a session
/resume JSON          answer the paused run, e.g. /resume {"confirmed": true}
/exit                 close the console (also /quit, or end of input)"""

ReadLine = Callable[[str], str | None]


def read_terminal_line(prompt: str) -> str | None:
    """One line from stdin (None at end of input); the prompt only on a terminal."""
    if sys.stdin.isatty():
        try:
            return input(prompt)
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line if line else None


class ConsoleLoop:
    """The console's state: the session it talks in and the run waiting for /resume."""

    def __init__(
        self, local: LocalAgent, output: Output, user_id: str, session_id: str, read: ReadLine
    ) -> None:
        self.local = local
        self.output = output
        self.user_id = user_id
        self.session_id = session_id
        self.read = read
        self.turns = 0
        self.paused_run_id: str | None = None

    def run(self) -> dict[str, Any]:
        """Read and answer lines until /exit or end of input; returns the summary."""
        self._banner()
        while True:
            line = self.read(f"adk[{self.session_id}]> ")
            if line is None:
                return self._summary("eof")
            if self._handle(line.strip()) == "exit":
                return self._summary("closed")

    def _handle(self, line: str) -> str | None:
        if not line:
            return None
        command, _, argument = line.partition(" ")
        argument = argument.strip()
        try:
            match command:
                case "/exit" | "/quit":
                    return "exit"
                case "/help":
                    self._show_help()
                case "/inspect":
                    self._inspect()
                case "/new":
                    self._switch(new_session_id())
                case "/session":
                    self._switch(_session_id(argument))
                case "/resume":
                    self._resume(argument)
                case _ if command.startswith("/"):
                    raise CliError(
                        "unknown_console_command",
                        f"{command[:32]} is not a command; /help lists them",
                    )
                case _:
                    self._turn(line)
        except CliError as error:
            self._error(error)
        return None

    # -- commands ----------------------------------------------------------------------

    def _turn(self, message: str) -> None:
        if len(message.encode("utf-8", "replace")) > MAX_LINE_BYTES:
            raise CliError("message_too_large", f"a message is at most {MAX_LINE_BYTES} bytes")
        run_id = self.local.start_run(self.user_id, self.session_id, message)
        self.turns += 1
        self._follow(run_id)

    def _resume(self, argument: str) -> None:
        if not argument:
            raise CliError(
                "missing_resume_json", 'give the response, e.g. /resume {"confirmed": true}'
            )
        if self.paused_run_id is None:
            raise CliError("no_paused_run", "no run is waiting for a response")
        try:
            response = json.loads(argument)
        except ValueError:
            raise CliError("invalid_resume_json", "the response is not valid JSON") from None
        try:
            run_id = adk.runs.resume(self.paused_run_id, response)
        except AdkError as error:
            raise CliError(
                "resume_failed", error.detail or "the response was refused", details=[error.reason]
            ) from None
        self.paused_run_id = None
        self._follow(run_id)

    def _follow(self, run_id: str) -> None:
        printer = TurnPrinter(self.output, run_id)
        outcome = follow_run(run_id, printer)
        self.paused_run_id = run_id if isinstance(outcome, Paused) else None
        self._show_outcome(run_id, outcome, printer)

    def _switch(self, session_id: str) -> None:
        self.session_id = session_id
        self.paused_run_id = None
        if self.output.json_mode:
            self.output.json({"type": "session_switched", "session_id": session_id})
        else:
            self.output.console.print(f"session: {markup(session_id)}", style="cyan")

    def _inspect(self) -> None:
        sessions = self.local.sessions
        try:
            session = sessions.get_session(self.local.app_name, self.user_id, self.session_id)
        except AdkError as error:
            if error.reason != "not_found":
                raise CliError.from_adk(error) from None
            view = {"type": "session", "session_id": self.session_id, "status": "not_found"}
            self.output.emit(
                view,
                lambda console, answer: console.print(
                    f"session {markup(answer['session_id'])} has no events yet", style="dim"
                ),
            )
            return
        payload = {
            "type": "session",
            "id": session.id,
            "app_name": session.app_name,
            "user_id": session.user_id,
            "state": session.state,
            "events": [to_dict(event) for event in session.events],
        }
        self.output.emit(payload, render_session)

    # -- output ------------------------------------------------------------------------

    def _banner(self) -> None:
        if self.output.json_mode:
            return
        agent = self.local.file
        model = f", {agent.model}" if agent.model else ""
        self.output.console.print(
            f"[bold]adk console[/]: {markup(agent.name)} ({agent.provider}{markup(model)}), "
            f"session {markup(self.session_id)}. /help lists commands; /exit closes."
        )

    def _show_help(self) -> None:
        if self.output.json_mode:
            self.output.json({"type": "help", "commands": HELP.splitlines()})
        else:
            self.output.console.print(markup(HELP))

    def _show_outcome(self, run_id: str, outcome: Outcome, printer: TurnPrinter) -> None:
        payload = outcome_payload(outcome)
        if self.output.json_mode:
            self.output.json(
                {"type": "outcome", "run_id": run_id, "session_id": self.session_id, **payload}
            )
            return
        kind = payload["outcome"]
        if kind == "completed" and not printer.printed_answer and payload.get("text"):
            self.output.text(payload["text"] + "\n")
        elif isinstance(outcome, Paused):
            what, how = pause_help(outcome)
            self.output.console.print(f"[yellow]paused[/]: {markup(what)}")
            self.output.console.print(f"  answer with: {markup(how)}", style="dim")
        elif kind in ("cancelled", "failed"):
            reason = json_text(payload.get("reason"))
            self.output.console.print(f"[red]{kind}[/]: {markup(reason)}")

    def _error(self, error: CliError) -> None:
        if self.output.json_mode:
            self.output.json({"type": "error", **error.payload()})
        else:
            self.output.error(error)

    def _summary(self, how: str) -> dict[str, Any]:
        return {
            "type": "summary",
            "command": "console",
            "outcome": how,
            "app_name": self.local.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "turns": self.turns,
        }


def _session_id(argument: str) -> str:
    if not argument or len(argument) > MAX_SESSION_ID_CHARS or any(c.isspace() for c in argument):
        raise CliError(
            "invalid_session_id", f"a session id is 1..{MAX_SESSION_ID_CHARS} characters, no spaces"
        )
    return argument
