"""`AgentAdapter`: the default adapter, an in-process agent fresh for every sample.

Each sample gets its own agent (spawned under a unique registered name from the
agent's config), its own `Runner` and in-memory session service, and a new session
seeded with the case's ``session_state``; `close_sample` cancels a turn still
running, stops the agent and closes the session service, so no state leaks from
one sample into another and nothing outlives the evaluation.
`agent_adapter_from_file` reads an ``adk`` agent config file the way ``adk run``
does.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adk_actors.agents import spawn_agent, stop_agent
from adk_actors.agents.names import check_agent_name
from adk_actors.config_file import check_credentials, load_agent_file
from adk_actors.config_file.loader import RUNNER_KEYS
from adk_actors.evaluation.adapter import TurnOutput
from adk_actors.evaluation.evalset import EvalCase, EvalTurn
from adk_actors.evaluation.limits import MAX_TRAJECTORY_STEPS
from adk_actors.evaluation.results import TrajectoryStep
from adk_actors.events import Event, to_dict
from adk_actors.runner import Runner
from adk_actors.runner.options import runner_options
from adk_actors.sessions import InMemorySessionService
from providers.content import FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError
from providers.scripted import ScriptedProvider
from supervision.logs import get_logger

APP_NAME = "adk-eval"
USER_ID = "local-evaluator"
MAX_CAPTURED_EVENTS = 256
MAX_BASE_NAME_CHARS = 96
_CLOSED_REASON = "eval_sample_closed"
_log = get_logger(__name__)
_serial = itertools.count(1)


class AgentSample:
    """One sample's agent, Runner, sessions and the turn running now (if any)."""

    def __init__(
        self, agent_name: str, runner: Runner, sessions: InMemorySessionService, session_id: str
    ) -> None:
        self.agent_name = agent_name
        self.runner = runner
        self.sessions = sessions
        self.session_id = session_id
        self.closed = False
        self.stream: Any = None
        self.lock = threading.Lock()


ConfigFactory = Callable[[], Mapping[str, Any]]


class AgentAdapter:
    """Evaluates the agent `name` with `config` and `tools` (as `adk.spawn_agent`
    takes them) and `runner_options` (as `adk.Runner` takes them).

    Every sample gets its own copy of `config`: mappings and lists are copied, and a
    `providers.ScriptedProvider` is replaced by its `fresh` copy, so each sample's
    script starts at its first step. Any other object (a provider instance with its
    own state, a cache) would be shared by every
    sample, concurrent ones included: for those, pass `config` as a factory, a
    callable returning a new config (and so new providers) for each sample.
    """

    def __init__(
        self,
        name: str,
        config: Mapping[str, Any] | ConfigFactory,
        tools: Sequence[Any] = (),
        runner_options: Mapping[str, Any] | None = None,
    ) -> None:
        check_agent_name(name)
        if len(name) > MAX_BASE_NAME_CHARS:
            raise AdkError(
                "invalid_identifier", f"an evaluated agent's name is at most {MAX_BASE_NAME_CHARS}"
            )
        if not isinstance(config, Mapping) and not callable(config):
            raise AdkError(
                "invalid_agent_eval_target", "config is a mapping, or a factory returning one"
            )
        self.name = name
        self.config = config
        self.tools = tuple(tools)
        self.runner_options = dict(runner_options or {})
        _check_runner_options(self.runner_options)

    def open_sample(self, case: EvalCase, sample_index: int) -> AgentSample:
        """A fresh agent, Runner and session for this sample (all released on failure)."""
        agent_name = f"{self.name}_eval_{next(_serial)}"
        agent = spawn_agent(agent_name, self._fresh_config(), list(self.tools))
        sessions = InMemorySessionService()
        try:
            runner = Runner(agent, APP_NAME, sessions, **self.runner_options)
            session = sessions.create_session(APP_NAME, USER_ID, state=case.session_state)
        except BaseException:
            _release(agent_name, sessions)
            raise
        return AgentSample(agent_name, runner, sessions, session.id)

    def run_turn(self, handle: AgentSample, turn: EvalTurn, deadline: float) -> TurnOutput:
        """Run the turn's input through the sample's Runner; the final text and the
        tool calls and responses its events carry. A run that pauses fails the turn
        (``evaluation_paused``)."""
        if time.monotonic() >= deadline:
            raise AdkError("timeout", "the sample's deadline passed")
        stream = handle.runner.run_async(USER_ID, handle.session_id, turn.input)
        with handle.lock:
            if handle.closed:
                raise AdkError(_CLOSED_REASON, "the sample was closed")
            handle.stream = stream
        text: str | None = None
        steps: list[TrajectoryStep] = []
        events: list[dict[str, Any]] = []
        paused = False
        try:
            for event in stream:
                if len(events) < MAX_CAPTURED_EVENTS:
                    events.append(to_dict(event))
                steps.extend(_steps(event, turn.id))
                if len(steps) > MAX_TRAJECTORY_STEPS:
                    raise AdkError("eval_trajectory_too_large", "too many tool steps in one turn")
                if event.is_final and not event.partial and event.content is not None:
                    text = event.content.text_value()
                paused = paused or event.actions.pause is not None
        finally:
            with handle.lock:
                handle.stream = None
        if paused:  # nobody answers an approval in an evaluation
            raise AdkError("evaluation_paused", "the run paused (approval or long-running tool)")
        return TurnOutput(text=text, trajectory=steps, events=events)

    def close_sample(self, handle: AgentSample) -> None:
        """Cancel a running turn, stop the agent, close the sessions (idempotent)."""
        with handle.lock:
            if handle.closed:
                return
            handle.closed = True
            stream = handle.stream
        if stream is not None:
            try:
                stream.cancel(_CLOSED_REASON)
            except AdkError:
                pass  # it ended meanwhile
        _release(handle.agent_name, handle.sessions)

    def _fresh_config(self) -> dict[str, Any]:
        """A new config per sample (a script starts from its first step each time)."""
        if isinstance(self.config, Mapping):
            config: dict[str, Any] = _copy(self.config)
            return config
        made = self.config()
        if not isinstance(made, Mapping):
            raise AdkError("invalid_agent_eval_target", "the config factory returns a mapping")
        return dict(made)  # the factory's config is this sample's own already


