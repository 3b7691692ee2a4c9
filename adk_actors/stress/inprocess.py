"""The in-process target: the real runtime in this process, scripted agents whose model
latency follows the scenario, and the kinds of work a scenario names.

``runs``: stable runs (`adk.runs`), one session each. ``sessions``: stable runs over a
bounded set of shared sessions (in memory or in LMDB), whose histories are checked
afterwards. ``workflows``, ``ambient``, ``approvals``: the `Workload`s of
`adk_actors.stress.workloads`. Chaos kills run workers (the processes the model is
called from), invocation servers and agents (their supervisor restarts them) with the
kernel's ``kill`` exit signal. `close` settles, then checks the invariants of
the stress suites against the baselines taken after a warm-up.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adk_actors import app as adk_app
from adk_actors import runs
from adk_actors.admission import status as admission_status
from adk_actors.agents import AgentRef, spawn_agent, stop_agent
from adk_actors.app import AGENT_SUPERVISOR, RUN_SUPERVISOR
from adk_actors.events import Event
from adk_actors.outcomes import Cancelled, Completed, Failed, Paused
from adk_actors.runner import Runner
from adk_actors.runner.request import run_name
from adk_actors.sessions import InMemorySessionService, LmdbSessionService
from adk_actors.stress import invariants
from adk_actors.stress.latency import draw_delay
from adk_actors.stress.records import ChaosEvent, InvariantResult, Outcome
from adk_actors.stress.scenario import MIX_KINDS, Scenario
from adk_actors.stress.workloads import WORKLOADS, Workload
from adk_actors.tools import Tool, tool
from providers import Content, ScriptedProvider
from providers.content import FunctionResponsePart
from providers.errors import AdkError
from supervision import (
    DynamicSupervisor,
    Pid,
    default_task_supervisor,
    kernel_stats,
    self_pid,
    thread_pool_of,
    thread_pools,
    whereis,
)
from supervision import exit as exit_process
from supervision.logs import get_logger

_log = get_logger("adk_actors.stress")

APP_NAME = "stress"
USER_ID = "stress"
RUN_RETENTION = 0.5
"""Seconds an ended run stays retained: the engine waits for it from its start."""
MAX_SHARED_SESSIONS = 1024
MAX_WARM_UP = 32
RUNS_PER_SHARED_SESSION = 64
MAX_CHECKED_SESSIONS = 512
"""Sessions of kind ``runs`` whose histories are checked (a seeded sample)."""
MAX_TRACKED_MESSAGES = 100_000
"""Ended runs of kind ``sessions`` remembered for the history check (their sessions
are the ones checked); past it the later sessions are not checked."""
MAX_PROBLEMS = 100
MAX_WORKERS_TRACKED = 256
SETTLE_TIMEOUT = 15.0
MAX_SETTLE_TIMEOUT = 600.0
SETTLE_POLL = 0.05
RESTART_WAIT = 1.0
_NUMBERING = re.compile(r"[-_]?\d+(?:_\d+)?$")
"""A thread name's numbering, left out when threads are counted by name."""
_AGENT_BUDGET = {"intensity": 1000, "period": 1.0}
"""Each agent's restart budget: chaos may kill agents often; the budget must not be
what fails the runs."""


@tool
def stress_tool(round: int) -> str:
    """A stress tool round: answers at once with the round number."""
    return f"round {round}"


