"""Running a config file's agent in this process: what ``adk run`` and ``adk console``
share.

`LocalAgent` starts the runtime, spawns the file's agent and makes one `Runner`
(in-memory sessions) for it; `follow_run` streams one run's events to a
`TurnPrinter` (text as it arrives, or JSON lines) and returns its outcome;
`outcome_payload` is an outcome as JSON.
"""

from __future__ import annotations

import uuid
from types import TracebackType
from typing import Any

import adk_actors as adk
from adk_actors.cli.output import EXIT_REFUSED, CliError, Output, jsonable
from adk_actors.config_file import (
    AgentFile,
    check_credentials,
    load_agent_file,
    spawn_from_file,
)
from adk_actors.events import Event, to_dict
from adk_actors.outcomes import Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.runs import RunEvent, RunTerminal
from providers.content import FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError

DEFAULT_APP = "adk-cli"
DEFAULT_USER = "local-user"
DEFAULT_TIMEOUT = 120.0
RUN_RETENTION = 60.0
MAX_BUFFERED_EVENTS = 256


def new_session_id() -> str:
    return f"session-{uuid.uuid4().hex[:12]}"


def load(path: str) -> AgentFile:
    """The checked file, or the CLI's error for it."""
    try:
        return load_agent_file(path)
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_REFUSED) from None


class LocalAgent:
    """The runtime, the file's agent and one Runner, for as long as the ``with`` lasts."""

    def __init__(self, agent_file: AgentFile, app_name: str, timeout: float | None) -> None:
        self.file = agent_file
        self.app_name = app_name
        options = dict(agent_file.runner_options)
        options.setdefault("streaming_mode", "text")
        if timeout is not None:
            options["run_timeout"] = timeout
        self.run_timeout = float(options.get("run_timeout", DEFAULT_TIMEOUT))
        self._options = options
        self.sessions = adk.sessions.InMemorySessionService()
        self.runner: adk.Runner | None = None
        self._agent: adk.AgentRef | None = None

    def __enter__(self) -> LocalAgent:
        adk.start()
        try:
            self._agent = spawn_from_file(self.file)
            self.runner = adk.Runner(self._agent, self.app_name, self.sessions, **self._options)
        except AdkError as error:
            self.close()
            raise CliError.from_adk(error) from None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._agent is not None:
            try:
                adk.stop_agent(self._agent)
            except AdkError:
                pass
            self._agent = None
        self.sessions.close()
        adk.stop()

    def start_run(self, user_id: str, session_id: str, message: str) -> str:
        assert self.runner is not None
        try:
            return adk.runs.start(
                self.runner,
                user_id,
                session_id,
                message,
                retention=max(RUN_RETENTION, self.run_timeout + 1.0),
                max_buffered_events=MAX_BUFFERED_EVENTS,
            )
        except AdkError as error:
            raise CliError.from_adk(error) from None


class TurnPrinter:
    """Prints one run's events: model text as it streams (each answer once), tool
    activity as dim notes on stderr; with JSON, one line per event (the library's
    event JSON, redacted by `Output.json` like everything it prints)."""

    def __init__(self, output: Output, run_id: str) -> None:
        self.output = output
        self.run_id = run_id
        self._streamed = False
        self.printed_answer = False

    def event(self, seq: int, event: Event) -> None:
        if self.output.json_mode:
            self.output.json(
                {"type": "event", "run_id": self.run_id, "seq": seq, "event": to_dict(event)}
            )
            return
        if event.author in ("user", "runner") or event.content is None:
            return
        if event.partial:
            self.output.text(event.content.text_value())
            self._streamed = True
            return
        parts = event.content.parts
        if any(isinstance(part, FunctionCallPart | FunctionResponsePart) for part in parts):
            self._end_line()
            self.output.note(f"  · {event.text()}")
            return
        if not self._streamed:
            self.output.text(event.content.text_value())
        self._end_line(force=True)
        self.printed_answer = self.printed_answer or event.is_final

    def _end_line(self, force: bool = False) -> None:
        if self._streamed or force:
            self.output.text("\n")
        self._streamed = False


def follow_run(run_id: str, printer: TurnPrinter) -> Outcome:
    """Stream `run_id` to `printer` until its terminal; returns the outcome."""
    try:
        with adk.runs.subscribe(run_id) as subscription:
            for item in subscription:
                if isinstance(item, RunEvent):
                    printer.event(item.seq, item.event)
                elif isinstance(item, RunTerminal):
                    return item.outcome
    except AdkError as error:
        raise CliError.from_adk(error) from None
    return adk.runs.wait(run_id, timeout=5.0)


def outcome_payload(outcome: Outcome) -> dict[str, Any]:
    """An outcome as JSON: ``outcome`` (completed, paused, cancelled, failed) and its
    facts (``text``; ``event`` and ``pause``; ``reason``)."""
    match outcome:
        case Completed(output=output):
            if isinstance(output, str):
                return {"outcome": "completed", "text": output}
            text = output.text_value() if hasattr(output, "text_value") else ""
            return {"outcome": "completed", "text": text, "content": jsonable(output)}
        case Paused(event=event):
            pause = event.actions.pause
            return {
                "outcome": "paused",
                "event": to_dict(event),
                "pause": jsonable(pause) if pause is not None else None,
            }
        case Cancelled(reason=reason):
            return {"outcome": "cancelled", "reason": jsonable(reason)}
        case Failed(reason=reason):
            return {"outcome": "failed", "reason": jsonable(reason)}
    return {"outcome": "unknown"}


def pause_help(outcome: Paused) -> tuple[str, str]:
    """What paused and the ``/resume`` payload that answers it."""
    pause = outcome.event.actions.pause
    if pause is None:
        return "the run paused", "/resume JSON"
    kind = (pause.details or {}).get("type", pause.reason)
    if kind == "tool_confirmation":
        tool = pause.tool_name or "a tool"
        hint = f" ({pause.hint})" if pause.hint else ""
        return (
            f"{tool} asks for confirmation{hint}",
            '/resume {"confirmed": true}  (or {"confirmed": false} to reject)',
        )
    return f"the run paused: {pause.reason}", "/resume JSON  (the response its tool expects)"


def load_for_run(path: str) -> AgentFile:
    """The file, refused early (before starting anything) when its model needs a key
    that is not set."""
    agent_file = load(path)
    try:
        check_credentials(agent_file)
    except AdkError as error:
        raise CliError.from_adk(error, EXIT_REFUSED) from None
    return agent_file