def agent_adapter_from_file(path: str | Path) -> AgentAdapter:
    """The `AgentAdapter` for an ``adk`` agent config file (the loader ``adk run
    --config`` uses); `AdkError` naming the bad key, or ``missing_api_key``."""
    agent_file = load_agent_file(str(path))
    check_credentials(agent_file)
    return AgentAdapter(
        agent_file.name,
        lambda: agent_file.config,  # the file's config is made afresh on every read
        agent_file.tool_objects,
        agent_file.runner_options,
    )


def _steps(event: Event, turn_id: str) -> list[TrajectoryStep]:
    """The tool calls and responses in one event's content."""
    if event.content is None or event.partial:
        return []
    steps = []
    for part in event.content.parts:
        if isinstance(part, FunctionCallPart):
            steps.append(
                TrajectoryStep(
                    kind="tool_call",
                    tool=part.name,
                    call_id=part.id,
                    turn_id=turn_id,
                    args=dict(part.args),
                )
            )
        elif isinstance(part, FunctionResponsePart):
            steps.append(
                TrajectoryStep(
                    kind="tool_response",
                    tool=part.name,
                    call_id=part.id,
                    turn_id=turn_id,
                    response=dict(part.response),
                )
            )
    return steps


def _release(agent_name: str, sessions: InMemorySessionService) -> None:
    """Stop the sample's agent and close its sessions; a failure is logged, not raised."""
    try:
        stop_agent(agent_name)
    except AdkError as error:
        if error.reason != "not_found":
            _log.warning("eval_agent_stop_failed", agent=agent_name, reason=str(error.reason))
    sessions.close()


def _check_runner_options(options: Mapping[str, Any]) -> None:
    """Refuse bad Runner options when the adapter is made, not per sample."""
    budgets = {key: options[key] for key in options if key in _BUDGET_KEYS}
    runner_options(**budgets)


_BUDGET_KEYS = frozenset(RUNNER_KEYS) - {"tool_execution"}


def _copy(value: Any) -> Any:
    """A sample's own copy of a config value: mappings and lists copied, a step
    script started over (`ScriptedProvider.fresh`); any other object as it is."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if type(value) is ScriptedProvider:
        return value.fresh()
    return value