class InProcessTarget:
    """Drives the runtime in this process (starting it if it is not running).
    `settle_timeout`: how long `close` waits for everything to return to its baseline
    before it checks."""

    def __init__(self, *, settle_timeout: float = SETTLE_TIMEOUT) -> None:
        if not 0 < settle_timeout <= MAX_SETTLE_TIMEOUT:
            raise AdkError(
                "invalid_settle_timeout", f"settle_timeout is in (0, {MAX_SETTLE_TIMEOUT}]"
            )
        self._settle_timeout = settle_timeout
        self._scenario: Scenario | None = None
        self._owns_app = False
        self._data_dir: Path | None = None
        self._sessions: InMemorySessionService | LmdbSessionService | None = None
        self._agents: list[AgentRef] = []
        self._runners: list[Runner] = []
        self._workloads: dict[str, Workload] = {}
        self._rng = random.Random(0)
        self._rng_lock = threading.Lock()
        self._workers: deque[Pid] = deque(maxlen=MAX_WORKERS_TRACKED)
        self._live_runs: dict[str, None] = {}
        self._restarts = 0
        self._baseline_processes = 0
        self._baseline_threads = 0
        self._baseline_thread_kinds: Counter[str] = Counter()
        self._baseline_supervisors: dict[str, int] = {}
        self._reply_problems: list[str] = []
        self._completed = 0
        self._checked_runs: list[int] = []
        self._seen_runs = 0
        self._session_count = 1
        self._session_done: dict[str, set[int]] = {}
        self._tracked = 0
        self._sample_rng = random.Random(0)

    # -- the Target protocol -----------------------------------------------------------------

    async def open(self, scenario: Scenario) -> None:
        """Start the runtime (unless running), the session store and the agents; warm
        every agent up, take the baselines, then open the workloads."""
        self._scenario = scenario
        self._rng = random.Random(scenario.seed)
        self._sample_rng = random.Random(scenario.seed + 1)
        self._session_count = max(1, min(MAX_SHARED_SESSIONS, scenario.agents * 4))
        if not adk_app.running():
            adk_app.start()
            self._owns_app = True
        try:
            self._sessions = self._open_sessions(scenario)
            tools: Sequence[Tool] = (stress_tool,) if scenario.tool_calls else ()
            provider = ScriptedProvider(fn=self._model, inline=True, max_histories=0)
            token = uuid.uuid4().hex[:8]
            for n in range(scenario.agents):
                config = {"provider": provider, "restart_intensity": _AGENT_BUDGET}
                self._agents.append(spawn_agent(f"Stress_{token}_{n}", config, tools))
            self._runners = [
                Runner(agent, APP_NAME, self._sessions, run_timeout=scenario.run_timeout_s)
                for agent in self._agents
            ]
            await self._warm_up()
            await self._settle("warm_up", self._runs_running)
            self._baseline_processes = kernel_stats()["processes"]
            self._baseline_thread_kinds = _threads()[0]
            self._baseline_threads = self._baseline_thread_kinds.total()
            self._baseline_supervisors = self._supervisor_counts()
            for kind in _workload_kinds(scenario):
                workload = WORKLOADS[kind]()
                self._workloads[kind] = workload
                await workload.open(
                    scenario, ScriptedProvider(fn=self._echo, inline=True, max_histories=0)
                )
        except BaseException:
            await self._teardown()
            raise

    async def run_one(self, kind: str, index: int, deadline: float) -> Outcome:
        """One unit of `kind`; exactly one outcome whatever happens to it."""
        if kind in ("runs", "sessions"):
            return await self._run(kind, index, deadline)
        workload = self._workloads.get(kind)
        if workload is None:
            raise AdkError("invalid_stress_kind", f"no workload for kind {kind!r}")
        return await workload.run_one(index, deadline)

    async def chaos(self, action: str, rng: random.Random) -> ChaosEvent:
        """Kill one run worker, invocation server or agent, chosen with `rng`."""
        match action:
            case "kill_run_workers":
                workers = [pid for pid in list(self._workers) if pid.is_alive()]
                if not workers:
                    return _event(action, "", "skipped: no live run worker")
                victim = rng.choice(workers)
                exit_process(victim, "kill")
                return _event(action, repr(victim), "killed")
            case "kill_invocation_servers":
                servers = self._invocation_servers()
                if not servers:
                    return _event(action, "", "skipped: no live invocation server")
                name, pid = rng.choice(servers)
                exit_process(pid, "kill")
                return _event(action, name, "killed")
            case "kill_agents":
                return await self._kill_agent(action, rng)
            case _:
                return _event(action, "", "skipped: needs a daemon target")

    def _invocation_servers(self) -> list[tuple[str, Pid]]:
        """The servers of this target's runs in flight, or (none in flight: kinds run
        by workloads) every invocation server under the run supervisor."""
        servers = [
            (run_id, pid)
            for run_id in list(self._live_runs)
            if (pid := whereis(run_name(run_id))) is not None
        ]
        if servers:
            return servers
        children = DynamicSupervisor.which_children(RUN_SUPERVISOR)
        return [(repr(child.pid), child.pid) for child in children if child.pid is not None]

    def restarts(self) -> int:
        """Agents restarted by their supervisor after a chaos kill."""
        return self._restarts

    async def close(self) -> list[InvariantResult]:
        """Close the workloads, settle, check every invariant, tear down."""
        results: list[InvariantResult] = []
        try:
            for kind, workload in list(self._workloads.items()):
                try:
                    results.extend(await workload.close())
                except Exception as error:
                    results.append(
                        InvariantResult(
                            name=f"{kind}_closed",
                            held=False,
                            detail=f"the {kind} workload failed to close: {type(error).__name__}",
                        )
                    )
            self._workloads.clear()
            await self._settle("close", self._unsettled)
            results.extend(self._invariants())
        finally:
            await self._teardown()
        return results

    # -- runs and sessions -------------------------------------------------------------------

    async def _run(self, kind: str, index: int, deadline: float) -> Outcome:
        runner = self._runners[index % len(self._runners)]
        shared = kind == "sessions"
        session_id = self._shared_session(index) if shared else f"r{index}"
        message = f"message {index}"
        try:
            run_id = runs.start(runner, USER_ID, session_id, message, retention=RUN_RETENTION)
        except AdkError as error:
            _log.debug("adk.stress.run_refused", reason=str(error.reason)[:200])
            return Outcome.REJECTED
        self._live_runs[run_id] = None
        try:
            result = await self._wait(run_id, deadline)
        finally:
            self._live_runs.pop(run_id, None)
        outcome = _outcome(result)
        if outcome is Outcome.COMPLETED:
            self._completed += 1
            if isinstance(result, Completed) and result.output != message:
                self._problem(f"run {index} answered something else than its message")
        self._remember(shared, index, outcome)
        return outcome

    async def _wait(self, run_id: str, deadline: float) -> Any:
        """The run's outcome; past `deadline` it is cancelled and its cancel awaited."""
        try:
            return await runs.wait_async(run_id, timeout=max(0.0, deadline - time.monotonic()))
        except runs.RunTimeout:
            try:
                runs.cancel(run_id, "stress_deadline")
                return await runs.wait_async(run_id, timeout=5.0)
            except (runs.RunError, runs.RunTimeout):
                return None
        except runs.RunError:
            return None

    def _shared_session(self, index: int) -> str:
        """Run `index`'s shared session: one of `_session_count` slots, each taking
        `RUNS_PER_SHARED_SESSION` runs before the next generation of sessions starts
        (histories stay short however long the scenario runs)."""
        generation = index // (self._session_count * RUNS_PER_SHARED_SESSION)
        return f"s{index % self._session_count}.{generation}"

    def _remember(self, shared: bool, index: int, outcome: Outcome) -> None:
        """Note what the history check needs: the completed runs per shared session, or
        a seeded sample of the completed runs with sessions of their own (the sessions
        of the others are deleted, so memory and the store stay bounded)."""
        if shared:
            if self._tracked < MAX_TRACKED_MESSAGES:
                done = self._session_done.setdefault(self._shared_session(index), set())
                if outcome is Outcome.COMPLETED:
                    done.add(index)
                self._tracked += 1
            return
        if outcome is not Outcome.COMPLETED:
            return
        self._seen_runs += 1
        dropped: int | None = index
        if len(self._checked_runs) < MAX_CHECKED_SESSIONS:
            self._checked_runs.append(index)
            dropped = None
        else:
            slot = self._sample_rng.randrange(self._seen_runs)
            if slot < MAX_CHECKED_SESSIONS:
                dropped, self._checked_runs[slot] = self._checked_runs[slot], index
        if dropped is not None and self._sessions is not None:
            try:
                self._sessions.delete_session(APP_NAME, USER_ID, f"r{dropped}")
            except AdkError as error:
                self._problem(f"run {dropped}: its session could not be deleted ({error.reason})")

    # -- the scripted model ------------------------------------------------------------------

    def _delay(self) -> float:
        assert self._scenario is not None
        with self._rng_lock:
            return draw_delay(self._scenario.model, self._rng)

    def _model(
        self, history: Sequence[Content], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Echo the user's message after `tool_calls` tool rounds, with a drawn delay;
        the calling process is remembered for chaos."""
        assert self._scenario is not None
        self._workers.append(self_pid())
        rounds, message = _turn(history)
        delay = self._delay()
        if rounds < self._scenario.tool_calls:
            call = {"name": "stress_tool", "args": {"round": rounds + 1}}
            return {"tool_calls": [call], "delay": delay}
        return {"text": message, "delay": delay}

    def _echo(
        self, history: Sequence[Content], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The workloads' model: echo the last message with a drawn delay."""
        self._workers.append(self_pid())
        text = history[-1].text_value() if history else ""
        return {"text": text or "ok", "delay": self._delay()}

    # -- chaos -------------------------------------------------------------------------------

    async def _kill_agent(self, action: str, rng: random.Random) -> ChaosEvent:
        if not self._agents:
            return _event(action, "", "skipped: no agent")
        agent = rng.choice(self._agents)
        pid = agent.pid
        if pid is None:
            return _event(action, agent.name, "skipped: agent restarting")
        exit_process(pid, "kill")
        give_up = time.monotonic() + RESTART_WAIT
        while time.monotonic() < give_up:
            now = agent.pid
            if now is not None and now != pid:
                self._restarts += 1
                return _event(action, agent.name, "restarted")
            await asyncio.sleep(0.005)
        return _event(action, agent.name, "killed")

    # -- setup, settling, invariants ---------------------------------------------------------

    def _open_sessions(self, scenario: Scenario) -> InMemorySessionService | LmdbSessionService:
        if scenario.session_store == "lmdb":
            self._data_dir = Path(tempfile.mkdtemp(prefix="adk-stress-"))
            return LmdbSessionService(self._data_dir / "sessions")
        return InMemorySessionService()

    async def _warm_up(self) -> None:
        """One quiet run on each of the first `MAX_WARM_UP` agents, so pools have their
        threads before the baselines."""
        started = [
            runs.start(runner, USER_ID, f"warm{n}", "warm", retention=0.05)
            for n, runner in enumerate(self._runners[:MAX_WARM_UP])
        ]
        for run_id in started:
            try:
                await runs.wait_async(run_id, timeout=30.0)
            except (runs.RunError, runs.RunTimeout):
                _log.warning("adk.stress.warm_up_failed", run_id=run_id)

    async def _settle(self, what: str, unsettled: Callable[[], list[str]]) -> None:
        """Poll `unsettled` until it is empty or the settle timeout passes (the checks then
        tell); a timeout is logged with what had not settled."""
        give_up = time.monotonic() + self._settle_timeout
        while left := unsettled():
            if time.monotonic() >= give_up:
                _log.warning("adk.stress.not_settled", stage=what, unsettled=left)
                return
            await asyncio.sleep(SETTLE_POLL)

    def _unsettled(self) -> list[str]:
        """The names of the measures not back to their baselines yet."""
        permits = admission_status()
        checks = {
            "runs": not any(runs.stats().values()),
            "permits": permits.get("active") == 0 and permits.get("queued") == 0,
            "supervisors": self._supervisor_counts() == self._baseline_supervisors,
            "processes": kernel_stats()["processes"] <= self._baseline_processes,
            "threads": self._threads_back(),
        }
        return [name for name, held in checks.items() if not held]

    def _runs_running(self) -> list[str]:
        return ["runs"] if self._supervised(RUN_SUPERVISOR) else []

    def _threads_back(self) -> bool:
        others, pools = _threads()
        within = all(pool["threads"] <= pool["max_threads"] for pool in pools.values())
        return others.total() <= self._baseline_threads and within

    def _supervised(self, supervisor: str) -> int:
        return DynamicSupervisor.count_children(supervisor)["active"]

    def _supervisor_counts(self) -> dict[str, int]:
        return {
            RUN_SUPERVISOR: self._supervised(RUN_SUPERVISOR),
            AGENT_SUPERVISOR: self._supervised(AGENT_SUPERVISOR),
            "default_task_supervisor": default_task_supervisor().count(),
        }

    def _invariants(self) -> list[InvariantResult]:
        others, pools = _threads()
        results = [
            invariants.no_open_invocations(runs.stats()),
            invariants.no_leaked_permits(admission_status()),
            invariants.no_leaked_processes(self._baseline_processes, kernel_stats()["processes"]),
            invariants.no_leaked_threads(
                self._baseline_threads,
                others.total(),
                pools,
                others - self._baseline_thread_kinds,
            ),
            invariants.supervisor_counts(self._baseline_supervisors, self._supervisor_counts()),
        ]
        kinds = _kinds(self._scenario) if self._scenario is not None else set()
        if kinds & {"runs", "sessions"}:
            results.append(invariants.replies_match(self._completed, self._reply_problems))
            checked, problems = self._check_sessions()
            results.append(invariants.sessions_consistent(checked, problems))
        return results

    def _check_sessions(self) -> tuple[int, list[str]]:
        """Each checked session holds exactly its completed invocations' events."""
        assert self._scenario is not None
        expected_events = 2 + 2 * self._scenario.tool_calls
        own = {f"r{index}": {index} for index in self._checked_runs}
        problems: list[str] = []
        checked = 0
        for sessions, exact in ((own, True), (self._session_done, self._tracked_all())):
            for session_id, done in sorted(sessions.items()):
                if len(problems) >= MAX_PROBLEMS:
                    return checked, problems[:MAX_PROBLEMS]
                events = self._events(session_id)
                if events is None:
                    if done:
                        problems.append(f"{session_id}: missing, with {len(done)} completed runs")
                    continue
                checked += 1
                problems.extend(
                    invariants.check_history(session_id, events, done, expected_events, exact=exact)
                )
        return checked, problems[:MAX_PROBLEMS]

    def _tracked_all(self) -> bool:
        return self._tracked < MAX_TRACKED_MESSAGES

    def _events(self, session_id: str) -> list[Event] | None:
        assert self._sessions is not None
        try:
            return list(self._sessions.get_session(APP_NAME, USER_ID, session_id).events)
        except AdkError:
            return None

    def _problem(self, text: str) -> None:
        if len(self._reply_problems) < MAX_PROBLEMS:
            self._reply_problems.append(text)

    async def _teardown(self) -> None:
        """Stop what `open` started; the runtime only if this target started it."""
        for workload in self._workloads.values():
            try:
                await workload.close()
            except Exception as error:
                _log.warning("adk.stress.workload_close_failed", error=type(error).__name__)
        self._workloads.clear()
        for agent in self._agents:
            try:
                stop_agent(agent)
            except AdkError:
                pass  # already gone
        self._agents.clear()
        if self._sessions is not None:
            self._sessions.close()
            self._sessions = None
        if self._owns_app:
            adk_app.stop()
            self._owns_app = False
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None


def _turn(history: Sequence[Content]) -> tuple[int, str]:
    """Tool rounds since the newest user message, and that message's text."""
    rounds = 0
    for content in reversed(history):
        if any(isinstance(part, FunctionResponsePart) for part in content.parts):
            rounds += 1
        elif content.role == "user":
            return rounds, content.text_value()
    return rounds, ""


def _outcome(result: object) -> Outcome:
    match result:
        case Completed():
            return Outcome.COMPLETED
        case Cancelled():
            return Outcome.CANCELLED
        case Failed() | Paused():
            return Outcome.FAILED
        case _:
            return Outcome.FAILED


def _event(action: str, target: str, outcome: str) -> ChaosEvent:
    return ChaosEvent(t_s=0.0, action=action, target=target, outcome=outcome)


def _threads() -> tuple[Counter[str], dict[str, dict[str, int]]]:
    """The live threads outside the kernel's pools, counted by name without their
    numbering, and each pool's threads against its bound (one enumeration)."""
    threads = threading.enumerate()
    others = Counter(
        _NUMBERING.sub("", thread.name) for thread in threads if thread_pool_of(thread.name) is None
    )
    return others, thread_pools(threads)


def _kinds(scenario: Scenario) -> set[str]:
    if scenario.kind != "mixed" or scenario.mix is None:
        return {scenario.kind}
    return {kind for kind, weight in scenario.mix.weights().items() if weight > 0}


def _workload_kinds(scenario: Scenario) -> list[str]:
    return [kind for kind in MIX_KINDS if kind in _kinds(scenario) and kind in WORKLOADS]
